/**
 * Training checkpoints. One safetensors file holds what continuing training exactly needs: the
 * model's parameters ("model.<name>"), the optimizer's state buffers ("optimizer.<param
 * index>.<buffer index>"), and in its metadata the step, the optimizer's type, options and step
 * counts, every dropout random stream of the model, the learning-rate schedule's config, and the
 * model's class and config as saveModel writes them (so loadModel(path) restores the model alone). Files are written atomically (lib/io/atomic.ts), so a crash mid-write leaves the previous
 * checkpoint intact; resume() restores everything, so training continues with the losses of an
 * uninterrupted run, bit for bit.
 */
import { writeFileAtomic, writeFileAtomicAsync } from '../io/atomic';
import { invalidArg, NodeformerError } from '../validation/errors';
import { Module } from '../core/module';
import { OptionKeys } from '../validation/options';
import { CHECKPOINT_FORMAT as FORMAT, modelMetadata, weightEntries } from '../io/persist';
import type { Optimizer, OptimizerState } from './optim';
import type { Program } from '../core/program';
import type { Random } from '../core/random';
import { entriesToTensors, parseSafetensors, readFile, readFileAsync, serializeSafetensors, type RawEntry } from '../io/safetensors';
import { scheduleFromConfig, type Schedule, type ScheduleConfig } from './schedule';
import { Tensor } from '../core/tensor';


/** What saveCheckpoint stores. */
export interface CheckpointState {
  model: Module;
  optimizer?: Optimizer;
  /** Stored as its config (the library's schedules carry one); resume rebuilds it. */
  schedule?: Schedule;
  /** Training steps done so far. */
  step: number;
  /** JSON-serialisable data of the caller's, returned by resume (fit() keeps its epoch and history here). */
  meta?: Record<string, unknown>;
}
const CHECKPOINT_STATE = new OptionKeys<CheckpointState>('saveCheckpoint state', { model: true, optimizer: true, schedule: true, step: true, meta: true });

/** A random stream's state (Random.getState). */
export type RandomState = ReturnType<Random['getState']>;

/** A checkpoint as read back (loadCheckpoint). */
export interface Checkpoint {
  step: number;
  /** Parameters by name (tensors owned by the caller). */
  model: Record<string, Tensor>;
  /** The optimizer's class name and state, or null when none was saved. */
  optimizer: (OptimizerState & { type: string }) | null;
  /** The model's dropout random streams by name (Module.namedRngs). */
  rng: Record<string, RandomState>;
  schedule: ScheduleConfig | null;
  /** The caller's data saved with it (CheckpointState.meta), or null. */
  meta: Record<string, unknown> | null;
}

/** What resume returns. */
export interface ResumeResult {
  /** Training steps done when the checkpoint was saved. */
  step: number;
  /** The saved schedule, rebuilt (null when none was saved). */
  schedule: Schedule | null;
  /** The caller's data saved with it (CheckpointState.meta), or null. */
  meta: Record<string, unknown> | null;
}

function checkState(state: CheckpointState): void {
  if (state === null || typeof state !== 'object') invalidArg('state', 'an object {model, optimizer?, schedule?, step}', state);
  CHECKPOINT_STATE.check('state', state);
  if (!(state.model instanceof Module)) invalidArg('state.model', 'a Module', state.model);
  if (!Number.isSafeInteger(state.step) || state.step < 0) invalidArg('state.step', 'a non-negative integer', state.step);
  if (state.optimizer !== undefined && (typeof state.optimizer?.stateDict !== 'function'))
    invalidArg('state.optimizer', 'an Optimizer (AdamW, SGD)', state.optimizer);
  if (state.schedule !== undefined && (typeof state.schedule !== 'function' || !state.schedule.config))
    invalidArg('state.schedule', 'a schedule made by cosineWithWarmup or inverseSqrtWarmup', state.schedule);
  if (state.meta !== undefined && (state.meta === null || typeof state.meta !== 'object' || Array.isArray(state.meta)))
    invalidArg('state.meta', 'an object of JSON-serialisable values', state.meta);
}

