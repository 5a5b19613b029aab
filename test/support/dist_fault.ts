/**
 * Run under `mpirun -np 2` by test/distributed_fault.test.ts: a DDP training loop in which rank 1
 * dies (SIGKILL), throws or stops taking part (hangs) at step 3, per argv[2] ('kill' | 'throw' | 'hang'; argv[3] 'sync' for trainStep). The surviving rank must fail
 * with ERR_NF_DISTRIBUTED and exit non-zero within a bounded time, not hang.
 */
import { AdamW, distributed, DistributedDataParallel, Tensor, trainStep, trainStepAsync, ViTClassifier } from '../../lib';

async function main(): Promise<void> {
  await distributed.init();
  const r = distributed.rank();
  const ddp = new DistributedDataParallel(new ViTClassifier({ imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 3, dModel: 16, numHeads: 2, dFF: 32, depth: 1 }));
  const opt = new AdamW(ddp.parameters());
  const x = Tensor.from(Float32Array.from({ length: 4 * 64 }, Math.sin), [4, 1, 8, 8]);
  const y = Tensor.from(Int32Array.of(0, 1, 2, 0), [4]);
  for (let s = 0; s < 1000; s++) {
    if (r === 1 && s === 3) {
      if (process.argv[2] === 'throw') throw new Error('rank 1 fails on purpose');
      if (process.argv[2] === 'hang') {
        setInterval(() => undefined, 1000); // alive, but never joins the next collective
        return;
      }
      process.kill(process.pid, 'SIGKILL');
    }
    if (process.argv[3] === 'sync') trainStep(ddp, opt, x, y);
    else await trainStepAsync(ddp, opt, x, y);
    console.log(`rank ${r} step ${s}`);
  }
}
main().catch((e) => {
  console.error(`${e.name} [${e.code}]: ${e.message}`);
  process.exit(1);
});
