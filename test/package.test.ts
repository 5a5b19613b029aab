/**
 * Installing the package from its tarball on a machine without a compiler. The package is packed
 * (npm pack, which builds dist/ through `prepare`) from a staging copy of the repository, so the
 * working tree is never touched; its prebuilds/ are the repository's (`npm run prebuild`), or —
 * when that has not been run — the binary these tests loaded (build/Release), stripped, which is
 * what prebuildify makes of the same build. The tarball is installed with `npm install <tarball>`
 * into an empty folder with a PATH holding only node and sh, so node-gyp-build cannot fall back to
 * compiling; then the package is loaded with require() and with import, a small TypeScript file is
 * type-checked against its .d.ts files, and the loader's explanation of a broken or missing
 * prebuild is read.
 *
 * Where the dependencies come from. npm resolves the package's dependency ranges against registry
 * metadata (packuments), which an offline install takes from the npm cache; a fresh machine's cache,
 * filled by `npm install` of a clone (from its lockfile), holds the dependencies' tarballs but no
 * metadata that `npm install --offline` can use, which then fails with ENOTCACHED. So the install
 * never looks at the user's cache or the network: the test serves a registry of its own on
 * 127.0.0.1 holding every package of nodeformer's dependency closure exactly as this clone's
 * node_modules holds it (each folder packed into a tarball here, nested node_modules left out),
 * and npm runs with that registry, an empty cache of its own and no user or global npmrc. What npm
 * asks that registry for and does not get must be an optional dependency for another platform
 * (@img/sharp-darwin-arm64, ...), which npm skips as it would with a registry lacking it.
 *
 * The install is lean: nodeformer's dependencies are the addon's (node-addon-api, node-gyp-build);
 * sharp and the command line's packages are optional peer dependencies, which npm leaves out. The
 * registry serves them too, so the test checks the library without them (it loads and computes;
 * ImageFolder and the `nodeformer` bin name the npm install that adds what is missing), then runs
 * the bin's npm install and the command line.
 *
 * Checked with three caches (npm_config_cache when running vitest; the install ignores it, the
 * staging `npm pack` reads it): an empty one (`mktemp -d`); one holding tarballs only, a filled
 * cache copied with every index entry but the tarballs' dropped —
 *   cp -r ~/.npm /tmp/c && find /tmp/c/_cacache/index-v5 -type f -exec sed -i -E \
 *     '/"key":"(make-fetch-happen:request-cache:[^"]*\.tgz|pacote:tarball:[^"]*)"/!d' {} +
 * (with it, the `npm install --offline` this test used to run fails as on the fresh machine:
 * "request to …/@resvg%2fresvg-js failed: cache mode is 'only-if-cached'"); and the usual ~/.npm.
 */
