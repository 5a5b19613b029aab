/**
 * Collectives across processes (lib/distributed/collectives.ts, native/mpi): ranks launched with Open MPI's
 * mpirun at world sizes 2 and 3 (odd), checked against closed-form results. Without mpirun or the
 * distributed addon these tests are skipped and the reason printed; distributed.init() must then
 * throw ERR_NF_NO_MPI saying what to install.
 */
import { afterEach, describe, expect, it } from 'vitest';

import { distributed } from '../lib';
import { jsonLines, mpirun, mpiSkipReason } from './support/mpi';

const skip = mpiSkipReason();
if (skip) console.log(`distributed tests skipped: ${skip}`);

describe('distributed without MPI', () => {
  const saved = process.env.NF_MPI_ADDON_PATH;
  afterEach(() => {
    if (saved === undefined) delete process.env.NF_MPI_ADDON_PATH;
    else process.env.NF_MPI_ADDON_PATH = saved;
  });

  it('init() rejects with ERR_NF_NO_MPI naming what to install', async () => {
    process.env.NF_MPI_ADDON_PATH = '/nonexistent/nodeformer_mpi.node';
    await expect(distributed.init()).rejects.toMatchObject({ code: 'ERR_NF_NO_MPI', message: expect.stringMatching(/openmpi-bin libopenmpi-dev[\s\S]*build:mpi/) });
    expect(distributed.isInitialized()).toBe(false);
    expect(distributed.rank()).toBe(0);
    expect(distributed.worldSize()).toBe(1);
  });

  it('collectives before init throw ERR_NF_STATE', async () => {
    await expect(distributed.barrier()).rejects.toMatchObject({ code: 'ERR_NF_STATE' });
  });
});

interface Collectives {
  rank: number; size: number; initialized: boolean; finalized: boolean;
  sum: number[]; mean: number[]; max: number[]; isum: number[]; big: number[]; bcast: number[];
  gatherShape: number[]; gather: number[]; many: number[];
}

describe.skipIf(skip)('collectives under mpirun', () => {
  for (const n of [2, 3]) {
    it(`match closed forms at world size ${n}`, async () => {
      const run = await mpirun(n, 'test/support/dist_collectives.ts');
      expect(run.code, run.stderr).toBe(0);
      const ranks = jsonLines<Collectives>(run.stdout);
      expect(ranks.map((r) => r.rank)).toEqual([...Array(n).keys()]);
      const tri = (n * (n + 1)) / 2;
      for (const r of ranks) {
        expect(r.size).toBe(n);
        expect(r.initialized && r.finalized).toBe(true);
        expect(r.sum).toEqual([1, 2, 3, 4, 5].map((i) => i * tri));
        for (const [i, v] of r.mean.entries()) expect(v).toBeCloseTo(((i + 1) * tri) / n, 5);
        expect(r.max).toEqual([1, 2, 3, 4, 5].map((i) => i * n));
        expect(r.isum).toEqual([(n * (n - 1)) / 2, n]);
        expect(r.big).toEqual([tri, tri]);
        expect(r.bcast).toEqual([(n - 1) * 10, (n - 1) * 10 + 1]);
        expect(r.gatherShape).toEqual([n, 2]);
        expect(r.gather).toEqual([...Array(n).keys()].flatMap((k) => [k, -k]).map((v) => v + 0));
        expect(r.many).toEqual([n, 2 * n, 3 * n]);
      }
    });
  }
});
