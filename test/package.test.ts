/**
 * Installing nodeformer as a user does, on a machine without a compiler: its tarballs (the main
 * package and this platform's package, @nodeformer/<platform>, lib/native/platform.ts) are served
 * by a local registry (test/support/registry.ts, which also serves the dependency closure from this
 * clone's node_modules) and installed into empty projects by npm with --strict-allow-scripts (npm
 * refuses any install script), by pnpm and by bun, each in under 20 s, on a PATH that holds node, sh
 * and stand-ins for cc, c++, g++, gcc, make, python3, nvcc and node-gyp that record any call (none
 * may happen). Then the library is loaded with require() and with import, computes what this
 * process computes, a TypeScript consumer is type-checked against its .d.ts files, the lean install,
 * the command line and the README's fit() snippet are checked, and the loader's explanation of a
 * broken or missing platform package is read.
 *
 * The tarballs: release/ as `npm run pack:all` wrote it (CI runs it before the tests), else packed
 * here by the same functions (scripts/packaging.ts) from this clone's builds: dist/, and the
 * platform package from build/Release/nodeformer.node (stripped) and the MPI addon when built.
 * With NF_REQUIRE_RELEASE=1 (set by .ci/run) a release/ without them fails instead.
 *
 * npm runs with the test's registry, an empty cache of its own and no user or global npmrc; what
 * it asks that registry for and does not get must be an optional dependency (another platform's
 * package, a platform package pack:all could not build here), which npm skips.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Linear, Tensor } from '../lib/index';
import { nativeAddonPath } from '../lib/native/addon';
import { CUDA_PLATFORM, currentPlatform, MPI_ADDON, packageName } from '../lib/native/platform';
import { ownManifest, packMain, packPlatform } from '../scripts/packaging';
import { run, serveRegistry, type Manifest, type Registry } from './support/registry';
import { runtime } from './support/runtimes';

const root = path.resolve(__dirname, '..');
const npmCli = [path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js'),
  path.join(path.dirname(fs.realpathSync(process.execPath)), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js')]
  .find((p) => fs.existsSync(p));
const platform = currentPlatform();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-pack-'));
const { version } = ownManifest();
let registry: Registry | undefined;
afterAll(async () => {
  await registry?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** The tarballs to install: release/'s, or packed here from the clone's builds. */
function tarballs(): { main: string; platform: string; others: string[]; from: string } {
  const release = path.join(root, 'release');
  const main = path.join(release, `nodeformer-${version}.tgz`);
  const own = path.join(release, `nodeformer-${platform!.key}-${version}.tgz`);
  if (fs.existsSync(main) && fs.existsSync(own)) {
    const others = fs.readdirSync(release).filter((f) => f.endsWith('.tgz')).map((f) => path.join(release, f)).filter((f) => f !== main && f !== own);
    return { main, platform: own, others, from: 'release/ (npm run pack:all)' };
  }
  if (process.env.NF_REQUIRE_RELEASE === '1') throw new Error(`NF_REQUIRE_RELEASE=1 but release/ lacks ${path.basename(main)} or ${path.basename(own)}: run npm run pack:all`);
  const npm = [process.execPath, npmCli!];
  const built = path.join(tmp, 'built');
  fs.mkdirSync(built);
  fs.copyFileSync(nativeAddonPath, path.join(built, 'nodeformer.node'));
  execFileSync('strip', ['--strip-unneeded', path.join(built, 'nodeformer.node')]);
  const mpi = path.join(root, 'native', 'mpi', 'build', 'Release', MPI_ADDON);
  if (fs.existsSync(mpi)) fs.copyFileSync(mpi, path.join(built, MPI_ADDON));
  execFileSync(process.execPath, [path.join(root, 'scripts', 'ensure-built.js')], { cwd: root, stdio: 'inherit' }); // dist/ up to date
  const stage = path.join(tmp, 'stage'), dest = path.join(tmp, 'release');
  const p = packPlatform(npm, platform!, built, stage, dest, version);
  const m = packMain(npm, stage, dest, [platform!]);
  return { main: m.file, platform: p.file, others: [], from: `packed here from ${path.relative(root, nativeAddonPath)} and dist/ (no release/: npm run pack:all)` };
}