import { execFile, spawnSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import * as zlib from 'node:zlib';

import { afterAll, describe, expect, it } from 'vitest';

import { nativeAddonPath } from '../lib/native/addon';

const root = path.resolve(__dirname, '..');
const platformDir = `${process.platform}-${process.arch}`;
const npmCli = [path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js'),
  path.join(path.dirname(fs.realpathSync(process.execPath)), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js')]
  .find((p) => fs.existsSync(p));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-pack-'));
let server: http.Server | undefined;
afterAll(async () => {
  if (server) await new Promise((resolve) => server!.close(resolve));
  fs.rmSync(tmp, { recursive: true, force: true });
});

/**
 * Runs a command (asynchronously, so the test worker stays responsive and its registry answers),
 * resolving to its standard output and error; a failure shows both in the error.
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

interface Manifest {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  bundleDependencies?: string[] | boolean;
  bundledDependencies?: string[] | boolean;
}

/**
 * Every package that installing nodeformer brings in (dependencies, optional dependencies and
 * peer dependencies, transitively), found the way Node resolves them from this clone, keyed by
 * name@version. A required one that is missing means `npm install` has not been run.
 */
function dependencyClosure(): Map<string, { dir: string; manifest: Manifest }> {
  const found = new Map<string, { dir: string; manifest: Manifest }>();
  const seen = new Set<string>();
  const locate = (from: string, name: string): string | undefined => {
    for (let dir = from; ; dir = path.dirname(dir)) {
      const candidate = path.join(dir, 'node_modules', name);
      if (fs.existsSync(path.join(candidate, 'package.json'))) return candidate;
      if (path.dirname(dir) === dir) return undefined;
    }
  };
  const visit = (dir: string, manifest: Manifest) => {
    const wanted: [string, boolean][] = [
      ...Object.keys(manifest.dependencies ?? {}).map((n): [string, boolean] => [n, false]),
      ...Object.keys(manifest.optionalDependencies ?? {}).map((n): [string, boolean] => [n, true]),
      ...Object.keys(manifest.peerDependencies ?? {}).map((n): [string, boolean] => [n, !!manifest.peerDependenciesMeta?.[n]?.optional]),
    ];
    for (const [name, optional] of wanted) {
      const child = locate(dir, name);
      if (!child) {
        if (!optional) throw new Error(`${name}, a dependency of ${manifest.name}, is not in node_modules: run npm install`);
        continue;
      }
      const real = fs.realpathSync(child);
      if (seen.has(real)) continue;
      seen.add(real);
      const m = JSON.parse(fs.readFileSync(path.join(child, 'package.json'), 'utf8')) as Manifest;
      if (!found.has(`${m.name}@${m.version}`)) found.set(`${m.name}@${m.version}`, { dir: real, manifest: m });
      visit(real, m);
    }
  };
  const own = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as Manifest;
  visit(root, { name: own.name, version: own.version, dependencies: own.dependencies, optionalDependencies: own.optionalDependencies,
    peerDependencies: own.peerDependencies, peerDependenciesMeta: own.peerDependenciesMeta });
  return found;
}

/**
 * A package folder as npm publishes it: a gzipped ustar archive of its files under package/,
 * without its nested node_modules (bundled dependencies excepted), modes 644/755, one fixed mtime.
 */
function packFolder(dir: string, manifest: Manifest): Buffer {
  const bundled = manifest.bundleDependencies ?? manifest.bundledDependencies;
  const bundledNames = bundled === true ? Object.keys(manifest.dependencies ?? {}) : Array.isArray(bundled) ? bundled : [];
  const blocks: Buffer[] = [];
  const header = (name: string, size: number, mode: number): Buffer => {
    const h = Buffer.alloc(512);
    let prefix = '';
    if (Buffer.byteLength(name) > 100) { // ustar: up to 155 bytes of leading folders go into `prefix`
      let at = name.indexOf('/');
      while (at >= 0 && Buffer.byteLength(name.slice(at + 1)) > 100) at = name.indexOf('/', at + 1);
      if (at < 0 || Buffer.byteLength(name.slice(0, at)) > 155) throw new Error(`path too long for a ustar header: ${name}`);
      prefix = name.slice(0, at);
      name = name.slice(at + 1);
    }
    h.write(name, 0, 100);
    h.write(`${mode.toString(8).padStart(7, '0')}\0`, 100);
    h.write('0000000\0', 108); // uid
    h.write('0000000\0', 116); // gid
    h.write(`${size.toString(8).padStart(11, '0')}\0`, 124);
    h.write(`${(499162500).toString(8).padStart(11, '0')}\0`, 136); // npm's fixed mtime, 1985-10-26
    h.write('        ', 148); // the checksum counts its own field as spaces
    h.write('0', 156); // a regular file
    h.write('ustar\u000000', 257);
    h.write(prefix, 345, 155);
    let sum = 0;
    for (const byte of h) sum += byte;
    h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
    return h;
  };
  const walk = (abs: string, rel: string) => {
    for (const entry of fs.readdirSync(abs, { withFileTypes: true }).sort((x, y) => (x.name < y.name ? -1 : 1))) {
      const r = rel ? `${rel}/${entry.name}` : entry.name;
      const full = path.join(abs, entry.name);
      if (r === 'node_modules') {
        for (const n of bundledNames) if (fs.existsSync(path.join(full, n))) walk(path.join(full, n), `node_modules/${n}`);
        continue;
      }
      const stat = fs.statSync(full);
      if (stat.isDirectory()) walk(full, r);
      else if (stat.isFile()) {
        const data = fs.readFileSync(full);
        blocks.push(header(`package/${r}`, data.length, stat.mode & 0o111 ? 0o755 : 0o644), data, Buffer.alloc((512 - (data.length % 512)) % 512));
      }
    }
  };
  walk(dir, '');
  blocks.push(Buffer.alloc(1024));
  return zlib.gzipSync(Buffer.concat(blocks), { level: 1 });
}

/** Orders x.y.z versions numerically (enough to pick a dist-tag; npm does the range matching). */
function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.+-]/).map(Number), pb = b.split(/[.+-]/).map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i] - pb[i];
  return 0;
}

/**
 * Serves the dependency closure as an npm registry on 127.0.0.1: a packument per name (every
 * version found, `latest` the highest) and a tarball per version. Resolves to its address and the
 * list of names npm asked for and did not get.
 */
