/**
 * Run under `mpirun -np 2` by test/dist_checkpoint.test.ts with a scratch folder as argument.
 * Trains 2 DDP steps (dropout on: the random streams are part of the checkpoint), saves with
 * distributed.saveCheckpoint (rank 0 writes, every rank waits), resumes on every rank into a
 * differently seeded model and a fresh optimizer, and takes one more step both there and on the
 * uninterrupted run. Prints one JSON line per rank with:
 *  - wrote: saveCheckpoint's result (true only on the rank that wrote);
 *  - writes: the file operations on the checkpoint's path this rank made (fs is watched);
 *  - fileAfterSave: the file's inode, size and mtime as this rank saw it when saveCheckpoint returned;
 *  - savedHash / continuedHash / resumedHash: parameter hashes at the save and after the extra step;
 *  - failure: the error of a save whose folder does not exist, on each rank.
 */
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';

import { AdamW, cosineWithWarmup, distributed, DistributedDataParallel, resumeAsync, Tensor, trainStep, ViTClassifier } from '../../lib';
import { paramHash } from './param_hash';

const cfg = { imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 3, dModel: 16, numHeads: 2, dFF: 32, depth: 1, dropout: 0.1 };
const file = path.join(process.argv[2], 'ddp.ckpt');

// Every fs call this process makes that names the checkpoint's path (writeFileAtomic: a temp file, then a rename).
const writes: string[] = [];
function watch(obj: Record<string, unknown>, names: string[], prefix: string): void {
  for (const name of names) {
    const f = obj[name] as (...a: unknown[]) => unknown;
    obj[name] = (...a: unknown[]) => {
      if (a.some((x) => typeof x === 'string' && x.startsWith(file))) writes.push(`${prefix}${name}`);
      return f.apply(obj, a);
    };
  }
}
// The fs module itself (a namespace import is a read-only view of it; the library's reads through to it).
const realFs = createRequire(__filename)('node:fs') as typeof fs;
watch(realFs as unknown as Record<string, unknown>, ['openSync', 'writeFileSync', 'renameSync'], 'fs.');
watch(realFs.promises as unknown as Record<string, unknown>, ['open', 'writeFile', 'rename'], 'fs.promises.');

/** This rank's batch of step s. */
function batch(s: number, r: number): { x: Tensor; y: Tensor } {
  const x = Float32Array.from({ length: 4 * 64 }, (_, i) => Math.sin((s * 2 + r) * 7.3 + i * 0.37));
  const y = Int32Array.from({ length: 4 }, (_, i) => (i * 7 + s + r) % 3);
  return { x: Tensor.from(x, [4, 1, 8, 8]), y: Tensor.from(y, [4]) };
}

async function main(): Promise<void> {
  await distributed.init();
  const r = distributed.rank();
  const out: Record<string, unknown> = { rank: r };
  const schedule = cosineWithWarmup({ lr: 1e-2, warmupSteps: 1, totalSteps: 10 });
  const ddp = new DistributedDataParallel(new ViTClassifier({ ...cfg, seed: 100 }));
  const opt = new AdamW(ddp.parameters(), { lr: 1e-2, weightDecay: 0.01 });
  const step = (m: DistributedDataParallel, o: AdamW, s: number, lr: number) => {
    const { x, y } = batch(s, r);
    o.options.lr = lr;
    trainStep(m, o, x, y);
  };
  for (let s = 1; s <= 2; s++) step(ddp, opt, s, schedule(s));
  out.savedHash = paramHash(ddp);

  out.wrote = await distributed.saveCheckpoint(file, { model: ddp, optimizer: opt, schedule, step: 2 });
  const st = fs.statSync(file);
  out.fileAfterSave = { ino: st.ino, size: st.size, mtimeMs: st.mtimeMs };
  out.writes = [...writes];

  // Every rank resumes, into a model seeded differently per rank (parameters and dropout streams)
  // and an optimizer without state: only the checkpoint makes them equal to the uninterrupted run.
  const ddp2 = new DistributedDataParallel(new ViTClassifier({ ...cfg, seed: 200 + r }));
  await ddp2.ready();
  const opt2 = new AdamW(ddp2.parameters(), { lr: 1, weightDecay: 0 });
  const resumed = await resumeAsync(file, { model: ddp2, optimizer: opt2 });
  out.resumedStep = resumed.step;
  out.resumedAtSave = paramHash(ddp2) === out.savedHash;

  step(ddp, opt, 3, schedule(3));
  step(ddp2, opt2, 3, resumed.schedule!(resumed.step + 1));
  out.continuedHash = paramHash(ddp);
  out.resumedHash = paramHash(ddp2);
  // A write that fails on rank 0 fails on every rank, at once (no rank waits for the timeout).
  const t0 = performance.now();
  try {
    await distributed.saveCheckpoint(path.join(process.argv[2], 'missing', 'x.ckpt'), { model: ddp, optimizer: opt, step: 3 });
    out.failure = 'no error';
  } catch (e) {
    out.failure = (e as { code?: string }).code ?? (e as Error).message;
  }
  out.failureMs = performance.now() - t0;
  await distributed.finalize();
  console.log(JSON.stringify(out));
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
