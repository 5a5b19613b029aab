/**
 * Out of device memory on the emulated CUDA backend, run as a child process (bundled) by
 * test/cuda_oom.test.ts, since the emulator reads its device's capacity (NF_EMU_DEVICE_BYTES) and
 * the cache's cap (NF_CUDA_CACHE_BYTES) when the addon loads. NF_CUDA_BACKEND is the path of the
 * emulated addon. Usage: node cuda_oom.js <scenario>, one of
 *   retry — a tensor that fits only once the idle cached blocks are released (the allocator's retry);
 *   huge  — a tensor larger than the device (ERR_NF_CUDA_OOM), then a ViTClassifier training step on
 *           'cuda' against the same step on 'cpu';
 *   step  — a training step that does not fit (the device filled with other tensors, or too large a
 *           batch) fails with ERR_NF_CUDA_OOM; after disposing the other tensors, or at a smaller
 *           batch, the same model trains on and matches the CPU.
 * Prints one JSON line: what the scenario saw (stats, error codes and messages, relative errors).
 */
import { AdamW, cudaMemoryStats, Tensor, trainStep, trainStepAsync, ViTClassifier } from '../../lib';
import { randn32, relErr, rng } from '../helpers';

const MiB = 1 << 20;
const vit = { imgSize: 12, patchSize: 4, inChannels: 3, dModel: 48, numHeads: 2, dFF: 72, depth: 2, dropout: 0, numClasses: 5, seed: 7 };

type Failure = { code: string; message: string } | null;

/** Runs fn; its error's code and message, or null when it succeeded. */
function failure(fn: () => unknown): Failure {
  try {
    fn();
  } catch (e) {
    return { code: (e as { code?: string }).code ?? '', message: (e as Error).message };
  }
  return null;
}

/** A float32 cuda tensor of `bytes`. */
const deviceTensor = (bytes: number) => Tensor.zeros([bytes / 4], 'float32', 'cuda');

type Batch = { images: Tensor; labels: Tensor };

function batch(size: number, seed: number): Batch {
  const rand = rng(seed);
  return {
    images: Tensor.from(Float32Array.from(randn32(size * 3 * 12 * 12, rand)), [size, 3, 12, 12]),
    labels: Tensor.from(Int32Array.from({ length: size }, (_, i) => (i * 3 + seed) % 5), [size]),
  };
}

/** A model and its optimizer on `device`, the same on every device. */
function setup(device: 'cpu' | 'cuda') {
  const model = new ViTClassifier({ ...vit, device });
  return { model, opt: new AdamW(model.parameters(), { lr: 1e-2, weightDecay: 0.05, eps: 1e-5 }) };
}

type Setup = ReturnType<typeof setup>;

/** One trainStep on the batch (copied to the model's device unless it is there already); the loss. */
function step({ model, opt }: Setup, b: Batch): number {
  const device = model.device;
  const x = b.images.to(device), t = b.labels.to(device);
  try {
    return trainStep(model, opt, x, t);
  } finally {
    if (x !== b.images) x.dispose();
    if (t !== b.labels) t.dispose();
  }
}

/** The largest relative error between the parameters of the two models, and between their losses. */
function compare(got: Setup, ref: Setup, gotLoss: number, refLoss: number): { params: number; loss: number } {
  const want = new Map(ref.model.namedParameters().map(([n, p]) => [n, p.toArray()]));
  let params = 0;
  for (const [n, p] of got.model.namedParameters()) params = Math.max(params, relErr(p.toArray(), want.get(n)!));
  return { params, loss: relErr([gotLoss], [refLoss]) };
}

/** Allocates `bytes`-sized cuda tensors until the device has no room for one more. */
function fill(bytes: number, into: Tensor[]): Failure {
  for (;;) {
    let t: Tensor | null = null;
    const f = failure(() => (t = deviceTensor(bytes)));
    if (f) return f;
    into.push(t!);
  }
}

function retry() {
  // NF_EMU_DEVICE_BYTES = 16 MiB, NF_CUDA_CACHE_BYTES = 8 MiB.
  const s0 = cudaMemoryStats();
  const a = deviceTensor(6 * MiB), b = deviceTensor(6 * MiB);
  a.dispose(); // idle: within the cap, kept
  b.dispose(); // over the cap: back to the device
  const s1 = cudaMemoryStats();
  const big = deviceTensor(12 * MiB); // 6 idle + 12 > 16: fits only once the idle block is released
  const s2 = cudaMemoryStats();
  big.dispose(); // 12 MiB > the cap: released
  const s3 = cudaMemoryStats();
  return { s0, s1, s2, s3 };
}

