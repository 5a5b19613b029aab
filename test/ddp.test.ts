/**
 * DistributedDataParallel (lib/ddp.ts) under `mpirun -np 2` (test/support/dist_ddp.ts): 2 ranks ×
 * batch B for 5 AdamW steps equal 1 process × batch 2B, ranks bit-identical after every step,
 * differently seeded ranks identical after the initial broadcast, noSync over 2 micro-batches equal
 * to one batch of twice the size, a parameter-signature mismatch named, and the event loop free
 * while trainStepAsync runs. Skipped, with the reason printed, without MPI.
 */
import { describe, expect, it } from 'vitest';

import { jsonLines, mpirun, mpiSkipReason } from './support/mpi';

const skip = mpiSkipReason();
if (skip) console.log(`DistributedDataParallel tests skipped: ${skip}`);

interface DdpRank {
  rank: number; buckets: number; broadcastHash: string; broadcastEqualsRank0Init: boolean; stepHashes: string[];
  maxRelErr: number; keyBiasMaxAbsDiff: number; noSyncRelErr: number; noSyncWasLocal: boolean; p99Ms: number; mismatch: string;
  stats: { steps: number; earlyBuckets: number };
}

describe.skipIf(skip)('DistributedDataParallel on 2 ranks', () => {
  it('equals one process with twice the batch, with bit-identical ranks', async () => {
    const run = await mpirun(2, 'test/support/dist_ddp.ts');
    expect(run.code, run.stderr).toBe(0);
    const [a, b] = jsonLines<DdpRank>(run.stdout);
    console.log(`DDP: max rel err ${a.maxRelErr.toExponential(2)} vs 1 process × 2B, noSync ${a.noSyncRelErr.toExponential(2)}, ` +
      `${a.buckets} buckets, ${a.stats.earlyBuckets} overlapped over ${a.stats.steps} steps, event-loop p99 ${a.p99Ms.toFixed(1)} ms on rank 0`);
    // identical after the initial broadcast although seeded differently, and equal to rank 0's init
    expect(a.broadcastHash).toBe(b.broadcastHash);
    expect(a.broadcastEqualsRank0Init && b.broadcastEqualsRank0Init).toBe(true);
    // bit-identical after every step
    expect(a.stepHashes).toHaveLength(5);
    expect(a.stepHashes).toEqual(b.stepHashes);
    expect(new Set(a.stepHashes).size).toBe(5);
    // 2 ranks × B = 1 process × 2B (every value but the key bias, whose exact gradient is zero: see dist_ddp.ts)
    for (const r of [a, b]) {
      expect(r.maxRelErr).toBeLessThan(1e-5);
      expect(r.keyBiasMaxAbsDiff).toBeLessThan(5 * 1e-2);
      expect(r.noSyncRelErr).toBeLessThan(1e-5);
      expect(r.noSyncWasLocal).toBe(true);
      expect(r.buckets).toBeGreaterThan(1);
      expect(r.stats.earlyBuckets).toBeGreaterThan(0); // buckets started during backward from the second step on
    }
    expect(a.p99Ms).toBeLessThan(20);
    // a model that differs between ranks: ERR_NF_DISTRIBUTED naming the first differing parameter
    expect(a.mismatch).toMatch(/^ERR_NF_DISTRIBUTED: .*first differing parameter is parameter #12 \(blocks\.0\.mlp\.fc1\.weight: float32 \[32, 16\]/);
    expect(b.mismatch).toMatch(/blocks\.0\.mlp\.fc1\.weight: float32 \[48, 16\]/);
  });
});
