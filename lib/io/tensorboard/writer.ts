/**
 * SummaryWriter: TensorBoard event files written as torch.utils.tensorboard writes them, with
 * PyTorch's method names. Each add* call encodes one Event (lib/io/tensorboard/summary.ts), frames
 * it as a TFRecord and queues it; queued records are appended to the file asynchronously
 * (fs.promises, never on the event loop) when `maxQueue` of them wait, every `flushSecs`, and on
 * flush() and close(). A failed write is reported by the next flush() or close().
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as nodePath from 'node:path';

import { invalidArg, NodeformerError } from '../../validation/errors';
import { OptionKeys } from '../../validation/options';
import { Tensor } from '../../core/tensor';
import { experimentSummary, type HparamValue, sessionEndSummary, sessionStartSummary } from './hparams';
import { DEFAULT_BINS, makeHistogram } from './histogram';
import { pngInfo } from './png';
import { fileVersionEvent, histogramSummary, imageSummary, scalarSummary, summaryEvent, textSummary } from './summary';
import { tfRecord } from './tfrecord';

/** Options of SummaryWriter. */
export interface SummaryWriterOptions {
  /** Seconds between automatic flushes (default 120, PyTorch's flush_secs). */
  flushSecs?: number;
  /** Queued events that trigger a write (default 10, PyTorch's max_queue). */
  maxQueue?: number;
  /** Appended to the event file's name (default ''). */
  filenameSuffix?: string;
}
const WRITER_OPTIONS = new OptionKeys<SummaryWriterOptions>('SummaryWriter options', { flushSecs: true, maxQueue: true, filenameSuffix: true });

/** Options of addHparams. */
export interface AddHparamsOptions {
  /** The sub-folder of the logdir that holds this session (default: the current time in seconds, as PyTorch). */
  runName?: string;
  /** The step of the records (default 0). */
  step?: number;
}
const HPARAMS_OPTIONS = new OptionKeys<AddHparamsOptions>('addHparams options', { runName: true, step: true });

/** Values addHistogram takes: a typed array, a plain array or a Tensor (copied to the host). */
export type HistogramValues = Float32Array | Float64Array | Int32Array | readonly number[] | Tensor;

let fileCounter = 0;

function tagArg(tag: unknown): string {
  if (typeof tag !== 'string' || tag.length === 0) invalidArg('tag', 'a non-empty string', tag);
  return tag;
}

function stepArg(step: unknown): number {
  if (step === undefined) return 0;
  if (!Number.isSafeInteger(step) || (step as number) < 0) invalidArg('step', 'a non-negative integer', step);
  return step as number;
}

function wallTimeArg(wallTime: unknown): number {
  if (wallTime === undefined) return Date.now() / 1000;
  if (typeof wallTime !== 'number' || !Number.isFinite(wallTime) || wallTime < 0) invalidArg('wallTime', 'seconds since the epoch', wallTime);
  return wallTime;
}

function numberArg(name: string, v: unknown): number {
  if (typeof v !== 'number') invalidArg(name, 'a number', v);
  return v;
}

function histogramValues(values: unknown): ArrayLike<number> {
  const data = values instanceof Tensor ? values.toArray() : values;
  if (!(data instanceof Float32Array || data instanceof Float64Array || data instanceof Int32Array || Array.isArray(data)) || data.length === 0)
    invalidArg('values', 'a non-empty Float32Array, Float64Array, Int32Array, number[] or Tensor', values);
  const lo = DEFAULT_BINS[0], hi = DEFAULT_BINS[DEFAULT_BINS.length - 1];
  for (let i = 0; i < data.length; i++)
    if (typeof data[i] !== 'number' || !(data[i] >= lo && data[i] <= hi))
      invalidArg(`values[${i}]`, `a finite number within ±${hi.toPrecision(3)}`, data[i]);
  return data as ArrayLike<number>;
}

