/**
 * SummaryWriter: CRC-32C and TFRecord framing against known vectors, record bytes against what
 * torch.utils.tensorboard writes (test/fixtures/tensorboard.json, scripts/make_tensorboard_fixtures.py),
 * a round trip of every method through the reader in test/support/tfrecord_reader.ts, flushing
 * (queue size, interval, close), and bad arguments.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { NodeformerError, SummaryWriter, Tensor } from '../lib';
import { crc32c, maskedCrc32c } from '../lib/io/tensorboard/crc32c';
import { experimentSummary, sessionEndSummary, sessionStartSummary } from '../lib/io/tensorboard/hparams';
import { DEFAULT_BINS, makeHistogram } from '../lib/io/tensorboard/histogram';
import { tfRecord } from '../lib/io/tensorboard/tfrecord';
import { randn, rng } from './helpers';
import { decode, readEvents, readRecords, str, sub, subs, type EventRecord } from './support/tfrecord_reader';

interface Fixture {
  wallTime: number;
  records: { kind: 'scalar' | 'text' | 'image'; tag: string; step: number; value?: number; text?: string; record: string }[];
  histograms: { values: number[]; min: number; max: number; num: number; sum: number; sumSquares: number; bucketLimit: number[]; bucket: number[] }[];
  hparams: { hparams: Record<string, number | string | boolean>; metrics: Record<string, number>; experiment: string; sessionStartInfo: string; sessionEndInfo: string };
}
const fixture = JSON.parse(fs.readFileSync(path.join(__dirname, 'fixtures', 'tensorboard.json'), 'utf8')) as Fixture;
const unhex = (h: string) => Uint8Array.from(Buffer.from(h, 'hex'));
const ascii = (s: string) => new TextEncoder().encode(s);

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-tb-'));
});
afterEach(() => {
  vi.useRealTimers();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The events of the one event file in `logdir`. */
function eventsIn(logdir: string): EventRecord[] {
  const files = fs.readdirSync(logdir).filter((f) => f.startsWith('events.out.tfevents.'));
  expect(files).toHaveLength(1);
  return readEvents(fs.readFileSync(path.join(logdir, files[0])));
}

/** A small valid PNG (signature, IHDR, an IDAT that is not decoded here, IEND) of the given size and colour type. */
function png(width: number, height: number, colorType: number): Uint8Array {
  const bytes = new Uint8Array(45);
  bytes.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, ...ascii('IHDR')]);
  const dv = new DataView(bytes.buffer);
  dv.setUint32(16, width);
  dv.setUint32(20, height);
  bytes.set([8, colorType, 0, 0, 0], 24);
  bytes.set([0, 0, 0, 0, ...ascii('IEND'), 0xae, 0x42, 0x60, 0x82], 33);
  return bytes;
}

describe('CRC-32C and TFRecord framing', () => {
  it('matches the known vectors', () => {
    expect(crc32c(ascii('123456789'))).toBe(0xe3069283);
    expect(crc32c(new Uint8Array(0))).toBe(0);
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa); // RFC 3720 B.4: 32 bytes of zeros
    expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43); // 32 bytes of ones
    expect(crc32c(Uint8Array.from({ length: 32 }, (_, i) => i))).toBe(0x46dd794e); // incrementing
    const c = 0xe3069283;
    expect(maskedCrc32c(ascii('123456789'))).toBe((((c >>> 15) | (c << 17)) + 0xa282ead8) >>> 0);
  });

  it('frames records: length, masked CRC of the length, data, masked CRC of the data', () => {
    const rand = rng(3);
    for (const n of [0, 1, 7, 255, 256, 70000]) {
      const data = Uint8Array.from({ length: n }, () => Math.floor(rand() * 256));
      const r = tfRecord(data);
      const dv = new DataView(r.buffer);
      expect(r.length).toBe(n + 16);
      expect(dv.getBigUint64(0, true)).toBe(BigInt(n));
      expect(dv.getUint32(8, true)).toBe(maskedCrc32c(r.subarray(0, 8)));
      expect(r.subarray(12, 12 + n)).toEqual(data);
      expect(dv.getUint32(12 + n, true)).toBe(maskedCrc32c(data));
      expect(readRecords(r)).toEqual([data]); // the reader's bitwise CRC agrees
    }
  });

  it('the reader rejects a flipped bit', () => {
    const r = tfRecord(ascii('hello'));
    r[14] ^= 4;
    expect(() => readRecords(r)).toThrow(/bad data CRC/);
  });
});

