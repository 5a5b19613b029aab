/**
 * Installing the package from its tarball on a machine without a compiler. The package is packed
 * (npm pack, which builds dist/ through `prepare`) from a staging copy of the repository, so the
 * working tree is never touched; its prebuilds/ are the repository's (`npm run prebuild`), or —
 * when that has not been run — the binary these tests loaded (build/Release), stripped, which is
 * what prebuildify makes of the same build. The tarball is installed with `npm install --offline` into an empty folder with
 * a PATH holding only node and sh, so node-gyp-build cannot fall back to compiling; then the
 * package is loaded with require() and with import, a small TypeScript file is type-checked
 * against its .d.ts files, and the loader's explanation of a broken or missing prebuild is read.
 */
import { execFile, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { nativeAddonPath } from '../lib/native';

const root = path.resolve(__dirname, '..');
const platformDir = `${process.platform}-${process.arch}`;
const npmCli = [path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js'),
  path.join(path.dirname(fs.realpathSync(process.execPath)), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js')]
  .find((p) => fs.existsSync(p));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-pack-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/**
 * Runs a command (asynchronously, so the test worker stays responsive), resolving to its standard
 * output and error; a failure shows both in the error.
 */
function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, env, encoding: 'utf8', maxBuffer: 1 << 26 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')} failed (${err.message}):\n${stdout}${stderr}`));
      else resolve({ stdout, stderr });
    });
  });
}

/** The files npm packs (package.json "files"), copied; prebuilds from the repository or staged from build/Release. */
async function stage(): Promise<{ dir: string; prebuild: string }> {
  const dir = path.join(tmp, 'pkg');
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { files: string[] };
  for (const f of [...pkg.files, 'package.json', 'tsconfig.json', 'lib'])
    if (fs.existsSync(path.join(root, f)) && f !== 'dist' && f !== 'prebuilds') fs.cpSync(path.join(root, f), path.join(dir, f), { recursive: true });
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules')); // for tsc in `prepare`
  const repoPrebuilds = path.join(root, 'prebuilds', platformDir);
  const target = path.join(dir, 'prebuilds', platformDir);
  if (fs.existsSync(repoPrebuilds) && fs.readdirSync(repoPrebuilds).some((f) => f.endsWith('.node'))) {
    fs.cpSync(path.join(root, 'prebuilds'), path.join(dir, 'prebuilds'), { recursive: true });
    return { dir, prebuild: 'prebuilds/ from `npm run prebuild`' };
  }
  fs.mkdirSync(target, { recursive: true });
  const file = path.join(target, 'nodeformer.node');
  fs.copyFileSync(nativeAddonPath, file);
  await run('strip', ['--strip-unneeded', file], dir);
  return { dir, prebuild: `${path.relative(root, nativeAddonPath)}, stripped (no prebuilds/ yet)` };
}

/** A bin folder with node and sh only: no cc, c++, g++, make, python or nvcc. */
function bareBin(): string {
  const bin = path.join(tmp, 'bin');
  fs.mkdirSync(bin);
  fs.symlinkSync(process.execPath, path.join(bin, 'node'));
  fs.symlinkSync('/bin/sh', path.join(bin, 'sh'));
  return bin;
}

