/**
 * Data-parallel measurement on seed-stl10 (ViT 96×96/8, D256, 8 heads, F1024, depth 6; global
 * batch 16): per-step time, time in gradient all-reduce, and how much of it backward hides.
 *   mpirun -np 2 --oversubscribe --bind-to none node --import tsx scripts/dist_bench.ts 1   # 2 ranks × 1 thread, batch 8 each
 *   node --import tsx scripts/dist_bench.ts 2                                              # 1 process × 2 threads, batch 16
 * Prints one JSON line (rank 0).
 */
import { AdamW, distributed, DistributedDataParallel, native, Tensor, trainStep, ViTClassifier } from '../lib';

async function main(): Promise<void> {
  const threads = Number(process.argv[2] ?? 1), steps = Number(process.argv[3] ?? 6), warmup = 2;
  native.setNumThreads(threads);
  const dist = process.env.OMPI_COMM_WORLD_SIZE !== undefined;
  if (dist) await distributed.init();
  const world = distributed.worldSize(), B = 16 / world;
  const model = new ViTClassifier({ imgSize: 96, patchSize: 8, inChannels: 3, numClasses: 10, dModel: 256, numHeads: 8, dFF: 1024, depth: 6 });
  const net = dist ? new DistributedDataParallel(model) : model;
  if (net instanceof DistributedDataParallel) await net.ready();
  const opt = new AdamW(model.parameters());
  const x = Tensor.from(Float32Array.from({ length: B * 3 * 96 * 96 }, (_, i) => Math.sin(i * 0.01)), [B, 3, 96, 96]);
  const y = Tensor.from(Int32Array.from({ length: B }, (_, i) => i % 10), [B]);
  let t = 0;
  for (let s = 0; s < warmup + steps; s++) {
    if (s === warmup) {
      if (net instanceof DistributedDataParallel) net.resetStats();
      t = performance.now();
    }
    trainStep(net, opt, x, y);
  }
  const stepMs = (performance.now() - t) / steps;
  const st = net instanceof DistributedDataParallel ? net.stats : null;
  const out = { world, threads, perRankBatch: B, stepMs: +stepMs.toFixed(1),
    gradBytes: model.parameters().reduce((n, p) => n + p.size * 4, 0),
    allReduceMsPerStep: st ? +((st.commSeconds / steps) * 1000).toFixed(1) : 0,
    exposedMsPerStep: st ? +((st.exposedSeconds / steps) * 1000).toFixed(1) : 0,
    overlapEfficiency: st && st.commSeconds > 0 ? +(1 - st.exposedSeconds / st.commSeconds).toFixed(2) : null,
    buckets: net instanceof DistributedDataParallel ? net.buckets.length : 0 };
  if (distributed.rank() === 0) console.log(JSON.stringify(out));
  if (dist) {
    await distributed.barrier();
    await distributed.finalize();
  }
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