describe('the bytes torch.utils.tensorboard writes', () => {
  it('scalars, text and images: the same framed records', async () => {
    const w = new SummaryWriter(dir);
    for (const c of fixture.records) {
      if (c.kind === 'scalar') w.addScalar(c.tag, c.value!, c.step, fixture.wallTime);
      else if (c.kind === 'text') w.addText(c.tag, c.text!, c.step, fixture.wallTime);
      else w.addImage(c.tag, readEvents(unhex(c.record))[0].values[0].image!.encoded, c.step, fixture.wallTime);
    }
    await w.close();
    const records = readRecords(fs.readFileSync(w.file));
    expect(records).toHaveLength(fixture.records.length + 1);
    fixture.records.forEach((c, i) => expect(Buffer.from(tfRecord(records[i + 1])).toString('hex'), `${c.kind} ${c.tag}`).toBe(c.record));
  });

  it('histograms: the buckets of make_histogram with the default bins', () => {
    for (const h of fixture.histograms) {
      const got = makeHistogram(Float32Array.from(h.values));
      expect(got.bucketLimit).toEqual(h.bucketLimit);
      expect(got.bucket).toEqual(h.bucket);
      expect([got.min, got.max, got.num]).toEqual([h.min, h.max, h.num]);
      // torch sums in float32; these are float64 sums
      expect(got.sum).toBeCloseTo(h.sum, Math.max(0, 4 - Math.ceil(Math.log10(Math.abs(h.sum) + 1))));
      expect(Math.abs(got.sumSquares - h.sumSquares) / Math.max(1e-30, h.sumSquares)).toBeLessThan(1e-5);
    }
  });

  it('hparams: the experiment and session records', () => {
    const { hparams, metrics } = fixture.hparams;
    expect(Buffer.from(experimentSummary(hparams, Object.keys(metrics))).toString('hex')).toBe(fixture.hparams.experiment);
    expect(Buffer.from(sessionEndSummary()).toString('hex')).toBe(fixture.hparams.sessionEndInfo);
    // The session start's map entries may come in any order: compare them as a set.
    const entries = (bytes: Uint8Array) => {
      const value = sub(decode(bytes), 1)!;
      const content = sub(sub(sub(value, 9)!, 1)!, 2)!;
      return subs(sub(content, 3)!, 1).map((e) => `${str(e, 1)}=${Buffer.from(e.get(2)![0].bytes).toString('hex')}`).sort();
    };
    expect(entries(sessionStartSummary(hparams))).toEqual(entries(unhex(fixture.hparams.sessionStartInfo)));
  });
});