function hparamsArg(hparams: unknown): Record<string, HparamValue> {
  if (hparams === null || typeof hparams !== 'object' || Array.isArray(hparams)) invalidArg('hparams', 'an object of hyperparameters', hparams);
  for (const [k, v] of Object.entries(hparams))
    if (!(typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v))))
      invalidArg(`hparams.${k}`, 'a finite number, a string or a boolean', v);
  return hparams as Record<string, HparamValue>;
}

function metricsArg(metrics: unknown): Record<string, number> {
  if (metrics === null || typeof metrics !== 'object' || Array.isArray(metrics)) invalidArg('metrics', 'an object of metric values', metrics);
  for (const [k, v] of Object.entries(metrics)) numberArg(`metrics.${k}`, v);
  return metrics as Record<string, number>;
}

/** Writes TensorBoard event files into `logdir` (see the file comment). */
export class SummaryWriter {
  /** The folder of the run (created on the first write). */
  readonly logdir: string;
  /** The path of the event file: `events.out.tfevents.<seconds>.<hostname>.<pid>.<n><suffix>`, as PyTorch names it. */
  readonly file: string;
  private readonly options: SummaryWriterOptions;
  private readonly maxQueue: number;
  private queued: Uint8Array[] = [];
  /** The appends in flight, in order; never rejects (a failure is kept in `failure`). */
  private written: Promise<void> = Promise.resolve();
  private failure: NodeformerError | null = null;
  private readonly timer: NodeJS.Timeout;
  /** Writers of sub-runs (addScalars' series, addHparams' sessions), flushed and closed with this one. */
  private readonly children = new Map<string, SummaryWriter>();
  private closing: Promise<void> | null = null;

  constructor(logdir: string, options: SummaryWriterOptions = {}) {
    if (typeof logdir !== 'string' || logdir.length === 0) invalidArg('logdir', 'a folder path', logdir);
    this.options = WRITER_OPTIONS.check('options', options);
    const { flushSecs = 120, maxQueue = 10, filenameSuffix = '' } = this.options;
    if (typeof flushSecs !== 'number' || !(flushSecs > 0) || flushSecs > 2 ** 31 / 1000) invalidArg('options.flushSecs', 'a positive number of seconds', flushSecs);
    if (!Number.isSafeInteger(maxQueue) || maxQueue < 1) invalidArg('options.maxQueue', 'a positive integer', maxQueue);
    if (typeof filenameSuffix !== 'string' || /[/\\]/.test(filenameSuffix)) invalidArg('options.filenameSuffix', 'a string without path separators', filenameSuffix);
    this.logdir = logdir;
    this.maxQueue = maxQueue;
    const now = Date.now() / 1000;
    this.file = nodePath.join(logdir,
      `events.out.tfevents.${String(Math.floor(now)).padStart(10, '0')}.${os.hostname()}.${process.pid}.${fileCounter++}${filenameSuffix}`);
    this.queued.push(tfRecord(fileVersionEvent(now)));
    void this.write(); // the file exists from the start, as PyTorch's does
    this.timer = setInterval(() => void this.write(), flushSecs * 1000).unref();
  }

  /** Logs a scalar (PyTorch's add_scalar). */
  addScalar(tag: string, value: number, step?: number, wallTime?: number): void {
    this.add(step, wallTime, scalarSummary(tagArg(tag), numberArg('value', value)));
  }

  /**
   * Logs several scalars on one chart (PyTorch's add_scalars): each key is its own run, in the
   * folder `<logdir>/<mainTag with / as _>_<key>`, under the tag `mainTag`.
   */
  addScalars(mainTag: string, values: Record<string, number>, step?: number, wallTime?: number): void {
    tagArg(mainTag);
    if (values === null || typeof values !== 'object' || Array.isArray(values) || Object.keys(values).length === 0)
      invalidArg('values', 'a non-empty object of scalars', values);
    for (const [k, v] of Object.entries(values)) numberArg(`values.${k}`, v);
    const [s, t] = [stepArg(step), wallTimeArg(wallTime)];
    for (const [k, v] of Object.entries(values)) this.child(`${mainTag.replace(/\//g, '_')}_${k}`).addScalar(mainTag, v, s, t);
  }

