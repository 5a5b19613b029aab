/**
 * DistributedDataParallel (lib/distributed/ddp.ts) under `mpirun -np 2` (test/support/dist_ddp.ts): 2 ranks ×
 * batch B for 5 AdamW steps equal 1 process × batch 2B, ranks bit-identical after every step,
 * differently seeded ranks identical after the initial broadcast, noSync over 2 micro-batches equal
 * to one batch of twice the size, a parameter-signature mismatch named, and the event loop free
 * while trainStepAsync runs. Skipped, with the reason printed, without MPI.
 */
import { describe, expect, it } from 'vitest';

import type { DistributedDataParallel, Tensor, ViTClassifier } from '../lib';
import { jsonLines, mpirun, mpiSkipReason } from './support/mpi';

/**
 * Type-level checks, compiled by `npx tsc -p tsconfig.test.json` and never run: a
 * DistributedDataParallel<M> has M's forward and backward argument and result types.
 */
export function ddpTypes(ddp: DistributedDataParallel<ViTClassifier>, vit: ViTClassifier, x: Tensor): void {
  const logits: Tensor<'float32'> = ddp.forward(x);
  const masked: Tensor<'float32'> = ddp.forward(x, {});
  const dx: Tensor<'float32'> = ddp.backward(logits);
  const later: Promise<Tensor<'float32'>> = ddp.forwardAsync(x);
  const dLater: Promise<Tensor<'float32'>> = ddp.backwardAsync(logits);
  const either = Math.random() < 0.5 ? ddp : vit; // the CLI's "the model or its wrapper"
  const both: Tensor<'float32'> = either.forward(x);
  // @ts-expect-error the result is a Tensor, not unknown or any
  const notNumber: number = ddp.forward(x);
  // @ts-expect-error a ViTClassifier's forward takes images (and options), not a string
  ddp.forward('images');
  // @ts-expect-error a ViTClassifier's backward takes one gradient
  ddp.backward(logits, logits);
  // @ts-expect-error forwardAsync resolves to a Tensor
  const notString: Promise<string> = ddp.forwardAsync(x);
  void [masked, dx, later, dLater, both, notNumber, notString];
}

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