describe('SummaryWriter round trip', () => {
  it('writes every kind of record with its values', async () => {
    const w = new SummaryWriter(dir, { filenameSuffix: '.v2' });
    expect(path.basename(w.file)).toMatch(new RegExp(`^events\\.out\\.tfevents\\.\\d{10}\\.${os.hostname()}\\.${process.pid}\\.\\d+\\.v2$`));
    const rand = rng(7);
    const losses = Array.from({ length: 13 }, () => rand() * 3);
    losses.forEach((l, s) => w.addScalar('loss/train', l, s));
    const weights = Float32Array.from(randn(1031, rand, 0.2));
    w.addHistogram('weights', weights, 5);
    w.addHistogram('tensor', Tensor.from(weights.subarray(0, 17), [17]), 6);
    w.addHistogram('plain', [1, 2, 2, 3], 7);
    w.addImage('grey', png(3, 2, 0), 1);
    w.addImage('rgba', png(640, 1, 6), 2);
    w.addText('note', 'Ünïcode *md*', 9);
    await w.close();
    const events = eventsIn(dir);
    expect(events[0].fileVersion).toBe('brain.Event:2');
    expect(events[0].values).toEqual([]);
    const t0 = Date.now() / 1000;
    for (const e of events) expect(Math.abs(e.wallTime - t0)).toBeLessThan(60);
    const byTag = (tag: string) => events.filter((e) => e.values[0]?.tag === tag);
    expect(byTag('loss/train').map((e) => [e.step, e.values[0].simpleValue])).toEqual(losses.map((l, s) => [s, Math.fround(l)]));
    const h = byTag('weights')[0];
    expect(h.step).toBe(5);
    expect(h.values[0].histo).toEqual(makeHistogram(weights));
    expect(h.values[0].histo!.bucket.reduce((a, b) => a + b, 0)).toBe(weights.length);
    expect(byTag('tensor')[0].values[0].histo!.num).toBe(17);
    expect(byTag('plain')[0].values[0].histo).toMatchObject({ min: 1, max: 3, num: 4, sum: 8, sumSquares: 18 });
    expect(byTag('grey')[0].values[0].image).toEqual({ height: 2, width: 3, colorspace: 1, encoded: png(3, 2, 0) });
    expect(byTag('rgba')[0].values[0].image).toMatchObject({ height: 1, width: 640, colorspace: 4 });
    const text = byTag('note/text_summary')[0];
    expect(text.step).toBe(9);
    expect(text.values[0].tensor).toEqual({ dtype: 7, shape: [1], strings: ['Ünïcode *md*'] });
    expect(text.values[0].plugin).toEqual({ name: 'text', content: new Uint8Array(0) });
  });

  it('addScalars writes one run per key; addHparams a session run with its metrics', async () => {
    const w = new SummaryWriter(dir);
    w.addScalars('loss/all', { train: 0.5, valid: 0.75 }, 3);
    w.addScalars('loss/all', { train: 0.25, valid: 0.5 }, 4);
    w.addHparams({ lr: 0.001, opt: 'sgd', nesterov: false }, { 'hparam/acc': 0.5, 'hparam/loss': 1.25 }, { runName: 'session', step: 2 });
    await w.close();
    expect(eventsIn(dir)).toHaveLength(1); // the file version only
    const series = (run: string) => eventsIn(path.join(dir, run)).slice(1).map((e) => [e.step, e.values[0].tag, e.values[0].simpleValue]);
    expect(series('loss_all_train')).toEqual([[3, 'loss/all', 0.5], [4, 'loss/all', 0.25]]);
    expect(series('loss_all_valid')).toEqual([[3, 'loss/all', 0.75], [4, 'loss/all', 0.5]]);
    const session = eventsIn(path.join(dir, 'session')).slice(1);
    expect(session.map((e) => [e.step, e.values[0].tag, e.values[0].plugin?.name, e.values[0].simpleValue])).toEqual([
      [2, '_hparams_/experiment', 'hparams', undefined],
      [2, '_hparams_/session_start_info', 'hparams', undefined],
      [2, '_hparams_/session_end_info', 'hparams', undefined],
      [2, 'hparam/acc', undefined, 0.5],
      [2, 'hparam/loss', undefined, 1.25],
    ]);
    const experiment = sub(decode(session[0].values[0].plugin!.content), 2)!;
    expect(subs(experiment, 4).map((info) => str(info, 1))).toEqual(['lr', 'opt', 'nesterov']);
    expect(subs(experiment, 5).map((m) => str(sub(m, 1)!, 2))).toEqual(['hparam/acc', 'hparam/loss']);
  });
});

describe('SummaryWriter flushing', () => {
  const size = (w: SummaryWriter) => (fs.existsSync(w.file) ? fs.statSync(w.file).size : 0);
  const settle = () => new Promise((r) => setTimeout(r, 50));

  it('creates the file at once and appends when maxQueue events wait', async () => {
    const w = new SummaryWriter(dir, { maxQueue: 3 });
    await settle();
    const first = size(w);
    expect(first).toBeGreaterThan(0); // the file version event
    w.addScalar('a', 1, 1);
    w.addScalar('a', 2, 2);
    await settle();
    expect(size(w)).toBe(first);
    w.addScalar('a', 3, 3);
    await settle();
    expect(size(w)).toBeGreaterThan(first);
    expect(eventsIn(dir)).toHaveLength(4);
    await w.close();
  });

  it('flushes every flushSecs', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const w = new SummaryWriter(dir, { flushSecs: 5 });
    w.addScalar('a', 1, 1);
    await settle();
    expect(eventsIn(dir)).toHaveLength(1);
    vi.advanceTimersByTime(4999);
    await settle();
    expect(eventsIn(dir)).toHaveLength(1);
    vi.advanceTimersByTime(1);
    await settle();
    expect(eventsIn(dir)).toHaveLength(2);
    await w.close();
  });

  it('flush() writes what waits; close() twice is one close; adding after close throws ERR_NF_STATE', async () => {
    const w = new SummaryWriter(dir);
    w.addText('t', 'x', 1);
    await w.flush();
    expect(eventsIn(dir)).toHaveLength(2);
    w.addScalar('a', 2, 2);
    const closing = w.close();
    expect(w.close()).toBe(closing);
    expect(w.closed).toBe(true);
    await closing;
    await w.close();
    expect(eventsIn(dir)).toHaveLength(3);
    expect(() => w.addScalar('a', 1, 3)).toThrow(expect.objectContaining({ code: 'ERR_NF_STATE' }));
  });

  it('a failed write surfaces on flush() and close()', async () => {
    const blocker = path.join(dir, 'file');
    fs.writeFileSync(blocker, 'not a folder');
    const w = new SummaryWriter(path.join(blocker, 'run'));
    w.addScalar('a', 1, 1);
    await expect(w.flush()).rejects.toThrow(/Cannot write the event file .*run/);
    w.addScalar('a', 2, 2);
    await expect(w.close()).rejects.toBeInstanceOf(NodeformerError);
  });

  it('writes in order when many records are queued at once', async () => {
    const w = new SummaryWriter(dir, { maxQueue: 1 });
    for (let s = 0; s < 500; s++) w.addScalar('s', s, s);
    await w.close();
    expect(eventsIn(dir).slice(1).map((e) => e.step)).toEqual(Array.from({ length: 500 }, (_, s) => s));
  });
});

