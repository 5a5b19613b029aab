/**
 * Run under `mpirun -np 2` by test/ddp.test.ts. Prints one JSON line per rank with:
 *  - broadcastHash: a hash of the parameters after the initial broadcast (ranks seeded differently);
 *  - stepHashes: a hash of the parameters after each of 5 AdamW steps (2 ranks × batch B);
 *  - maxRelErr: the largest ‖p − p_ref‖ / ‖p_ref‖ over parameters, p_ref from one process × batch 2B;
 *  - noSyncRelErr: gradients of noSync over 2 micro-batches vs one batch of twice the size;
 *  - mismatch: the error of a model whose parameters differ between ranks;
 *  - p99Ms: event-loop delay p99 on this rank while trainStepAsync runs.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';

import { AdamW, crossEntropy, distributed, DistributedDataParallel, Tensor, trainStep, trainStepAsync, ViTClassifier } from '../../lib';
import { paramHash } from './param_hash';

const cfg = { imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 3, dModel: 16, numHeads: 2, dFF: 32, depth: 2 };

function relErr(a: Float32Array, b: Float32Array): number {
  let d = 0, n = 0;
  for (let i = 0; i < a.length; i++) {
    d += (a[i] - b[i]) ** 2;
    n += b[i] ** 2;
  }
  return Math.sqrt(d / Math.max(n, 1e-30));
}

function batch(seed: number, rows: number): { x: Tensor; y: Tensor } {
  const x = Float32Array.from({ length: rows * 64 }, (_, i) => Math.sin(seed * 7.3 + i * 0.37));
  const y = Int32Array.from({ length: rows }, (_, i) => (i * 7 + seed) % 3);
  return { x: Tensor.from(x, [rows, 1, 8, 8]), y: Tensor.from(y, [rows]) };
}

function rows(t: Tensor, from: number, count: number): Tensor {
  const per = t.size / t.shape[0];
  const data = (t.data as Float32Array | Int32Array).slice(from * per, (from + count) * per);
  return Tensor.from(data, [count, ...t.shape.slice(1)]);
}

async function main(): Promise<void> {
  await distributed.init();
  const r = distributed.rank(), n = distributed.worldSize();
  const out: Record<string, unknown> = { rank: r };

  // Ranks seeded differently; rank 0's parameters win the broadcast.
  const model = new ViTClassifier({ ...cfg, seed: 100 + r });
  const ddp = new DistributedDataParallel(model, { bucketBytes: 4096, firstBucketBytes: 1024, overlap: process.env.NO_OVERLAP ? false : true });
  await ddp.ready();
  out.buckets = ddp.buckets.length;
  out.broadcastHash = paramHash(ddp);
  const ref = new ViTClassifier({ ...cfg, seed: 100 });
  out.broadcastEqualsRank0Init = paramHash(ref) === paramHash(ddp);

  const B = 4;
  const opt = new AdamW(ddp.parameters(), { lr: 1e-2, weightDecay: 0.01 });
  const optRef = new AdamW(ref.parameters(), { lr: 1e-2, weightDecay: 0.01 });
  const stepHashes: string[] = [];
  for (let s = 0; s < 5; s++) {
    const { x, y } = batch(s, B * n);
    trainStep(ref, optRef, x, y);
    const xs = rows(x, r * B, B), ys = rows(y, r * B, B);
    if (s < 3) trainStep(ddp, opt, xs, ys);
    else await trainStepAsync(ddp, opt, xs, ys);
    stepHashes.push(paramHash(ddp));
  }
  out.stepHashes = stepHashes;
  const refState = ref.stateDict();
  out.maxRelErr = Math.max(...Object.entries(ddp.stateDict()).map(([k, p]) => relErr(p.data, refState[k].data)));
  // The key third of each attention's qkv.bias has an exactly zero gradient (softmax is invariant to
  // a shift shared by every key), so its computed gradient is rounding noise whose sign AdamW's
  // normalised step turns into ±lr: compared apart, every other value to 1e-5.
  const D = cfg.dModel;
  const split = (k: string, a: Float32Array) => k.endsWith('attn.qkv.bias') ? [a.subarray(0, D), a.subarray(2 * D)] : [a];
  const ddpState = ddp.stateDict();
  out.maxRelErr = Math.max(...Object.keys(ddpState).flatMap((k) => {
    const a = split(k, ddpState[k].data), b = split(k, refState[k].data);
    return a.map((x, i) => relErr(x, b[i]));
  }));
  out.keyBiasMaxAbsDiff = Math.max(...Object.keys(ddpState).filter((k) => k.endsWith('attn.qkv.bias')).map((k) => {
    const a = ddpState[k].data.subarray(D, 2 * D), b = refState[k].data.subarray(D, 2 * D);
    return Math.max(...a.map((v, i) => Math.abs(v - b[i])));
  }));
  if (process.env.DEBUG_ERR) out.errs = Object.entries(ddp.stateDict()).map(([k, p]) => `${k}:${relErr(p.data, refState[k].data).toExponential(1)}`);
  out.stats = { ...ddp.stats };

  // noSync: 2 micro-batches per rank accumulate; the synchronised second averages over ranks.
  const m2 = new ViTClassifier({ ...cfg, seed: 5 });
  const d2 = new DistributedDataParallel(m2);
  await d2.ready();
  const ref2 = new ViTClassifier({ ...cfg, seed: 5 });
  const { x, y } = batch(42, 4 * n);
  const micro = (k: number) => {
    const xs = rows(x, (r * 2 + k) * 2, 2), ys = rows(y, (r * 2 + k) * 2, 2);
    const { grad } = crossEntropy(d2.forward(xs), ys);
    d2.backward(grad);
  };
  d2.zeroGrad();
  d2.noSync(() => micro(0));
  const localOnly = d2.parameters().map((p) => p.grad!.toArray());
  micro(1);
  const { grad } = crossEntropy(ref2.forward(x), y);
  ref2.backward(grad);
  const refGrads = ref2.parameters().map((p) => p.grad!.data);
  out.noSyncRelErr = Math.max(...d2.parameters().map((p, i) => relErr(p.grad!.data.map((v) => v / 2), refGrads[i])));
  out.noSyncWasLocal = localOnly.some((g, i) => relErr(g, refGrads[i]) > 1e-3);

  // Event-loop delay on this rank while trainStepAsync with DDP runs.
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  const { x: bx, y: by } = batch(9, B);
  for (let s = 0; s < 6; s++) await trainStepAsync(ddp, opt, bx, by);
  h.disable();
  out.p99Ms = h.percentile(99) / 1e6;

  // A model that differs between ranks: an error naming the first differing parameter, not a hang.
  const odd = new ViTClassifier({ ...cfg, dFF: r === 1 ? 48 : 32 });
  try {
    await new DistributedDataParallel(odd).ready();
    out.mismatch = 'no error';
  } catch (e) {
    out.mismatch = `${(e as { code?: string }).code}: ${(e as Error).message}`;
  }
  await distributed.barrier();
  await distributed.finalize();
  console.log(JSON.stringify(out));
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