function huge() {
  // NF_EMU_DEVICE_BYTES = 64 MiB.
  const b = batch(3, 11);
  const got = setup('cuda'), ref = setup('cpu');
  const before = cudaMemoryStats();
  const oom = failure(() => deviceTensor(256 * MiB));
  const after = cudaMemoryStats();
  const emptyCode = failure(() => Tensor.empty([20 * MiB], 'float32', 'cuda'))?.code; // 80 MiB, uninitialized
  const gotLoss = step(got, b), refLoss = step(ref, b);
  const gotLoss2 = step(got, b), refLoss2 = step(ref, b);
  return { before, after, oom, emptyCode, first: compare(got, ref, gotLoss, refLoss), second: compare(got, ref, gotLoss2, refLoss2) };
}

/** A full garbage collection, and a turn of the event loop for the finalizers it queued. */
async function collect(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc');
  gc();
  await new Promise((r) => setImmediate(r));
}

async function stepScenario() {
  // NF_EMU_DEVICE_BYTES = 32 MiB, NF_CUDA_CACHE_BYTES = 0: every freed block goes back to the device,
  // so what the device holds is the live tensors (and the backend's scratch buffers).
  const got = setup('cuda'), ref = setup('cpu');
  const small = batch(3, 11), large = batch(64, 12);
  const onDevice = { images: small.images.to('cuda'), labels: small.labels.to('cuda') };
  const losses: [number, number][] = [[step(got, onDevice), step(ref, small)]]; // warm-up: the optimizer's state exists
  await collect();
  const base = cudaMemoryStats(); // the model, its gradients and optimizer state, the last step's activations, the batch

  // The device filled by other tensors: the step cannot run, synchronously or not.
  const ballast: Tensor[] = [];
  const filled = [fill(MiB, ballast), fill(64 * 1024, ballast), fill(4096, ballast)].map((f) => f?.code);
  const full = cudaMemoryStats();
  const stepFull = failure(() => step(got, onDevice));
  const afterFull = cudaMemoryStats();
  const asyncFull = await trainStepAsync(got.model, got.opt, onDevice.images, onDevice.labels).then(() => null,
    (e: Error & { code?: string }) => ({ code: e.code ?? '', message: e.message }));
  await collect();
  const afterFullGc = cudaMemoryStats();
  for (const t of ballast.splice(0)) t.dispose();
  losses.push([step(got, onDevice), step(ref, small)]); // the same model, once the other tensors are gone
  const afterDispose = compare(got, ref, ...losses[1]);

  // Room for a step of 3 images, not of 64.
  fill(MiB, ballast);
  fill(64 * 1024, ballast);
  let room = 0;
  while (room < MiB && ballast.length) {
    const t = ballast.pop()!;
    room += t.size * 4;
    t.dispose();
  }
  const stepLarge = failure(() => step(got, large));
  losses.push([step(got, onDevice), step(ref, small)]);
  const smallerBatch = compare(got, ref, ...losses[2]);
  for (const t of ballast.splice(0)) t.dispose();
  await collect();
  const afterSmaller = cudaMemoryStats();

  // Every point of failure: from a full device, 4 KiB more room per try until the step runs; each
  // failed try ran part of the step (forward, backward, the update) and must leave the model as it
  // was. Where each failed (the module method on top of its stack) is counted.
  fill(MiB, ballast);
  fill(64 * 1024, ballast);
  fill(4096, ballast);
  const where: Record<string, number> = {};
  let tries = 0, loss = NaN;
  for (;;) {
    let error: unknown = null;
    try {
      loss = step(got, onDevice);
    } catch (e) {
      error = e;
    }
    if (!error) break;
    if ((error as { code?: string }).code !== 'ERR_NF_CUDA_OOM' || ballast.length === 0) throw error;
    const frame = /at (\w+\.(forward|backward)\w*|\w+\.\w*(step|Step)\w*)/.exec((error as Error).stack ?? '');
    const key = frame ? frame[1] : 'other';
    where[key] = (where[key] ?? 0) + 1;
    tries++;
    ballast.pop()!.dispose(); // the next try has a little more room (the smallest pieces first)
  }
  const sweep = { tries, where, ...compare(got, ref, loss, step(ref, small)) };
  for (const t of ballast.splice(0)) t.dispose();
  onDevice.images.dispose();
  onDevice.labels.dispose();
  await collect();
  return { base, filled, full, stepFull, afterFull, asyncFull, afterFullGc, afterDispose, room, stepLarge, smallerBatch,
    afterSmaller, sweep, end: cudaMemoryStats() };
}

const scenarios: Record<string, () => unknown> = { retry, huge, step: stepScenario };
const run = scenarios[process.argv[2] ?? ''];
if (!run) throw new Error(`unknown scenario ${process.argv[2]}`);
void Promise.resolve(run()).then((r) => console.log(JSON.stringify(r)));