const shimTools = ['cc', 'c++', 'g++', 'gcc', 'make', 'python3', 'nvcc', 'node-gyp'];
const shimLog = path.join(tmp, 'compiler-calls.log');

/** A bin folder with node, sh, and stand-ins for the build tools that log any call to shimLog and fail. */
function bareBin(): string {
  const bin = path.join(tmp, 'bin');
  fs.mkdirSync(bin);
  fs.symlinkSync(process.execPath, path.join(bin, 'node'));
  fs.symlinkSync('/bin/sh', path.join(bin, 'sh'));
  for (const tool of shimTools) fs.writeFileSync(path.join(bin, tool), `#!/bin/sh\necho "${tool} $*" >> '${shimLog}'\nexit 1\n`, { mode: 0o755 });
  return bin;
}

/** An empty project folder. */
function emptyProject(name: string): string {
  const dir = path.join(tmp, name);
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }));
  return dir;
}

/** What this process computes for the install checks: a seeded Linear's forward pass. */
const probe = `
  const lin = new nf.Linear({ inFeatures: 3, outFeatures: 2, seed: 1 });
  const y = lin.forward(nf.Tensor.from(Float32Array.of(1, 2, 3), [1, 3]));
  console.log(JSON.stringify({ path: nf.nativeAddonPath, shape: y.shape, y: Array.from(y.toArray()) }));`;
const expected = Array.from(new Linear({ inFeatures: 3, outFeatures: 2, seed: 1 }).forward(Tensor.from(Float32Array.of(1, 2, 3), [1, 3])).toArray());

/** Runs the probe with `node` in `dir`; checks it computed `expected` with the platform package's binary under `dir`. */
async function computes(dir: string, env: NodeJS.ProcessEnv): Promise<string> {
  const { stdout } = await run(process.execPath, ['-e', `const nf = require('nodeformer');${probe}`], dir, env);
  const r = JSON.parse(stdout) as { path: string; shape: number[]; y: number[] };
  expect(r.shape).toEqual([1, 2]);
  r.y.forEach((v, i) => expect(Math.abs(v - expected[i])).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(expected[i]))));
  expect(r.path.startsWith(fs.realpathSync(dir))).toBe(true);
  expect(r.path).toMatch(new RegExp(`${packageName(platform!).replace('/', '[/+]')}.*nodeformer\\.node$`));
  return r.path;
}

/** Times an install command; checks it ran no compiler and took < 20 s. */
async function install(what: string, cmd: string, args: string[], dir: string, env: NodeJS.ProcessEnv): Promise<string> {
  const t0 = Date.now();
  const r = await run(cmd, args, dir, env);
  const seconds = (Date.now() - t0) / 1000;
  console.log(`${what}: ${seconds.toFixed(1)} s`);
  expect(fs.existsSync(shimLog) ? fs.readFileSync(shimLog, 'utf8') : '', `${what} ran no compiler`).toBe('');
  expect(seconds, `${what} took < 20 s`).toBeLessThan(20);
  return `${r.stdout}${r.stderr}`;
}

