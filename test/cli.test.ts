import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { PNG } from 'pngjs';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { digitPng } from '../lib/cli/images';
import { DIGIT_PIXELS, loadMnist } from '../lib/cli/mnist';
import { ViTClassifier } from '../lib/models/vit';
import { runCli as run } from './support/run_cli';

const root = path.resolve(__dirname, '..');

/** Runs the real entry point (lib/cli/program.ts through tsx) as a user would run the `nodeformer` bin. */
function cli(...args: string[]) {
  const r = spawnSync(path.join(root, 'node_modules', '.bin', 'tsx'), [path.join(root, 'lib', 'cli', 'program.ts'), ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

afterEach(() => vi.restoreAllMocks());

describe('nodeformer command line', () => {
  it('prints help (exit 0) and rejects an unknown flag with a suggestion (exit 2)', () => {
    const help = cli('--help');
    expect(help.status).toBe(0);
    for (const cmd of ['train', 'eval', 'predict', 'bench']) expect(help.stdout).toContain(cmd);
    const trainHelp = cli('train', '--help');
    expect(trainHelp.status).toBe(0);
    for (const flag of ['--epochs', '--batch-size', '--out', '--threads', '--device', '--seed']) expect(trainHelp.stdout).toContain(flag);

    const unknown = cli('train', '--epoch', '3');
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain("unknown option '--epoch'");
    expect(unknown.stderr).toContain('--epochs');
  });

  it('rejects bad values, CUDA on this build and missing files with exit status 2', async () => {
    for (const args of [['train', '--batch-size', '0'], ['train', '--epochs', 'two'], ['train', '--device', 'gpu'], ['eval', '--threads', '-1']]) {
      const r = await run(...args);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/error: option .* (is invalid|Allowed choices)/);
    }
    vi.stubEnv('NF_CUDA_BACKEND', 'none'); // as a CPU-only install (test/cuda_device.test.ts trains on the emulated backend)
    const cuda = await run('train', '--device', 'cuda');
    vi.unstubAllEnvs();
    expect(cuda.status).toBe(2);
    expect(cuda.stderr).toContain('built without CUDA');
    const tooMany = await run('train', '--train-size', '9000', '--test-size', '2000');
    expect(tooMany.status).toBe(2);
    const missing = await run('eval', '--model', path.join(os.tmpdir(), 'no-such-model.safetensors'));
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('no such file');
    const noPng = await run('predict', 'no-such-digit.png', '--model', path.join(os.tmpdir(), 'no-such-model.safetensors'));
    expect(noPng.status).toBe(2);
    const bench = await run('bench', '--', '--help'); // the harness's own help: runs nothing
    expect(bench.status).toBe(0);
  });

  it('trains a tiny model for one epoch, writes the checkpoint and pictures, then evaluates and predicts with it', async () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-cli-'));
    const train = await run('train', '--epochs', '1', '--train-size', '300', '--test-size', '100', '--batch-size', '50', '--out', out);
    expect(train.status, train.stderr).toBe(0);
    expect(train.out).toMatch(/epoch 1\/1 .* train loss [\d.]+ acc [\d.]+%/);
    expect(train.out).toMatch(/Test accuracy [\d.]+% \(\d+\/100\) after 1 epoch in [\d.]+ s \(\d+ training images\/s\)/);

    for (const name of ['training-curves.png', 'attention.png', 'positional-encoding.png', 'samples/digit-7.png']) {
      const png = PNG.sync.read(fs.readFileSync(path.join(out, name)));
      expect(png.width, name).toBeGreaterThan(0);
    }
    const model = ViTClassifier.load(path.join(out, 'model.safetensors'));
    expect(model.config).toMatchObject({ imgSize: 28, patchSize: 7, inChannels: 1, numClasses: 10 });

    const checkpoint = path.join(out, 'model.safetensors');
    const evaluated = await run('eval', '--model', checkpoint, '--test-size', '200');
    expect(evaluated.status, evaluated.stderr).toBe(0);
    expect(evaluated.out).toMatch(/test accuracy [\d.]+% \(\d+\/200\), loss [\d.]+/);

    const samples = fs.readdirSync(path.join(out, 'samples')).map((f) => path.join(out, 'samples', f));
    expect(samples).toHaveLength(10);
    const predicted = await run('predict', ...samples, '--model', checkpoint);
    expect(predicted.status, predicted.stderr).toBe(0);
    const lines = predicted.out.split('\n');
    expect(lines).toHaveLength(10);
    for (const l of lines) expect(l).toMatch(/digit-\d\.png: \d \(\d+\.\d%\)$/);

    const notPng = await run('predict', checkpoint, '--model', checkpoint);
    expect(notPng.status).toBe(2);
    expect(notPng.stderr).toContain('Expected an image (PNG, JPEG');
  });

  it("eval and predict take --precision int8 (CPU inference; with --device cuda a usage error)", async () => {
    const checkpoint = path.join(root, 'test', 'fixtures', 'int8', 'mnist_vit.safetensors');
    const evaluated = await run('eval', '--model', checkpoint, '--test-size', '200', '--precision', 'int8');
    expect(evaluated.status, evaluated.stderr).toBe(0);
    expect(evaluated.out).toMatch(/test accuracy [\d.]+% \(\d+\/200\), loss [\d.]+/);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-cli-int8-'));
    const { test } = loadMnist({ trainSize: 1, testSize: 3 });
    const files = [0, 1, 2].map((i) => {
      const f = path.join(dir, `digit-${test.labels[i]}.png`);
      fs.writeFileSync(f, digitPng(test.pixels.subarray(i * DIGIT_PIXELS, (i + 1) * DIGIT_PIXELS)));
      return f;
    });
    const predicted = await run('predict', ...files, '--model', checkpoint, '--precision', 'int8');
    expect(predicted.status, predicted.stderr).toBe(0);
    for (const l of predicted.out.split('\n')) expect(l).toMatch(/digit-(\d)\.png: \1 \(\d+\.\d%\)$/);
    const cuda = await run('eval', '--model', checkpoint, '--precision', 'int8', '--device', 'cuda');
    expect(cuda.status).toBe(2);
    expect(cuda.stderr).toContain('--precision int8 runs on the CPU');
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
