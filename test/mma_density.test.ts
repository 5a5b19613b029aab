/**
 * scripts/mma_density.py, the instruction count behind `scripts/check_cuda.sh density` (PTX, here)
 * and gpu_bench.sh's sass_density step (cuobjdump SASS, on a lent GPU, where it cannot be tried
 * first): on a small hand-written loop in each syntax, it finds the loop holding the mma
 * instructions, counts it statically, and takes the shortest way through it that issues a copy and
 * the mma (skipping the optional branch, not the copy, nor the products as an idle warp's branch
 * does), by kind of instruction.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..');
const dir = mkdtempSync(path.join(tmpdir(), 'nf-mma-density-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const hasPython = spawnSync('python3', ['--version']).status === 0;

// Columns of the --markdown table, by header name, for the one kernel matched.
function count(file: string, text: string): Record<string, string> {
  const p = path.join(dir, file);
  writeFileSync(p, text);
  const r = spawnSync('python3', [path.join(root, 'scripts/mma_density.py'), p, '--markdown'], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  const lines = r.stdout.trim().split('\n');
  const cells = (line: string) => line.split('|').slice(1, -1).map((c) => c.trim());
  expect(lines).toHaveLength(3);
  const head = cells(lines[0]!), row = cells(lines[2]!);
  return Object.fromEntries(head.map((h, i) => [h, row[i]!]));
}

// A tile loop: copy, commit, wait, barrier; an idle warp's branch past the products to the back edge;
// an optional branch around a mask test and a global load; two mma fed by one ldmatrix; then integer
// and fp32 work and the back edge. Before the loop, setup; after it, an exit.
const ptx = `
.visible .entry _Z6kernelv(
)
{
\tmov.u32 \t%r1, %tid.x;
$L__BB0_1:
\tcp.async.cg.shared.global [%r2], [%rd1], 16, %r3;
\tcp.async.commit_group;
\tcp.async.wait_group 0;
\tbar.sync \t0;
\t@%p4 bra \t$L__BB0_4;
\t@%p1 bra \t$L__BB0_3;
\tsetp.lt.s32 \t%p2, %r1, 5;
\tld.global.u8 \t%rs1, [%rd2];
$L__BB0_3:
\tldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r4, %r5, %r6, %r7}, [%r8];
\tmma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1, %f2, %f3, %f4}, {%r4, %r5, %r6, %r7}, {%r9, %r10}, {%f1, %f2, %f3, %f4};
\tmma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1, %f2, %f3, %f4}, {%r4, %r5, %r6, %r7}, {%r9, %r10}, {%f1, %f2, %f3, %f4};
\tadd.s32 \t%r8, %r8, 64;
\tex2.approx.f32 \t%f5, %f6;
$L__BB0_4:
\t@%p3 bra \t$L__BB0_1;
\tret;
}
`;

// The same loop as cuobjdump -sass prints it (addresses, a .L_x label, branch targets both ways).
const sass = `
\tcode for sm_90
\t\tFunction : _Z6kernelv
\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                       /* 0x00000a00ff017b82 */
                                                                                /* 0x000fe40000000800 */
        /*0010*/                   S2R R0, SR_TID.X ;                           /* 0x0000000000007919 */
.L_x_1:
        /*0020*/                   LDGSTS.E.BYPASS.128 [R3], desc[UR4][R4.64] ;
        /*0030*/                   LDGDEPBAR ;
        /*0040*/                   DEPBAR.LE SB0, 0x0 ;
        /*0050*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0060*/               @P4 BRA \`(.L_x_3) ;
        /*0070*/              @!P0 BRA \`(.L_x_2) ;
        /*0080*/                   ISETP.GE.AND P2, PT, R0, 0x5, PT ;
        /*0090*/                   LDG.E.U8 R6, desc[UR4][R6.64] ;
.L_x_2:
        /*00a0*/                   LDSM.16.M88.4 R8, [R5] ;
        /*00b0*/                   HMMA.16816.F32.BF16 R12, R8, R16, R12 ;
        /*00c0*/                   HMMA.16816.F32.BF16 R12, R8, R16, R12 ;
        /*00d0*/                   IADD3 R5, R5, 0x40, RZ ;
        /*00e0*/                   MUFU.EX2 R1, R2 ;
.L_x_3:
        /*00f0*/               @P1 BRA 0x20 ;
        /*0100*/                   EXIT ;
        /*0110*/                   BRA 0x110;
`;

describe.skipIf(!hasPython)('scripts/mma_density.py', () => {
  for (const [syntax, file, text] of [
    ['PTX', 'k.ptx', ptx],
    ['SASS', 'k.sass', sass],
  ] as const) {
    it(`counts the tile loop of ${syntax}`, () => {
      const c = count(file, text);
      expect(c['kernel']).toBe('kernel');
      expect(c['mma']).toBe('2');
      expect(c['static']).toBe('14');  // the loop's instructions, the optional two included
      expect(c['path']).toBe('12');  // the copy and the products kept, the mask test and the load skipped
      expect(c['path/mma']).toBe('6.0');
      expect([c['ldmatrix'], c['cp.async'], c['bar'], c['glob'], c['int'], c['fp'], c['ctl']]).toEqual(
        ['1', '3', '1', '0', '1', '1', '3']);
    });
  }
});
