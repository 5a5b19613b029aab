/** `nodeformer train --logdir`: the TensorBoard records of the demo's run (fit() with the tensorBoard callback and the attention grid). */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { PNG } from 'pngjs';
import { describe, expect, it } from 'vitest';

import { main } from '../lib/cli/program';
import { readEvents, type EventRecord } from './support/tfrecord_reader';

function events(dir: string): EventRecord[] {
  const file = fs.readdirSync(dir).find((f) => f.startsWith('events.out.tfevents.'))!;
  return readEvents(fs.readFileSync(path.join(dir, file)));
}

describe('nodeformer train --logdir', () => {
  it('logs loss, accuracy, learning rate, throughput and the attention grid each epoch, and the run\'s hparams', async () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-cli-tb-')), logdir = path.join(out, 'runs');
    const lines: string[] = [];
    const status = await main(['train', '--epochs', '2', '--train-size', '200', '--test-size', '60', '--batch-size', '40', '--out', out, '--logdir', logdir],
      (l) => lines.push(l));
    expect(status).toBe(0);
    expect(lines.at(-1)).toContain(`TensorBoard logs in ${logdir}`);
    const ev = events(logdir);
    const steps = (tag: string) => ev.filter((e) => e.values[0]?.tag === tag).map((e) => e.step);
    for (const tag of ['loss/train', 'loss/validation', 'accuracy/train', 'accuracy/validation', 'learning_rate', 'throughput/samples_per_second', 'attention'])
      expect(steps(tag), tag).toEqual([1, 2]);
    const epochLines = lines.filter((l) => l.startsWith('epoch '));
    const trainLoss = ev.filter((e) => e.values[0]?.tag === 'loss/train').map((e) => e.values[0].simpleValue!.toFixed(4));
    expect(epochLines.map((l) => /train loss ([\d.]+)/.exec(l)![1])).toEqual(trainLoss);
    const image = ev.find((e) => e.values[0]?.tag === 'attention')!.values[0].image!;
    const png = PNG.sync.read(Buffer.from(image.encoded));
    expect([png.width, png.height]).toEqual([image.width, image.height]);
    expect(image.width).toBeGreaterThan(300);
    expect(ev.some((e) => e.values[0]?.tag === 'run/text_summary')).toBe(true);
    const hp = events(path.join(logdir, 'hparams')).flatMap((e) => e.values.map((v) => v.tag));
    expect(hp).toEqual(['_hparams_/experiment', '_hparams_/session_start_info', '_hparams_/session_end_info', 'hparam/test_accuracy', 'hparam/test_loss']);
    fs.rmSync(out, { recursive: true, force: true });
  });
});