describe.runIf(npmCli && process.platform !== 'win32')('install from the packed tarball', () => {
  let app = '', installed = '', env: NodeJS.ProcessEnv = {};

  it('packs dist/, the prebuild and the sources, and nothing else; installs without a compiler', async () => {
    const { dir, prebuild } = await stage();
    const { stdout: packOut } = await run(process.execPath, [npmCli!, 'pack', '--json', '--pack-destination', tmp], dir);
    const packed = JSON.parse(packOut.slice(packOut.indexOf('[\n'))) as { filename: string; files: { path: string }[] }[];
    const files = packed[0].files.map((f) => f.path);
    console.log(`npm pack: ${packed[0].filename}, ${files.length} files; prebuild: ${prebuild}`);
    expect(files).toContain('dist/cjs/index.js');
    expect(files).toContain('dist/cjs/index.d.ts');
    expect(files).toContain('binding.gyp');
    expect(files.some((f) => f.startsWith(`prebuilds/${platformDir}/`) && f.endsWith('.node'))).toBe(true);
    expect(files.filter((f) => /^(build|test|node_modules|scripts)\//.test(f) || f.endsWith('.tgz'))).toEqual([]);
    app = path.join(tmp, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
    env = { PATH: bareBin(), HOME: os.homedir(), npm_config_cache: path.join(os.homedir(), '.npm') };
    for (const tool of ['cc', 'c++', 'g++', 'gcc', 'make', 'python3', 'nvcc'])
      expect(spawnSync('sh', ['-c', `command -v ${tool}`], { env }).status, `${tool} is hidden`).not.toBe(0);
    const tarball = path.join(tmp, packed[0].filename);
    const args = ['install', '--offline', '--no-audit', '--no-fund', '--foreground-scripts', tarball];
    const result = await run(process.execPath, [npmCli!, ...args], app, env);
    const out = `${result.stdout}${result.stderr.split('\n').filter((l) => !/Unknown user config/.test(l)).join('\n')}`;
    console.log(`$ PATH=<node and sh only> npm ${args.join(' ')}\n${out.trim()}`);
    expect(out).toMatch(/> nodeformer@[\d.]+ install\n> node-gyp-build/); // the install script ran, found the prebuild, built nothing
    installed = path.join(app, 'node_modules', 'nodeformer');
    expect(fs.existsSync(path.join(installed, 'build')), 'node-gyp did not build anything').toBe(false);
  });

  it('loads with require() and computes, from the prebuild', async () => {
    const { stdout: out } = await run(process.execPath, ['-e', `
      const nf = require('nodeformer');
      const lin = new nf.Linear({ inFeatures: 3, outFeatures: 2, seed: 1 });
      const y = lin.forward(nf.Tensor.from(Float32Array.of(1, 2, 3), [1, 3]));
      console.log(JSON.stringify({ path: nf.nativeAddonPath, shape: y.shape, isa: nf.native.isaInfo().active }));`], app, env);
    const r = JSON.parse(out) as { path: string; shape: number[]; isa: string };
    expect(r.path).toBe(fs.realpathSync(path.join(installed, 'prebuilds', platformDir, path.basename(r.path))));
    expect(r.shape).toEqual([1, 2]);
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

  it('explains a prebuild that cannot be loaded, and a missing one', () => {
    const dir = path.join(installed, 'prebuilds', platformDir);
    const file = path.join(dir, fs.readdirSync(dir).find((f) => f.endsWith('.node'))!);
    fs.writeFileSync(file, 'not a shared library');
    const load = () => spawnSync(process.execPath, ['-e', "require('nodeformer')"], { cwd: app, env, encoding: 'utf8' });
    const broken = load();
    expect(broken.status).not.toBe(0);
    expect(broken.stderr).toContain('ERR_NF_LOAD');
    expect(broken.stderr).toContain(`- ${file}: `);
    expect(broken.stderr).toMatch(/invalid ELF header|file too short/);
    expect(broken.stderr).toContain(`${path.join(installed, 'build', 'Release', 'nodeformer.node')}: not found`);
    fs.rmSync(path.join(installed, 'prebuilds'), { recursive: true });
    const missing = load();
    expect(missing.stderr).toMatch(/node-gyp-build: No native build was found for platform=linux arch=x64/);
    expect(missing.stderr).toContain(`${dir}: no such folder`);
    expect(missing.stderr).toMatch(/npm rebuild nodeformer/);
    console.log(`a missing prebuild is explained as:\n${missing.stderr.split('\n').filter((l) => /nodeformer:|  - |Build it/.test(l)).join('\n')}`);
  });
});