describe.runIf(npmCli && platform && process.platform !== 'win32')('install from the tarballs, no script, no compiler', () => {
  let app = '', installed = '', env: NodeJS.ProcessEnv = {}, packs: ReturnType<typeof tarballs>;

  beforeAll(async () => {
    packs = tarballs();
    registry = await serveRegistry([packs.main, packs.platform, ...packs.others]);
    console.log(`tarballs from ${packs.from}: ${[packs.main, packs.platform, ...packs.others].map((f) => `${path.basename(f)} ${(fs.statSync(f).size / 2 ** 20).toFixed(2)} MiB`).join(', ')}`);
    console.log(`registry on ${registry.url}: ${registry.packages} packages, ${(registry.bytes / 2 ** 20).toFixed(1)} MiB`);
    const [userrc, globalrc] = [path.join(tmp, 'user-npmrc'), path.join(tmp, 'global-npmrc')];
    for (const f of [userrc, globalrc]) fs.writeFileSync(f, '');
    env = {
      PATH: bareBin(), HOME: os.homedir(),
      npm_config_registry: registry.url, npm_config_cache: path.join(tmp, 'npm-cache'),
      npm_config_userconfig: userrc, npm_config_globalconfig: globalrc, npm_config_update_notifier: 'false',
    };
  }, 300_000);

  it('packs the main package without sources, binding.gyp or scripts, and the platform package with its addon', () => {
    const list = (f: string) => execFileSync('tar', ['-tzf', f], { encoding: 'utf8' }).trim().split('\n').map((l) => l.replace(/^package\//, ''));
    const manifest = (f: string) => JSON.parse(execFileSync('tar', ['-xzOf', f, 'package/package.json'], { encoding: 'utf8' })) as Manifest & Record<string, unknown>;
    const files = list(packs.main);
    expect(files).toContain('dist/cjs/index.js');
    expect(files).toContain('dist/cjs/index.d.ts');
    expect(files.filter((f) => /^(native|build|test|scripts|prebuilds)\//.test(f) || /\.(gyp|node|tgz)$/.test(f))).toEqual([]);
    const main = manifest(packs.main);
    expect(main.scripts).toBeUndefined(); // nothing for npm to run: no install, no prepare
    expect(main.gypfile).toBe(false);
    expect(main.optionalDependencies).toMatchObject({ [packageName(platform!)]: version });
    const own = manifest(packs.platform);
    expect(own).toMatchObject({ name: packageName(platform!), version, os: [platform!.os], cpu: [platform!.cpu] });
    if (platform!.libc) expect(own.libc).toEqual([platform!.libc]);
    expect(own.scripts).toBeUndefined();
    expect(list(packs.platform)).toContain('nodeformer.node');
  });

  it('npm --strict-allow-scripts installs it in < 20 s: no script, no compiler', async () => {
    app = emptyProject('app');
    const args = ['install', '--no-audit', '--no-fund', '--strict-allow-scripts', `nodeformer@${version}`];
    const out = await install(`npm ${args.join(' ')}`, process.execPath, [npmCli!, ...args], app, env);
    console.log(out.trim());
    const notFound = [...new Set(registry!.notFound)].sort();
    console.log(`asked for, not in the registry (optional): ${notFound.join(', ') || 'none'}`);
    expect(notFound.filter((n) => !registry!.optionalNames.has(n)), 'npm asked only for what the clone has, or optional packages').toEqual([]);
    installed = path.join(app, 'node_modules', 'nodeformer');
    expect(fs.existsSync(path.join(installed, 'build')), 'nothing was built').toBe(false);
  });

  it('loads with require() and computes, from the platform package', async () => {
    const file = await computes(app, env);
    expect(file).toBe(fs.realpathSync(path.join(app, 'node_modules', packageName(platform!), 'nodeformer.node')));
  });

  it('loads with import, with named exports', async () => {
    const { stdout: out } = await run(process.execPath, ['--input-type=module', '-e', `
      import { Tensor, ViTClassifier, NodeformerError } from 'nodeformer';
      const m = new ViTClassifier({ imgSize: 8, patchSize: 4, inChannels: 1, dModel: 8, numHeads: 2, dFF: 16, depth: 1, numClasses: 3 });
      let code = '';
      try { m.forward(Tensor.zeros([1, 1, 6, 6])); } catch (e) { code = e instanceof NodeformerError ? e.code : 'other'; }
      console.log(m.forward(Tensor.zeros([2, 1, 8, 8])).shape.join('x'), code);`], app, env);
    expect(out.trim()).toBe('2x3 ERR_NF_INVALID_ARG');
  });

  it('type-checks a consumer against the .d.ts files, in CommonJS and ESM', async () => {
    const check = `import { AdamW, Tensor, ViTClassifier, crossEntropy, type NodeformerError } from 'nodeformer';
const model = new ViTClassifier({ imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 3 });
const logits: Tensor<'float32'> = model.forward(Tensor.zeros([2, 1, 8, 8]));
const { loss, grad } = crossEntropy(logits, Tensor.from(Int32Array.of(0, 2), [2]));
const n: number = loss;
model.backward(grad);
new AdamW(model.parameters(), { lr: 1e-3 }).step();
const code: NodeformerError['code'] = 'ERR_NF_FORMAT';
// @ts-expect-error: imgSize is a number
new ViTClassifier({ imgSize: '8' });
export { n, code };
`;
    fs.writeFileSync(path.join(app, 'check.ts'), check);
    fs.writeFileSync(path.join(app, 'check.mts'), check);
    const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    await run(process.execPath, [tsc, '--noEmit', '--strict', '--module', 'node16', '--moduleResolution', 'node16', '--target', 'es2022',
      '--typeRoots', path.join(root, 'node_modules', '@types'), '--types', 'node', 'check.ts', 'check.mts'], app, env);
  });

  it('installs only nodeformer, its platform package and detect-libc: sharp and the command line\'s packages stay out', async () => {
    const { stdout } = await run(process.execPath, [npmCli!, 'ls', '--all', '--parseable'], app, env);
    const packages = stdout.trim().split('\n').slice(1).map((p) => path.relative(path.join(app, 'node_modules'), p)).sort();
    const bytes = (dir: string): number => fs.readdirSync(dir, { withFileTypes: true })
      .reduce((n, e) => n + (e.isDirectory() ? bytes(path.join(dir, e.name)) : e.isFile() ? fs.statSync(path.join(dir, e.name)).size : 0), 0);
    console.log(`installed: ${packages.length} packages (${packages.join(', ')}), node_modules ${(bytes(path.join(app, 'node_modules')) / 2 ** 20).toFixed(1)} MiB`);
    expect(packages).toEqual([packageName(platform!), 'detect-libc', 'nodeformer']);
  });

  it('prints the command line\'s help and the npm install it needs, exit 0, without the command line\'s packages', () => {
    const bin = path.join(app, 'node_modules', '.bin', 'nodeformer');
    for (const args of [['--help'], ['-h'], ['help'], ['train', '--help']]) {
      const r = spawnSync(process.execPath, [bin, ...args], { cwd: app, env, encoding: 'utf8' });
      expect(r.status, `nodeformer ${args.join(' ')}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(/^Usage: nodeformer/);
      for (const command of ['train', 'eval', 'predict', 'bench']) expect(r.stdout).toMatch(new RegExp(`^  ${command} +\\S`, 'm'));
      expect(r.stdout).toMatch(/^ {2}npm install .*'commander@/m);
    }
  });

  it.runIf(fs.existsSync('/usr/bin/script'))("runs the README's fit() snippet as written, on a terminal and piped, without cli-progress; its checkpoint loads", () => {
    const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
    const snippet = /## fit\(\): a training loop with callbacks\s+```ts\n([\s\S]*?)```/.exec(readme)![1];
    // The batches the snippet leaves to the reader: 28×28 digits-like images, 10 classes.
    fs.writeFileSync(path.join(app, 'batches.mjs'), `import { Tensor } from 'nodeformer';
let seed = 1;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const batch = (n) => ({ input: Tensor.from(Float32Array.from({ length: n * 784 }, rand), [n, 1, 28, 28]),
  target: Tensor.from(Int32Array.from({ length: n }, () => Math.floor(rand() * 10)), [n]) });
export const trainBatches = [batch(8), batch(8), batch(5)], valBatches = [batch(6)];
`);
    fs.writeFileSync(path.join(app, 'fit.mjs'), `import { trainBatches, valBatches } from './batches.mjs';\n${snippet}`);
    const tty = spawnSync('/usr/bin/script', ['-qec', `${process.execPath} fit.mjs`, '/dev/null'], { cwd: app, env, encoding: 'utf8' });
    console.log(`README fit() snippet on a terminal, without cli-progress:\n${tty.stdout.trim()}`);
    expect(tty.status, tty.stdout).toBe(0);
    expect(tty.stdout).toContain("progressBar(): cli-progress is not installed, so progress is one line per epoch; for a bar per epoch: npm install 'cli-progress@");
    expect(tty.stdout).toMatch(/^epoch 1\/20 \| loss \d\.\d{4} \| acc [\d.]+% \| val loss \d\.\d{4} \| val acc [\d.]+% \| [\d,]+ samples\/s \| [\d.]+ s\r?$/m);
    const piped = spawnSync(process.execPath, ['fit.mjs'], { cwd: app, env, encoding: 'utf8' });
    expect(piped.status, piped.stderr).toBe(0);
    expect(`${piped.stdout}${piped.stderr}`).toBe('');
    const loaded = spawnSync(process.execPath, ['-e', `
      const { loadModel, ViTClassifier } = require('nodeformer');
      const a = ViTClassifier.load('best.safetensors'), b = loadModel('best.safetensors');
      console.log(a.constructor.name, b.constructor.name, a.config.patchSize);`], { cwd: app, env, encoding: 'utf8' });
    expect(loaded.stdout.trim(), loaded.stderr).toBe('ViTClassifier ViTClassifier 7');
  });

  it('explains what ImageFolder and the nodeformer command need, and works once that npm install has run', async () => {
    const folder = path.join(tmp, 'images', 'cat');
    fs.mkdirSync(folder, { recursive: true });
    const imageFolder = await run(process.execPath, ['-e', `
      const nf = require('nodeformer');
      try { new nf.ImageFolder(${JSON.stringify(path.dirname(folder))}); } catch (e) { console.log(e.code + ': ' + e.message); }`], app, env);
    expect(imageFolder.stdout.trim()).toMatch(/^ERR_NF_MISSING_PACKAGE: ImageFolder decodes images with sharp, but sharp is not installed .*: npm install 'sharp@\^[\d.]+'$/);

    const bin = path.join(app, 'node_modules', '.bin', 'nodeformer');
    const bare = spawnSync(process.execPath, [bin, 'train'], { cwd: app, env, encoding: 'utf8' });
    expect(bare.status).toBe(1);
    const peers = Object.keys((JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as Manifest).peerDependencies ?? {});
    expect(bare.stderr).toContain(`the nodeformer command line needs packages that a library install leaves out (${peers.join(', ')})`);
    const command = /^ {2}(npm install .*)$/m.exec(bare.stderr)![1];
    console.log(`\`nodeformer train\` without the command line's packages says:\n${bare.stderr.trim()}`);
    const args = command.split(' ').slice(1).map((a) => a.replace(/^'|'$/g, ''));
    await run(process.execPath, [npmCli!, ...args, '--no-audit', '--no-fund'], app, env);
    const help = spawnSync(process.execPath, [bin, 'predict', '--help'], { cwd: app, env, encoding: 'utf8' });
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toContain('any format sharp reads');
    const ready = await run(process.execPath, ['-e', `
      const nf = require('nodeformer');
      require('sharp')({ create: { width: 5, height: 4, channels: 3, background: '#3080f0' } }).png()
        .toFile(${JSON.stringify(path.join(folder, 'a.png'))})
        .then(async () => {
          const ds = new nf.ImageFolder(${JSON.stringify(path.dirname(folder))}, { imageSize: 2 });
          const s = await ds.get(0);
          for await (const b of new nf.DataLoader(ds, { workers: 1 })) console.log(s.input.length, b.input.shape.join('x'), b.target.data[0]);
        });`], app, env);
    expect(ready.stdout.trim()).toBe('12 1x3x2x2 0'); // DataLoader's worker: dist/cjs/data/decode_worker.js
  });

  it("device 'cuda' names the CUDA package's npm install; installed (when release/ has it), 'cuda' loads its addon", async () => {
    const probeCuda = `const nf = require('nodeformer');
      try { nf.Tensor.zeros([2], 'float32', 'cuda'); console.log('ok'); } catch (e) { console.log(e.code + ': ' + e.message); }`;
    const without = (await run(process.execPath, ['-e', probeCuda], app, env)).stdout.trim();
    expect(without).toMatch(/^ERR_NF_NO_CUDA: nodeformer was built without CUDA \(@nodeformer\/linux-x64-cuda is not installed; /);
    if (platform!.key === 'linux-x64-gnu') expect(without).toContain(`npm install ${packageName(CUDA_PLATFORM)}@${version}`);
    const tarball = packs.others.find((f) => path.basename(f) === `nodeformer-${CUDA_PLATFORM.key}-${version}.tgz`);
    if (!tarball || platform!.key !== 'linux-x64-gnu') {
      console.log(`${packageName(CUDA_PLATFORM)}: not in ${packs.from} (npm run build:cuda, then npm run pack:all): only its absence was checked`);
      return;
    }
    await install(`npm install ${packageName(CUDA_PLATFORM)}`, process.execPath,
      [npmCli!, 'install', '--no-audit', '--no-fund', '--strict-allow-scripts', `${packageName(CUDA_PLATFORM)}@${version}`], app, env);
    const withIt = (await run(process.execPath, ['-e', probeCuda], app, env)).stdout.trim();
    console.log(`with ${packageName(CUDA_PLATFORM)} installed, Tensor.zeros on 'cuda': ${withIt}`);
    // Its addon loaded (linked against no CUDA toolkit library); on a machine without a GPU the
    // driver's answer is ERR_NF_CUDA naming the call, on one with a GPU the tensor is made.
    expect(withIt).toMatch(/^ok$|^ERR_NF_CUDA: device_count: cudaError\w+/);
  });

  it('explains a platform binary that cannot be loaded, and a missing platform package', () => {
    const dir = path.join(app, 'node_modules', packageName(platform!));
    const file = path.join(dir, 'nodeformer.node');
    fs.writeFileSync(file, 'not a shared library');
    const load = () => spawnSync(process.execPath, ['-e', "require('nodeformer')"], { cwd: app, env, encoding: 'utf8' });
    const broken = load();
    expect(broken.status).not.toBe(0);
    expect(broken.stderr).toContain('ERR_NF_LOAD');
    expect(broken.stderr).toContain(`- ${file}: `);
    expect(broken.stderr).toMatch(/invalid ELF header|file too short/);
    expect(broken.stderr).toContain(`${path.join(installed, 'build', 'Release', 'nodeformer.node')}: not found`);
    fs.rmSync(dir, { recursive: true });
    const missing = load();
    expect(missing.stderr).toContain(`- ${packageName(platform!)} is not installed`);
    expect(missing.stderr).toContain('npm install --include=optional');
    expect(missing.stderr).toContain(`npm install ${packageName(platform!)}@${version}`);
    expect(missing.stderr).toMatch(/allowScripts/);
    expect(missing.stderr).toContain('npm install && npm run build:native');
    console.log(`a missing platform package is explained as:\n${missing.stderr.split('\n').filter((l) => /nodeformer:|  - |prebuilt|source/.test(l)).join('\n')}`);
  });

  const pnpm = runtime('pnpm');
  it.runIf(pnpm)('pnpm installs it in < 20 s, no script, no compiler; it loads and computes', async () => {
    const dir = emptyProject('app-pnpm');
    const args = ['add', `nodeformer@${version}`, '--store-dir', path.join(tmp, 'pnpm-store'), '--cache-dir', path.join(tmp, 'pnpm-cache'),
      '--registry', registry!.url, '--reporter', 'append-only'];
    console.log((await install(`pnpm ${args.slice(0, 2).join(' ')}`, process.execPath, [pnpm!, ...args], dir, env)).trim());
    await computes(dir, env);
  });

  const bun = runtime('bun');
  it.runIf(bun)('bun install installs it in < 20 s, no script, no compiler; it loads and computes', async () => {
    const dir = emptyProject('app-bun');
    const args = ['add', `nodeformer@${version}`, '--registry', registry!.url];
    console.log((await install(`bun ${args.slice(0, 2).join(' ')}`, bun!, args, dir, { ...env, BUN_INSTALL_CACHE_DIR: path.join(tmp, 'bun-cache') })).trim());
    await computes(dir, env);
  });
});
