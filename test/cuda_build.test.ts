/**
 * The CUDA backend compiles for real GPUs: scripts/check_cuda.sh (npm run check:cuda) builds every
 * native/cuda/*.cu with nvcc for sm_80, sm_89 and sm_90 (+ PTX) with warnings as errors, and fails
 * on any register spill or kernel over its register / shared-memory budget. Skipped, with the
 * reason, where nvcc is not installed (a CPU-only machine never needs it).
 */
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { describe, expect, it } from 'vitest';

import { root } from './support/cuda_emu_build';

function nvcc(): string | null {
  for (const c of [process.env.NVCC, 'nvcc', process.env.CUDA_PATH && path.join(process.env.CUDA_PATH, 'bin', 'nvcc'), '/usr/local/cuda/bin/nvcc']) {
    if (c && !spawnSync(c, ['--version']).error) return c;
  }
  return null;
}

const compiler = nvcc();
if (!compiler) console.log('CUDA build check skipped: nvcc is not installed');

describe('CUDA backend build (nvcc)', () => {
  it.skipIf(!compiler)('compiles every kernel for sm_80/89/90 with no warnings, no spills and within budget', async () => {
    const report = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'nf-ptxas-')), 'ptxas-report.txt');
    const r = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn('bash', ['scripts/check_cuda.sh'], { cwd: root, env: { ...process.env, NVCC: compiler!, NF_PTXAS_REPORT: report } });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      child.on('close', (code) => resolve({ code, out }));
    });
    console.log(r.out.trim().split('\n').at(-1));
    expect(r.code, r.out).toBe(0);
    const rows = fs.readFileSync(report, 'utf8').split('\n').filter((l) => l && !l.startsWith('#') && !l.startsWith('file'));
    expect(rows.length).toBeGreaterThan(90);
    for (const arch of ['sm_80', 'sm_89', 'sm_90']) expect(rows.some((l) => l.includes(` ${arch} `))).toBe(true);
    expect(rows.every((l) => / ok \(/.test(l))).toBe(true);
  }, 1_200_000);
});