describe('SummaryWriter arguments', () => {
  const code = (f: () => unknown, re: RegExp) => {
    expect(f).toThrow(expect.objectContaining({ code: 'ERR_NF_INVALID_ARG' }));
    expect(f).toThrow(re);
  };

  it('rejects bad constructor arguments and unknown options', () => {
    code(() => new SummaryWriter(''), /logdir/);
    code(() => new SummaryWriter(dir, { flushSec: 1 } as never), /Unknown key 'flushSec' \(did you mean 'flushSecs'\?\)/);
    code(() => new SummaryWriter(dir, { flushSecs: 0 }), /options\.flushSecs/);
    code(() => new SummaryWriter(dir, { maxQueue: 1.5 }), /options\.maxQueue/);
    code(() => new SummaryWriter(dir, { filenameSuffix: '/x' }), /options\.filenameSuffix/);
  });

  it('rejects bad values, steps, tags, images, histograms and hparams', async () => {
    const w = new SummaryWriter(dir);
    code(() => w.addScalar('', 1, 0), /tag/);
    code(() => w.addScalar('a', '1' as never, 0), /value/);
    code(() => w.addScalar('a', 1, -1), /step/);
    code(() => w.addScalar('a', 1, 1.5), /step/);
    code(() => w.addScalar('a', 1, 1, -5), /wallTime/);
    code(() => w.addScalars('a', {}, 1), /values/);
    code(() => w.addScalars('a', { x: null as never }, 1), /values\.x/);
    code(() => w.addImage('i', new Uint8Array(50), 0), /png/);
    code(() => w.addImage('i', png(0, 3, 2), 0), /png/);
    code(() => w.addImage('i', png(3, 3, 5), 0), /colour type/);
    code(() => w.addHistogram('h', [], 0), /values/);
    code(() => w.addHistogram('h', [1, NaN], 0), /values\[1\]/);
    code(() => w.addHistogram('h', Float32Array.of(1e30), 0), /values\[0\]/);
    code(() => w.addHistogram('h', 'abc' as never, 0), /values/);
    code(() => w.addText('t', 5 as never, 0), /text/);
    code(() => w.addHparams({ lr: [1] as never }, {}), /hparams\.lr/);
    code(() => w.addHparams({ lr: Infinity }, {}), /hparams\.lr/);
    code(() => w.addHparams({ lr: 1 }, { acc: 'x' as never }), /metrics\.acc/);
    code(() => w.addHparams({ lr: 1 }, {}, { runName: '../up' }), /runName/);
    code(() => w.addHparams({ lr: 1 }, {}, { runNme: 'x' } as never), /Unknown key 'runNme' \(did you mean 'runName'\?\)/);
    await w.close();
    expect(eventsIn(dir)).toHaveLength(1); // nothing half-written
  });

  it('the default bins are symmetric around 0 and grow by 1.1', () => {
    const n = DEFAULT_BINS.length;
    expect(DEFAULT_BINS[(n - 1) / 2]).toBe(0);
    expect(DEFAULT_BINS[(n + 1) / 2]).toBe(1e-12);
    expect(DEFAULT_BINS[n - 1]).toBeLessThan(1e20);
    expect(DEFAULT_BINS[n - 1] * 1.1).toBeGreaterThanOrEqual(1e20);
  });
});
