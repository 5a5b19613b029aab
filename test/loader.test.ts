/**
 * Loading the addon: a binary that cannot be loaded is explained (which files were tried and why
 * each failed), and one binary is safe on every x86-64 CPU — AVX-512 instructions appear only in
 * the nf::cpu::avx512 and nf::cpu::avx512bf16 kernels, which run only when CPUID says the CPU has
 * AVX-512, and the BF16 ones (vcvtne2ps2bf16, vcvtneps2bf16, vdpbf16ps) only in nf::cpu::avx512bf16,
 * which runs only when CPUID says it has AVX512_BF16 too.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { describe, expect, it, vi } from 'vitest';

import { native, nativeAddonPath } from '../lib/native/addon';
import type { Isa } from '../lib/native/core';

async function loadWith(env: Record<string, string>): Promise<Error & { code?: string }> {
  for (const [k, v] of Object.entries(env)) vi.stubEnv(k, v);
  vi.resetModules();
  try {
    await import('../lib/native/addon');
  } catch (e) {
    return e as Error;
  } finally {
    vi.unstubAllEnvs();
  }
  throw new Error('the addon loaded');
}

describe('loader', () => {
  it('reports where the addon came from', () => {
    expect(nativeAddonPath).toMatch(/\.node$/);
    expect(fs.existsSync(nativeAddonPath)).toBe(true);
  });

  it('explains a binary that cannot be loaded, naming it and the loader error', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-load-'));
    const bogus = path.join(dir, 'nodeformer.node');
    fs.writeFileSync(bogus, 'this is not a shared library');
    const e = await loadWith({ NF_ADDON_PATH: bogus });
    expect(e.code).toBe('ERR_NF_LOAD');
    expect(e.message).toContain(`Tried NF_ADDON_PATH:\n  - ${bogus}: `);
    expect(e.message).toMatch(/invalid ELF header|file too short|not a valid/);
    expect(e.message).toMatch(/Unset NF_ADDON_PATH/);
  });

  it('explains a missing file', async () => {
    const e = await loadWith({ NF_ADDON_PATH: path.join(os.tmpdir(), 'nf-no-such-dir', 'x.node') });
    expect(e.code).toBe('ERR_NF_LOAD');
    expect(e.message).toMatch(/x\.node: .*(Cannot find module|no such file)/i);
  });
});

describe('one binary for every x86-64 CPU', () => {
  const info = native.isaInfo();
  const x86 = process.arch === 'x64';

  it('never selects a kernel variant the CPU lacks, whatever NF_ISA asks for', () => {
    const order = x86 ? ['scalar', 'avx2', 'avx512', 'avx512bf16'] : process.arch === 'arm64' ? ['scalar', 'neon'] : ['scalar'];
    expect(info.compiled).toEqual(order);
    for (const want of order) {
      const active = execFileSync(process.execPath, ['-p', `require(${JSON.stringify(nativeAddonPath)}).isaInfo().active`],
        { env: { ...process.env, NF_ISA: want }, encoding: 'utf8' }).trim();
      expect(order.indexOf(active)).toBeLessThanOrEqual(order.indexOf(info.detected));
      // The best variant at or below both NF_ISA and the CPU's that passed the load-time self-check.
      const cap = Math.min(order.indexOf(want), order.indexOf(info.detected));
      expect(active).toBe(info.available.filter((isa) => order.indexOf(isa) <= cap).at(-1));
    }
    for (const above of order.slice(order.indexOf(info.detected) + 1) as Isa[])
      expect(() => native.setIsa(above)).toThrow(new RegExp(`cannot run the ${above} kernels`));
  });

  it.runIf(info.detected === 'avx512bf16')('picks avx512 over avx512bf16 where the BF16 dot product loses to the FMA and no AMX-BF16 runs the bf16 GEMM, unless NF_ISA names it', () => {
    // What a fresh process picks, its ratio, and the bf16 kernels avx512bf16 would run there.
    const load = (env: Record<string, string>) => JSON.parse(execFileSync(process.execPath, ['-p',
      `const n = require(${JSON.stringify(nativeAddonPath)}), i = n.isaInfo(); n.setIsa('avx512bf16'); ` +
      'JSON.stringify({ active: i.active, ratio: i.bf16DotRatio, kernels: n.isaInfo().bf16Kernels })'],
      { env: { ...process.env, NF_ISA: '', ...env }, encoding: 'utf8' })) as { active: Isa; ratio: number; kernels: string };
    const plain = load({}), noAmx = load({ NF_AMX: '0' });
    console.log(`vdpbf16ps against the FMA on this CPU: ${plain.ratio.toFixed(2)}x the FLOP rate; avx512bf16's bf16 GEMM: ${plain.kernels}; ` +
      `the load picks ${plain.active} (${noAmx.active} with NF_AMX=0)`);
    expect(plain.ratio).toBeGreaterThan(0);
    expect(noAmx.kernels).toBe('vdpbf16ps');
    if (info.available.includes('avx512bf16')) {
      expect(plain.active).toBe(plain.ratio > 1 || plain.kernels === 'amx' ? 'avx512bf16' : 'avx512');
      expect(noAmx.active).toBe(noAmx.ratio > 1 ? 'avx512bf16' : 'avx512');
    }
    expect(load({ NF_ISA: 'avx512bf16', NF_AMX: '0' }).active).toBe(info.available.at(-1));
  });

  // objdump (binutils) comes with the compiler that builds the addon; the check reads the binary itself.
  const objdump = x86 && (() => {
    try {
      execFileSync('objdump', ['--version'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();

  /**
   * What to disassemble: the loaded addon when it has its symbol table; a stripped one (a platform
   * package's, as `npm run build:platforms` leaves it in build/platforms/<platform>/ with its
   * objects in obj/ beside it, as also build/Release's copy of it made by scripts/ensure-built.js;
   * else the clone's build/Release/obj.target) through the object files it was linked from, which
   * keep their symbols.
   */
  function binaries(): string[] {
    if (!/no symbols/.test(execFileSync('objdump', ['-t', nativeAddonPath], { encoding: 'utf8', maxBuffer: 1 << 28 })))
      return [nativeAddonPath];
    const beside = path.join(path.dirname(nativeAddonPath), 'obj');
    const objects = fs.existsSync(beside) ? beside : path.resolve(__dirname, '..', 'build', 'Release', 'obj.target');
    return fs.readdirSync(objects, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.o')).map((f) => path.join(objects, f));
  }

  it.runIf(objdump)('has AVX-512 instructions only inside nf::cpu::avx512(bf16|_vnni) code, BF16 ones only inside nf::cpu::avx512bf16, VNNI ones only inside nf::cpu::avx512_vnni, AMX ones only in those two', () => {
    const files = binaries();
    expect(files.length).toBeGreaterThan(0);
    const dump = execFileSync('objdump', ['-d', '-C', ...files], { encoding: 'utf8', maxBuffer: 1 << 30 });
    const offenders = new Set<string>(), bf16Offenders = new Set<string>(), vnniOffenders = new Set<string>(), amxOffenders = new Set<string>();
    let fn = '', evexFns = 0, bf16Fns = 0, vnniFns = 0, amxFns = 0;
    for (const line of dump.split('\n')) {
      const head = /^[0-9a-f]+ <(.*)>:$/.exec(line);
      if (/file format/.test(line)) fn = '';
      if (head) {
        fn = head[1];
        continue;
      }
      // An instruction line: "  addr:\tbytes\tmnemonic operands". EVEX (AVX-512) encodings start with 0x62.
      const m = /^\s+[0-9a-f]+:\t([0-9a-f ]+)\t(.*)$/.exec(line);
      if (!m) continue;
      // VNNI (vpdpbusd / vpdpwssd, AVX-512 VNNI or AVX-VNNI): only in the int8 kernels' own namespace.
      if (/^\{?[a-z]*\}?\s*vpdp(bu|ws)sds?\b/.test(m[2])) {
        if (fn.includes('nf::cpu::avx512_vnni::')) vnniFns++;
        else vnniOffenders.add(fn);
      }
      // AMX (tile configuration, loads, stores, products: every one names a %tmm register or is
      // ldtilecfg / tilerelease): only in the int8 and bf16 kernels that check cpu_has_amx_*.
      if (/%tmm\d|^(ldtilecfg|sttilecfg|tilerelease)\b/.test(m[2])) {
        if (/nf::cpu::(avx512_vnni|avx512bf16)::/.test(fn)) amxFns++;
        else amxOffenders.add(fn);
      }
      const evex = /^(6[67] )?62 /.test(m[1]) || /%zmm|%k[0-7]\b|%[xy]mm(1[6-9]|2\d|3[01])\b/.test(m[2]);
      if (!evex) continue;
      if (/nf::cpu::avx512(bf16|_vnni)?::/.test(fn)) evexFns++;
      else offenders.add(fn);
      if (!/^vdpbf16ps|^vcvtne2?ps2bf16/.test(m[2])) continue;
      if (fn.includes('nf::cpu::avx512bf16::')) bf16Fns++;
      else bf16Offenders.add(fn);
    }
    expect([...offenders]).toEqual([]);
    expect([...bf16Offenders]).toEqual([]);
    expect(evexFns).toBeGreaterThan(0); // the AVX-512 kernels are there
    expect(bf16Fns).toBeGreaterThan(0); // and the BF16 ones
    expect([...vnniOffenders]).toEqual([]);
    expect(vnniFns).toBeGreaterThan(0); // the int8 VNNI kernels are there
    expect([...amxOffenders]).toEqual([]);
    if (info.int8Kernels === 'amx') expect(amxFns).toBeGreaterThan(0); // the AMX kernels are there (this CPU runs them)
  });
});
