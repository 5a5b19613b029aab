/**
 * Helpers for the tests that launch ranks with Open MPI's mpirun: whether MPI and the distributed
 * addon are there (and why not), and a runner for a bundled entry file under `mpirun -np N`.
 */
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { bundle, bundleEnv, repoRoot } from './bundle';

export const mpiAddon = path.join(repoRoot, 'native', 'mpi', 'build', 'Release', 'nodeformer_mpi.node');

/** Why the MPI tests cannot run here, or null when they can. */
export function mpiSkipReason(): string | null {
  if (spawnSync('sh', ['-c', 'command -v mpirun'], { stdio: 'ignore' }).status !== 0)
    return 'mpirun not found: install Open MPI (apt-get install openmpi-bin libopenmpi-dev) to run the distributed tests';
  if (!fs.existsSync(process.env.NF_MPI_ADDON_PATH ?? mpiAddon))
    return `the distributed addon is not built (${mpiAddon}): run \`npm run build:mpi\``;
  return null;
}

export interface MpiRun {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** The options mpirun needs on a small machine, as root, in a container. */
export const MPIRUN_FLAGS = ['--oversubscribe', '--bind-to', 'none', '--mca', 'btl', 'self,vader,tcp', '--mca', 'btl_vader_single_copy_mechanism', 'none'];

/** Runs `entry` (bundled) under `mpirun -np np` with extra args and env; resolves when mpirun exits. */
export function mpirun(np: number, entry: string, args: string[] = [], env: NodeJS.ProcessEnv = {}, timeoutMs = 90_000): Promise<MpiRun> {
  const file = entry.endsWith('.js') ? entry : bundle(entry);
  const t0 = Date.now();
  return new Promise((resolve) => {
    const child = spawn('mpirun', ['-np', String(np), ...MPIRUN_FLAGS, process.execPath, file, ...args], {
      env: { ...bundleEnv(), NF_MPI_ADDON_PATH: process.env.NF_MPI_ADDON_PATH ?? mpiAddon,
        OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1', OMPI_MCA_rmaps_base_oversubscribe: '1', ...env },
      cwd: repoRoot,
    });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - t0 });
    });
  });
}

/** The JSON lines of a run's stdout, sorted by their `rank`. */
export function jsonLines<T extends { rank: number }>(stdout: string): T[] {
  return stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as T).sort((a, b) => a.rank - b.rank);
}
