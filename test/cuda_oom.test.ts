/**
 * Out of device memory on 'cuda', through the SIMT emulator with a device of limited capacity
 * (NF_EMU_DEVICE_BYTES): the caching allocator releases its idle blocks and retries before failing;
 * failing still, ERR_NF_CUDA_OOM names the request, the live and cached bytes, the cache limit and
 * what to try; and the process, the model and the allocator's counters stay usable and consistent.
 * The emulator reads the capacity (and NF_CUDA_CACHE_BYTES the cache's cap) when the addon loads, so
 * each scenario runs in a child process (test/support/cuda_oom.ts, bundled) with its own settings.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import { beforeAll, describe, expect, it } from 'vitest';

import type { CudaMemoryStats } from '../lib/core/device';
import { bundle, bundleEnv } from './support/bundle';
import { buildEmulated, emulatedAddon, emulatorSkipReason } from './support/cuda_emu_build';

const reason = emulatorSkipReason();
if (reason) console.log(`skipping the CUDA out-of-memory tests: ${reason}`);

const MiB = 1 << 20;
type Failure = { code: string; message: string } | null;

describe.skipIf(reason !== null)('out of device memory on the SIMT emulator', () => {
  let file = '';
  beforeAll(async () => {
    const build = await buildEmulated();
    expect(build.ok, build.out).toBe(true);
    file = bundle('test/support/cuda_oom.ts');
  }, 900_000);

  /** Runs a scenario of test/support/cuda_oom.ts on an emulated device of `deviceBytes`; its JSON result. */
  async function scenario<T>(name: string, deviceBytes: number, cacheBytes?: number): Promise<T> {
    const env: NodeJS.ProcessEnv = { ...bundleEnv(), NF_CUDA_BACKEND: emulatedAddon,
      NF_EMU_DEVICE_BYTES: String(deviceBytes), NF_NUM_THREADS: '1' };
    if (cacheBytes === undefined) delete env.NF_CUDA_CACHE_BYTES;
    else env.NF_CUDA_CACHE_BYTES = String(cacheBytes);
    const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', file, name],
      { env, encoding: 'utf8', maxBuffer: 1 << 24 });
    return JSON.parse(stdout.trim().split('\n').pop()!) as T;
  }

  /** The parts every ERR_NF_CUDA_OOM message has. */
  const expectOomMessage = (f: Failure, request: string) => {
    expect(f?.code).toBe('ERR_NF_CUDA_OOM');
    expect(f?.message).toContain(`device_alloc: CUDA out of memory (cudaErrorMemoryAllocation): cannot allocate ${request}`);
    expect(f?.message).toMatch(/live tensors hold [\d.]+ (B|KiB|MiB)/);
    expect(f?.message).toMatch(/; idle cached blocks: ([\d.]+ (B|KiB|MiB) released before retrying|none to release), [\d.]+ (B|KiB|MiB) held now \(cache limit [\d.]+ (B|KiB|MiB|GiB), NF_CUDA_CACHE_BYTES\)/);
    expect(f?.message).toMatch(/the device has [\d.]+ (B|KiB|MiB) free of [\d.]+ MiB/);
    expect(f?.message).toContain('try a smaller batch, cudaEmptyCache(), or NF_CUDA_CACHE_BYTES');
  };

  it('an allocation that fits only once the idle cached blocks are released succeeds (the retry); the stats show the release', async () => {
    // A 16 MiB device, a cache capped at 8 MiB: of two freed 6 MiB blocks one stays idle (the other is
    // over the cap); 12 MiB then fits only once that one is released.
    type S = Record<'s0' | 's1' | 's2' | 's3', CudaMemoryStats>;
    const { s0, s1, s2, s3 } = await scenario<S>('retry', 16 * MiB, 8 * MiB);
    expect(s0).toMatchObject({ liveBytes: 0, cachedBytes: 0, limitBytes: 8 * MiB, fresh: 0, released: 0 });
    expect(s1).toMatchObject({ liveBytes: 0, cachedBytes: 6 * MiB, fresh: 2, reused: 0, released: 1 });
    expect(s2).toMatchObject({ liveBytes: 12 * MiB, cachedBytes: 0, fresh: 3, reused: 0, released: 2, requestedBytes: 12 * MiB });
    expect(s3).toMatchObject({ liveBytes: 0, cachedBytes: 0, fresh: 3, released: 3, requestedBytes: 0, peakLiveBytes: 12 * MiB });
  }, 120_000);

  it('a request larger than the device throws ERR_NF_CUDA_OOM; a ViTClassifier training step on cuda then runs and matches the CPU', async () => {
    type R = { before: CudaMemoryStats; after: CudaMemoryStats; oom: Failure; emptyCode: string;
      first: { params: number; loss: number }; second: { params: number; loss: number } };
    const r = await scenario<R>('huge', 64 * MiB);
    console.log(`ERR_NF_CUDA_OOM: ${r.oom?.message}`);
    expectOomMessage(r.oom, '256 MiB (268435456 bytes) on the device');
    expect(r.oom?.message).toContain('cache limit 1.00 GiB');
    expect(r.oom?.message).toMatch(/the device has [\d.]+ MiB free of 64.0 MiB/);
    expect(r.emptyCode).toBe('ERR_NF_CUDA_OOM'); // Tensor.empty too
    // Nothing allocated, nothing lost: the counters are as before but for the retry's release.
    expect({ ...r.after, released: 0 }).toEqual({ ...r.before, cachedBytes: 0, released: 0 });
    if (r.before.cachedBytes > 0) expect(r.after.released).toBeGreaterThan(r.before.released);
    else expect(r.after.released).toBe(r.before.released);
    expect(r.before.liveBytes).toBeGreaterThan(0); // the model's parameters and the optimizer's state
    for (const s of [r.first, r.second]) {
      expect(s.loss).toBeLessThan(1e-4);
      expect(s.params).toBeLessThan(1e-4);
    }
  }, 120_000);

  it('a training step that does not fit fails with ERR_NF_CUDA_OOM; the model trains on after disposing other tensors, or at a smaller batch', async () => {
    type R = { base: CudaMemoryStats; filled: string[]; full: CudaMemoryStats; stepFull: Failure; afterFull: CudaMemoryStats;
      asyncFull: Failure; afterFullGc: CudaMemoryStats; afterDispose: { params: number; loss: number }; room: number;
      stepLarge: Failure; smallerBatch: { params: number; loss: number }; afterSmaller: CudaMemoryStats;
      sweep: { tries: number; where: Record<string, number>; params: number; loss: number }; end: CudaMemoryStats };
    const r = await scenario<R>('step', 32 * MiB, 0);
    expect(r.filled).toEqual(['ERR_NF_CUDA_OOM', 'ERR_NF_CUDA_OOM', 'ERR_NF_CUDA_OOM']);
    expectOomMessage(r.stepFull, '');
    expect(r.stepFull?.message).toContain('idle cached blocks: none to release, 0 B held now (cache limit 0 B');
    expect(r.asyncFull?.code).toBe('ERR_NF_CUDA_OOM'); // trainStepAsync rejects the same way
    // The failed step holds nothing: what it allocated is freed, and so are the activations the
    // model kept from the step before (no backward can use them now).
    expect(r.afterFull.liveBytes).toBeLessThan(r.full.liveBytes);
    expect(r.afterFullGc.liveBytes).toBe(r.afterFull.liveBytes);
    expect(r.afterFull.cachedBytes).toBe(0);
    // After disposing the other tensors, the same model's next step matches the CPU's.
    expect(r.afterDispose.loss).toBeLessThan(1e-4);
    expect(r.afterDispose.params).toBeLessThan(1e-4);
    // With room for a step of 3 images: 64 fail, 3 run and match.
    expect(r.room).toBeGreaterThanOrEqual(MiB);
    expectOomMessage(r.stepLarge, '');
    expect(r.smallerBatch.loss).toBeLessThan(1e-4);
    expect(r.smallerBatch.params).toBeLessThan(1e-4);
    // Nothing leaked: once the other tensors are gone, the device holds exactly what it held after
    // the first step (the model, its gradients and optimizer state, one step's activations, the batch).
    expect(r.afterSmaller.liveBytes).toBe(r.base.liveBytes);
    expect(r.afterSmaller.requestedBytes).toBe(r.base.requestedBytes);
    expect(r.afterSmaller.cachedBytes).toBe(0);
    // Failing at every allocation of a step in turn (forward and backward), each try leaves the model
    // as it was: the step that finally runs matches the CPU's, and nothing is left behind but the batch.
    console.log(`out-of-memory sweep: ${r.sweep.tries} failed tries before the step ran, at ${JSON.stringify(r.sweep.where)}`);
    expect(r.sweep.tries).toBeGreaterThan(1);
    expect(Object.keys(r.sweep.where).some((k) => k.includes('forward'))).toBe(true);
    expect(Object.keys(r.sweep.where).some((k) => k.includes('backward'))).toBe(true);
    expect(r.sweep.loss).toBeLessThan(1e-4);
    expect(r.sweep.params).toBeLessThan(1e-4);
    expect(r.end.requestedBytes).toBe(r.base.requestedBytes - (3 * 3 * 12 * 12 * 4 + 3 * 4));
    expect(r.end.cachedBytes).toBe(0);
  }, 300_000);
});