async function serveRegistry(): Promise<{ url: string; packages: number; bytes: number; notFound: string[]; optionalNames: Set<string> }> {
  const packuments = new Map<string, { name: string; 'dist-tags': { latest: string }; versions: Record<string, unknown> }>();
  const tarballs = new Map<string, Buffer>();
  const optionalNames = new Set<string>();
  const notFound: string[] = [];
  let bytes = 0;
  const closure = dependencyClosure();
  server = http.createServer((req, res) => {
    const url = decodeURIComponent((req.url ?? '/').split('?')[0]).slice(1);
    const tarball = tarballs.get(url);
    const packument = packuments.get(url);
    if (tarball) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': tarball.length });
      res.end(tarball);
    } else if (packument) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(packument));
    } else {
      notFound.push(url);
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":"Not found"}');
    }
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  for (const { dir, manifest } of closure.values()) {
    for (const n of Object.keys(manifest.optionalDependencies ?? {})) optionalNames.add(n);
    for (const [n, meta] of Object.entries(manifest.peerDependenciesMeta ?? {})) if (meta.optional) optionalNames.add(n);
    const data = packFolder(dir, manifest);
    bytes += data.length;
    const file = `${manifest.name}/-/${manifest.name.split('/').pop()}-${manifest.version}.tgz`;
    tarballs.set(file, data);
    const doc = packuments.get(manifest.name) ?? { name: manifest.name, 'dist-tags': { latest: manifest.version }, versions: {} };
    if (compareVersions(manifest.version, doc['dist-tags'].latest) > 0) doc['dist-tags'].latest = manifest.version;
    doc.versions[manifest.version] = {
      ...manifest,
      _id: `${manifest.name}@${manifest.version}`,
      dist: {
        tarball: `${base}/${file}`,
        integrity: `sha512-${crypto.createHash('sha512').update(data).digest('base64')}`,
        shasum: crypto.createHash('sha1').update(data).digest('hex'),
      },
    };
    packuments.set(manifest.name, doc);
  }
  for (const n of closure.keys()) optionalNames.delete(n.slice(0, n.lastIndexOf('@')));
  return { url: `${base}/`, packages: closure.size, bytes, notFound, optionalNames };
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
    expect(files.filter((f) => /^(build|test|node_modules|scripts|reference)\//.test(f) || f.endsWith('.tgz'))).toEqual([]);
    // The MPI addon's sources and build script (package.json's `install` runs it), not its build folder.
    expect(files).toEqual(expect.arrayContaining(['native/mpi/build.js', 'native/mpi/binding.gyp', 'native/mpi/binding.cpp']));
    expect(files.filter((f) => f.startsWith('native/mpi/build/'))).toEqual([]);
    app = path.join(tmp, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
    const t0 = Date.now();
    const registry = await serveRegistry();
    console.log(`registry on ${registry.url}: ${registry.packages} packages from node_modules, ${(registry.bytes / 2 ** 20).toFixed(1)} MiB packed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    const [userrc, globalrc] = [path.join(tmp, 'user-npmrc'), path.join(tmp, 'global-npmrc')];
    for (const f of [userrc, globalrc]) fs.writeFileSync(f, '');
    env = {
      PATH: bareBin(), HOME: os.homedir(),
      // Only the test's registry and an empty cache of the test's own: whatever ~/.npm holds (or
      // lacks) and whatever the network offers play no part. No user or global npmrc either.
      npm_config_registry: registry.url, npm_config_cache: path.join(tmp, 'npm-cache'),
      npm_config_userconfig: userrc, npm_config_globalconfig: globalrc, npm_config_update_notifier: 'false',
    };
    for (const tool of ['cc', 'c++', 'g++', 'gcc', 'make', 'python3', 'nvcc'])
      expect(spawnSync('sh', ['-c', `command -v ${tool}`], { env }).status, `${tool} is hidden`).not.toBe(0);
    const tarball = path.join(tmp, packed[0].filename);
    const args = ['install', '--no-audit', '--no-fund', '--foreground-scripts', tarball];
    const result = await run(process.execPath, [npmCli!, ...args], app, env);
    const out = `${result.stdout}${result.stderr}`;
    console.log(`$ PATH=<node and sh only> npm ${args.join(' ')}\n${out.trim()}`);
    const notFound = [...new Set(registry.notFound)].sort();
    console.log(`asked for, not in the registry (optional): ${notFound.join(', ') || 'none'}`);
    expect(notFound.filter((n) => !registry.optionalNames.has(n)), 'npm asked only for what the clone has, or optional packages').toEqual([]);
    expect(out).toMatch(/> nodeformer@[\d.]+ install\n> node-gyp-build/); // the install script ran, found the prebuild, built nothing
    const deps = Object.keys((JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as Manifest).dependencies ?? {});
    const version = (dir: string, n: string) => (JSON.parse(fs.readFileSync(path.join(dir, 'node_modules', n, 'package.json'), 'utf8')) as Manifest).version;
    for (const n of deps) expect(version(app, n), `${n} as the clone has it`).toBe(version(root, n));
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

  it('installs only the addon\'s dependencies: sharp and the command line\'s packages stay out', async () => {
    const { stdout } = await run(process.execPath, [npmCli!, 'ls', '--all', '--parseable'], app, env);
    const packages = stdout.trim().split('\n').slice(1).map((p) => path.relative(path.join(app, 'node_modules'), p)).sort();
    const bytes = (dir: string): number => fs.readdirSync(dir, { withFileTypes: true })
      .reduce((n, e) => n + (e.isDirectory() ? bytes(path.join(dir, e.name)) : e.isFile() ? fs.statSync(path.join(dir, e.name)).size : 0), 0);
    console.log(`installed: ${packages.length} packages (${packages.join(', ')}), node_modules ${(bytes(path.join(app, 'node_modules')) / 2 ** 20).toFixed(1)} MiB`);
    expect(packages).toEqual(['node-addon-api', 'node-gyp-build', 'nodeformer']);
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
