/**
 * Data-parallel checkpoints (distributed.saveCheckpoint, lib/distributed/checkpoint.ts) under `mpirun -np 2`
 * (test/support/dist_checkpoint.ts): only rank 0 writes the file, every rank sees it complete when
 * saveCheckpoint returns, every rank resumes from it, and one more step leaves the ranks
 * bit-identical and equal to the run that never saved; a failed write fails on every rank. Skipped, with the reason printed, without MPI.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { describe, expect, it } from 'vitest';

import { jsonLines, mpirun, mpiSkipReason } from './support/mpi';

const skip = mpiSkipReason();
if (skip) console.log(`distributed checkpoint tests skipped: ${skip}`);

interface CheckpointRank {
  rank: number; wrote: boolean; writes: string[]; fileAfterSave: { ino: number; size: number; mtimeMs: number };
  savedHash: string; failure: string; failureMs: number; resumedStep: number; resumedAtSave: boolean; continuedHash: string; resumedHash: string;
}

describe.skipIf(skip)('distributed.saveCheckpoint on 2 ranks', () => {
  it('rank 0 writes, every rank resumes, and the ranks continue bit-identically', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-dist-ckpt-'));
    try {
      const run = await mpirun(2, 'test/support/dist_checkpoint.ts', [dir]);
      expect(run.code, run.stderr).toBe(0);
      const [a, b] = jsonLines<CheckpointRank>(run.stdout);
      // Only rank 0 wrote, and said so; rank 1 never opened or renamed anything at the path.
      expect([a.wrote, b.wrote]).toEqual([true, false]);
      expect(a.writes).toEqual(['fs.promises.open', 'fs.promises.rename']);
      expect(b.writes).toEqual([]);
      // When saveCheckpoint returned, both ranks saw the same, complete file (the barrier).
      expect(b.fileAfterSave).toEqual(a.fileAfterSave);
      expect(a.fileAfterSave.size).toBeGreaterThan(0);
      expect(fs.readdirSync(dir)).toEqual(['ddp.ckpt']); // no temp file left
      // Every rank resumed rank 0's state, then one step: bit-identical ranks, equal to the run without save/resume.
      for (const r of [a, b]) {
        expect(r.resumedStep).toBe(2);
        expect(r.resumedAtSave).toBe(true);
        expect(r.resumedHash).toBe(r.continuedHash);
        expect(r.continuedHash).not.toBe(r.savedHash);
      }
      expect(b.savedHash).toBe(a.savedHash);
      expect(b.continuedHash).toBe(a.continuedHash);
      // A failed write: rank 0 rethrows its own error, the others ERR_NF_DISTRIBUTED, well before the 60 s timeout.
      expect(a.failure).toBe('ERR_NF_INVALID_ARG'); // writeFileAtomic: the folder does not exist
      expect(b.failure).toBe('ERR_NF_DISTRIBUTED');
      expect(Math.max(a.failureMs, b.failureMs)).toBeLessThan(10_000);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
