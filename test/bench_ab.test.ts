/**
 * `npm run bench:ab` (bench/ab.ts): its case syntax, and a short run of the default addon against
 * itself on one GEMM, one attention backward and one int8 Linear forward (no timing assertions: the
 * machine may be busy).
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';

import { describe, expect, it } from 'vitest';

import { caseFlops, parseCase } from '../bench/ab_cases';

const root = path.resolve(__dirname, '..');
const ab = (...args: string[]) =>
  promisify(execFile)(process.execPath, ['--import', 'tsx', path.join(root, 'bench/ab.ts'), ...args], { cwd: root, encoding: 'utf8' });

describe('bench:ab cases', () => {
  it('parse GEMMs and attention passes with their flags and precision', () => {
    expect(parseCase('gemm:1576x3072x768:Bg@bf16')).toEqual({ kind: 'gemm', M: 1576, N: 3072, K: 768, transA: false, transB: true, act: 'gelu', precision: 'bf16' });
    expect(parseCase('attention:16x145x256x8:bc')).toEqual({ kind: 'attention', B: 16, T: 145, D: 256, H: 8, pass: 'backward', causal: true, precision: 'fp32' });
    expect(parseCase('attention:2x7x12x3')).toMatchObject({ pass: 'forward', causal: false });
    expect(parseCase('linear:197x2304x768:g@int8')).toEqual({ kind: 'linear', M: 197, N: 2304, K: 768, act: 'gelu', precision: 'int8' });
    expect(caseFlops(parseCase('gemm:2x3x5'))).toBe(60);
    expect(caseFlops(parseCase('linear:2x3x5@bf16'))).toBe(60);
    expect(caseFlops(parseCase('attention:2x7x12x3'))).toBeNull();
  });

  it('reject what they cannot run, saying what is wrong', () => {
    expect(() => parseCase('gemm:2x3')).toThrow(/gemm takes 3 dimensions/);
    expect(() => parseCase('gemm:2x0x3')).toThrow(/positive integers/);
    expect(() => parseCase('gemm:2x3x4:T')).toThrow(/unknown flag 'T'/);
    expect(() => parseCase('attention:2x7x10x3')).toThrow(/multiple of H/);
    expect(() => parseCase('attention:2x7x12x3:fb')).toThrow(/f and b both/);
    expect(() => parseCase('conv:2x3x4')).toThrow(/unknown kind 'conv'/);
    expect(() => parseCase('gemm:2x3x4@fp16')).toThrow(/unknown precision 'fp16'/);
    expect(() => parseCase('gemm:2x3x4@int8')).toThrow(/precision 'int8' is for linear cases only/);
    expect(() => parseCase('linear:2x3x4:B')).toThrow(/unknown flag 'B'/);
    expect(() => parseCase('linear:2x3')).toThrow(/linear takes 3 dimensions/);
  });
});

describe('bench:ab run', () => {
  it('times both sides in turns and prints each case with the median ratio', { timeout: 120_000 }, async () => {
    const { stdout } = await ab('--pairs', '2', '--seconds', '0.02', '--peak', 'default', 'default@1', 'gemm:64x48x40:B', 'attention:2x9x24x3:b@bf16', 'linear:13x40x36:g@int8');
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^A = default, B = default@1; 2 pairs/);
    expect(lines[1]).toMatch(/^gemm:64x48x40:B: A [\d.]+ ms \(\d+ GFLOP\/s\), fastest [\d.]+, \d+% of the peak \| B .* \| ratio [\d.]+ \(pairs/);
    expect(lines[2]).toMatch(/^attention:2x9x24x3:b@bf16: A [\d.]+ ms, fastest [\d.]+ \| B [\d.]+ ms, fastest [\d.]+ \| ratio [\d.]+/);
    expect(lines[3]).toMatch(/^linear:13x40x36:g@int8: A [\d.]+ ms \(\d+ GFLOP\/s\), fastest [\d.]+, \d+% of the peak \| B .* \| ratio [\d.]+ \(pairs/);
  });

  it('exits with the usage on a bad case or option', async () => {
    await expect(ab('default', 'default', 'gemm:1x2')).rejects.toMatchObject({ code: 2, stderr: expect.stringMatching(/gemm takes 3 dimensions[\s\S]*usage:/) });
    await expect(ab('--pairs', '0', 'default', 'default', 'gemm:1x2x3')).rejects.toMatchObject({ code: 2, stderr: expect.stringMatching(/--pairs must be a positive number/) });
    await expect(ab('default', 'gemm:1x2x3')).rejects.toMatchObject({ code: 2, stdout: expect.stringMatching(/^usage:/) });
  });
});