  /** Logs an image given as the bytes of a PNG file (its size and channels are read from its header). */
  addImage(tag: string, png: Uint8Array, step?: number, wallTime?: number): void {
    this.add(step, wallTime, imageSummary(tagArg(tag), pngInfo('png', png), png));
  }

  /** Logs the histogram of `values` over TensorFlow's default buckets (PyTorch's add_histogram with bins='tensorflow'). */
  addHistogram(tag: string, values: HistogramValues, step?: number, wallTime?: number): void {
    this.add(step, wallTime, histogramSummary(tagArg(tag), makeHistogram(histogramValues(values))));
  }

  /** Logs a text (Markdown) under `<tag>/text_summary` (PyTorch's add_text). */
  addText(tag: string, text: string, step?: number, wallTime?: number): void {
    if (typeof text !== 'string') invalidArg('text', 'a string', text);
    this.add(step, wallTime, textSummary(tagArg(tag), text));
  }

  /**
   * Logs a session of the hparams dashboard (PyTorch's add_hparams): the hyperparameters and the
   * final metrics, in the sub-run `<logdir>/<runName>`, each metric also a scalar there.
   */
  addHparams(hparams: Record<string, HparamValue>, metrics: Record<string, number>, options: AddHparamsOptions = {}): void {
    const h = hparamsArg(hparams), m = metricsArg(metrics);
    const { runName = String(Date.now() / 1000), step } = HPARAMS_OPTIONS.check('options', options);
    if (typeof runName !== 'string' || runName.length === 0 || runName.split(/[/\\]/).includes('..'))
      invalidArg('options.runName', 'a folder name inside the logdir', runName);
    const s = stepArg(step);
    const run = this.child(runName);
    for (const summary of [experimentSummary(h, Object.keys(m)), sessionStartSummary(h), sessionEndSummary()]) run.add(s, undefined, summary);
    for (const [k, v] of Object.entries(m)) run.addScalar(k, v, s);
  }

  /** Writes every queued event (and those of the sub-runs) to disk; rejects with the first failed write since the last report. */
  async flush(): Promise<void> {
    await Promise.all([this.write(), ...[...this.children.values()].map((c) => c.flush())]);
    const f = this.failure;
    this.failure = null;
    if (f) throw f;
  }

  /** Flushes and closes the writer (and its sub-runs); later add* calls throw ERR_NF_STATE. Calling it again returns the same Promise. */
  close(): Promise<void> {
    if (!this.closing) {
      clearInterval(this.timer);
      this.closing = this.flush().finally(() => Promise.all([...this.children.values()].map((c) => c.close())));
    }
    return this.closing;
  }

  /** Whether close() was called. */
  get closed(): boolean {
    return this.closing !== null;
  }

  private add(step: number | undefined, wallTime: number | undefined, summary: Uint8Array): void {
    if (this.closing) throw new NodeformerError('ERR_NF_STATE', `SummaryWriter(${JSON.stringify(this.logdir)}) used after close()`);
    this.queued.push(tfRecord(summaryEvent(wallTimeArg(wallTime), stepArg(step), summary)));
    if (this.queued.length >= this.maxQueue) void this.write();
  }

  private child(name: string): SummaryWriter {
    let w = this.children.get(name);
    if (!w) this.children.set(name, (w = new SummaryWriter(nodePath.join(this.logdir, name), this.options)));
    return w;
  }

  /** Appends the queued records behind the writes in flight; resolves when they are on disk (or failed). */
  private write(): Promise<void> {
    const batch = this.queued;
    this.queued = [];
    if (batch.length === 0) return this.written;
    return (this.written = this.written.then(async () => {
      await fs.promises.mkdir(this.logdir, { recursive: true });
      await fs.promises.appendFile(this.file, Buffer.concat(batch));
    }).catch((e: Error) => {
      this.failure ??= new NodeformerError('ERR_NF_INVALID_ARG', `Cannot write the event file ${this.file}: ${e.message}`);
    }));
  }
}