/** The checkpoint's bytes; a program so it runs between the model's queued calls. */
function* serializeOps(state: CheckpointState): Program<Uint8Array> {
  const record: Record<string, Tensor> = {};
  for (const [name, p] of state.model.namedParameters()) record[`model.${name}`] = p;
  const metadata: Record<string, string> = { format: FORMAT, step: String(state.step), ...modelMetadata(state.model) };
  const copies: Tensor[] = [];
  try {
    if (state.optimizer) {
      const s = state.optimizer.stateDict();
      s.state.forEach((e, i) => e.buffers.forEach((b, j) => {
        const t = Tensor.from(b, [b.length]);
        copies.push(t);
        record[`optimizer.${i}.${j}`] = t;
      }));
      metadata.optimizer = JSON.stringify({ type: state.optimizer.constructor.name, options: s.options,
        steps: s.state.map((e) => e.step), buffers: s.state[0]?.buffers.length ?? 0 });
    }
    metadata.rng = JSON.stringify(Object.fromEntries(state.model.namedRngs().map(([n, r]) => [n, r.getState()])));
    if (state.schedule) metadata.schedule = JSON.stringify(state.schedule.config);
    if (state.meta) metadata.meta = JSON.stringify(state.meta);
    return serializeSafetensors(record, metadata);
  } finally {
    for (const t of copies) t.dispose();
  }
}

/**
 * Writes a checkpoint of the model, optimizer, schedule and step to `path` atomically. Throws
 * ERR_NF_STATE while asynchronous calls on the model are pending (use saveCheckpointAsync).
 */
export function saveCheckpoint(path: string, state: CheckpointState): void {
  checkState(state);
  writeFileAtomic(path, state.model.runOps('saveCheckpoint', serializeOps(state)));
}

/**
 * saveCheckpoint queued behind the model's asynchronous calls (so it captures the state between
 * two of them), with the file written off the main thread.
 */
export async function saveCheckpointAsync(path: string, state: CheckpointState): Promise<void> {
  checkState(state);
  await writeFileAtomicAsync(path, await state.model.enqueueOps(() => serializeOps(state)));
}

function formatError(message: string): never {
  throw new NodeformerError('ERR_NF_FORMAT', `checkpoint: ${message}`);
}

function json<T>(metadata: Record<string, string>, key: string): T | null {
  if (metadata[key] === undefined) return null;
  try {
    return JSON.parse(metadata[key]) as T;
  } catch {
    return formatError(`metadata ${key} is not valid JSON`);
  }
}

/** Reads a checkpoint from its bytes (`source`, the file's path, names them in messages). */
export function parseCheckpoint(bytes: Uint8Array, source?: string): Checkpoint {
  const { entries, metadata } = parseSafetensors(bytes, source);
  if (metadata.format !== FORMAT) formatError(`not a ${FORMAT} file (format ${JSON.stringify(metadata.format)})`);
  const step = Number(metadata.step);
  if (!Number.isSafeInteger(step) || step < 0) formatError(`invalid step ${JSON.stringify(metadata.step)}`);
  const opt = json<{ type: string; options: Record<string, unknown>; steps: number[]; buffers: number }>(metadata, 'optimizer');
  let optimizer: Checkpoint['optimizer'] = null;
  if (opt) {
    if (typeof opt.type !== 'string' || !Array.isArray(opt.steps) || !Number.isInteger(opt.buffers))
      formatError('metadata optimizer must be {type, options, steps, buffers}');
    const buffer = (i: number, j: number): Float32Array => {
      const e: RawEntry | undefined = entries[`optimizer.${i}.${j}`];
      if (!e || !(e.data instanceof Float32Array)) return formatError(`missing float tensor optimizer.${i}.${j}`);
      return e.data;
    };
    optimizer = { type: opt.type, options: opt.options,
      state: opt.steps.map((s, i) => ({ step: s, buffers: Array.from({ length: opt.buffers }, (_, j) => buffer(i, j)) })) };
  }
  return { step, model: entriesToTensors(weightEntries(entries, metadata)), optimizer,
    rng: json<Record<string, RandomState>>(metadata, 'rng') ?? {}, schedule: json<ScheduleConfig>(metadata, 'schedule'),
    meta: json<Record<string, unknown>>(metadata, 'meta') };
}

/** Reads the checkpoint at `path` (see resume to apply it). */
export function loadCheckpoint(path: string): Checkpoint {
  return parseCheckpoint(readFile(path), path);
}

/** loadCheckpoint with the file read off the main thread. */
export async function loadCheckpointAsync(path: string): Promise<Checkpoint> {
  return parseCheckpoint(await readFileAsync(path), path);
}

/** The target of resume: the model, and the optimizer when the checkpoint has optimizer state. */
export interface ResumeTarget {
  model: Module;
  optimizer?: Optimizer;
}
const RESUME_TARGET = new OptionKeys<ResumeTarget>('resume target', { model: true, optimizer: true });

/** Checks the target of resume: an object {model, optimizer?} with a Module. */
function checkTarget(target: ResumeTarget): void {
  if (!(target?.model instanceof Module)) invalidArg('target.model', 'a Module', target?.model);
  RESUME_TARGET.check('target', target);
}

function stateDictError(message: string): never {
  throw new NodeformerError('ERR_NF_STATE_DICT', `resume: ${message}`);
}

/**
 * Applies a checkpoint: parameters, optimizer state and random streams. All or nothing: on any
 * mismatch it throws (ERR_NF_STATE_DICT or ERR_NF_INVALID_ARG) and restores what it had changed.
 */
function* applyOps(ck: Checkpoint, { model, optimizer }: ResumeTarget): Program<ResumeResult> {
  try {
    if (optimizer && !ck.optimizer) stateDictError('the checkpoint holds no optimizer state');
    if (optimizer && ck.optimizer!.type !== optimizer.constructor.name)
      stateDictError(`the checkpoint's optimizer is ${ck.optimizer!.type}, not ${optimizer.constructor.name}`);
    const rngs = new Map(model.namedRngs());
    const names = Object.keys(ck.rng);
    const problems = [...[...rngs.keys()].filter((n) => !(n in ck.rng)).map((n) => `missing random stream ${n}`),
      ...names.filter((n) => !rngs.has(n)).map((n) => `unexpected random stream ${n}`)];
    if (problems.length) stateDictError(problems.join('; '));
    const before = {
      params: Object.fromEntries(model.namedParameters().map(([n, p]) => [n, p.toArray()])),
      optimizer: optimizer?.stateDict(),
      rng: [...rngs].map(([n, r]) => [n, r.getState()] as const),
    };
    try {
      model.loadStateDict(ck.model);
      if (optimizer) optimizer.loadStateDict(ck.optimizer!);
      for (const [n, r] of rngs) r.setState(ck.rng[n]);
    } catch (e) {
      model.loadStateDict(before.params);
      if (optimizer && before.optimizer) optimizer.loadStateDict(before.optimizer);
      for (const [n, s] of before.rng) rngs.get(n)!.setState(s);
      throw e;
    }
    return { step: ck.step, schedule: ck.schedule ? scheduleFromConfig(ck.schedule) : null, meta: ck.meta };
  } finally {
    for (const t of Object.values(ck.model)) t.dispose();
  }
}

/**
 * Restores a checkpoint into `model` (and `optimizer`): parameters, optimizer state, random
 * streams. Returns the step and the schedule to continue with. Throws ERR_NF_STATE while
 * asynchronous calls on the model are pending.
 */
export function resume(path: string, target: ResumeTarget): ResumeResult {
  checkTarget(target);
  return target.model.runOps('resume', applyOps(loadCheckpoint(path), target));
}

/** resume with the file read off the main thread, queued behind the model's asynchronous calls. */
export async function resumeAsync(path: string, target: ResumeTarget): Promise<ResumeResult> {
  checkTarget(target);
  const ck = await loadCheckpointAsync(path);
  return target.model.enqueueOps(() => applyOps(ck, target));
}
