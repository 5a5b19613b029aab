/**
 * `npm run build:platforms [key ...]`: builds, on this Linux x64 machine, the addons of every
 * platform package (lib/native/platform.ts) it has a cross compiler for, into
 * build/platforms/<key>/ (stripped, as `npm run pack:all` packs them), and ends with a table of
 * what was built, what was not and why. Nothing is faked: a platform without a toolchain here is
 * reported as not built, and pack:all leaves its package out.
 *
 * The compilers, all driven the same way (the source lists and ISA variants of native/sources.js,
 * the flags of binding.gyp, Node-API headers from node-api-headers, no Node headers or node.lib of
 * a particular Node version, since the addons use Node-API alone):
 *   linux-x64-gnu    g++ (the host's)                       Debian: g++
 *   linux-arm64-gnu  aarch64-linux-gnu-g++                  Debian: g++-aarch64-linux-gnu
 *   win32-x64        x86_64-w64-mingw32-g++-posix, linked   Debian: g++-mingw-w64-x86-64-posix
 *                    against an import library for node.exe made by dlltool from node-api-headers'
 *                    def/node_api.def (what node.lib is to MSVC)
 *   linux-*-musl,    zig c++ -target ... (`zig` on the PATH or `pip install ziglang`, python3 -m ziglang):
 *   darwin-*         zig ships musl and the macOS SDK stubs; macOS addons link with -undefined dynamic_lookup
 * The glibc binaries link the system's libstdc++ (a static one would raise the glibc floor from
 * 2.34 to 2.36: its random_device calls arc4random); the report prints each binary's floor (the
 * newest GLIBC_ / GLIBCXX_ symbol version it needs). The Windows binary carries the MinGW C++
 * runtime statically, so it needs only node.exe and system DLLs. The MPI addon is built for linux-x64-gnu (Open MPI's mpicxx flags), the CUDA addon
 * by `npm run build:cuda` (nvcc), which pack:all takes from build/cuda.
 *
 * Objects are kept in build/platforms/<key>/obj/<hash of the compile command>/ and rebuilt when any
 * file under native/ or the Node-API headers is newer (coarse, but never stale); `--clean` starts over.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { CPU_ADDON, MPI_ADDON, PLATFORMS, type PlatformPackage } from '../lib/native/platform';

const root = path.resolve(__dirname, '..');
const outRoot = path.join(root, 'build', 'platforms');

/** How one platform is compiled here, or why it cannot be. */
interface Toolchain {
  /** The compiler's argv prefix (`g++`, or `python3 -m ziglang c++ -target ...`). */
  cxx: string[];
  /** Extra flags for compiling and linking. */
  compile: string[];
  link: string[];
  /** The strip command for the finished binaries (zig strips with -s at link time instead). */
  strip?: string[];
  /** An objdump for the target's ELF files: nothing of nodeformer's own may be left undefined; the glibc floor. */
  objdump?: string;
  /** Whether objects are compiled with -fPIC (shared objects; not on Windows, where code is relocatable anyway). */
  pic: boolean;
}

function onPath(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

/** zig's command, if there is one here: `zig`, or the pip package's `python3 -m ziglang`. */
function zig(): string[] | null {
  if (onPath('zig')) return ['zig'];
  if (spawnSync('python3', ['-m', 'ziglang', 'version'], { stdio: 'ignore' }).status === 0) return ['python3', '-m', 'ziglang'];
  return null;
}

const gnuLink = ['-shared', '-pthread', '-Wl,-O1'];
/** As binding.gyp on arm64, where FMA is baseline: no fusing of a multiply and an add in one ISA variant and not another. */
const arm64Flags = ['-ffp-contract=off'];
const zigTargets: Record<string, string> = {
  'linux-x64-musl': 'x86_64-linux-musl',
  'linux-arm64-musl': 'aarch64-linux-musl',
  'darwin-x64': 'x86_64-macos.11.0',
  'darwin-arm64': 'aarch64-macos.11.0',
};

/** The toolchain for `p`, or the reason there is none here. */
function toolchain(p: PlatformPackage, importLib: () => string): Toolchain | string {
  switch (p.key) {
    case 'linux-x64-gnu':
      return onPath('g++') ? { cxx: ['g++'], compile: ['-pthread'], link: gnuLink, strip: ['strip', '--strip-unneeded'], objdump: 'objdump', pic: true }
        : 'no g++ (Debian: apt-get install g++)';
    case 'linux-arm64-gnu':
      return onPath('aarch64-linux-gnu-g++')
        ? { cxx: ['aarch64-linux-gnu-g++'], compile: ['-pthread', ...arm64Flags], link: gnuLink, strip: ['aarch64-linux-gnu-strip', '--strip-unneeded'],
          objdump: 'aarch64-linux-gnu-objdump', pic: true }
        : 'no aarch64-linux-gnu-g++ (Debian: apt-get install g++-aarch64-linux-gnu)';
    case 'win32-x64':
      return onPath('x86_64-w64-mingw32-g++-posix') && onPath('x86_64-w64-mingw32-dlltool')
        ? { cxx: ['x86_64-w64-mingw32-g++-posix'], compile: ['-pthread', '-D_USE_MATH_DEFINES'], pic: false, strip: ['x86_64-w64-mingw32-strip', '--strip-unneeded'],
          link: ['-shared', '-static', '-static-libgcc', '-static-libstdc++', importLib()] }
        : 'no MinGW-w64 C++ compiler (Debian: apt-get install g++-mingw-w64-x86-64-posix)';
    default: {
      const z = zig();
      if (!z) return 'needs zig as the cross compiler, and none was found (`zig` on the PATH, or `pip install ziglang` for `python3 -m ziglang`)';
      const macos = p.os === 'darwin';
      return { cxx: [...z, 'c++', '-target', zigTargets[p.key]], compile: [...(macos ? [] : ['-pthread']), ...(p.cpu === 'arm64' ? arm64Flags : [])], pic: true,
        link: ['-shared', '-s', ...(macos ? ['-undefined', 'dynamic_lookup'] : ['-pthread'])] };
    }
  }
}

const headers = path.join(path.dirname(require.resolve('node-api-headers/package.json')), 'include');
const addonApi = path.join(path.dirname(require.resolve('node-addon-api/package.json')));
/** binding.gyp's flags (target_defaults), for every platform. */
const baseFlags = ['-std=c++17', '-O3', '-fexceptions', '-Wall', '-Wextra', '-Wno-unused-parameter', '-fno-math-errno',
  '-DNAPI_VERSION=8', '-DNAPI_CPP_EXCEPTIONS', '-DNODE_ADDON_API_DISABLE_DEPRECATED', '-I', headers, '-I', addonApi];

function sources(which: string, arch?: string): string[] {
  return execFileSync(process.execPath, [path.join(root, 'native', 'sources.js'), which, ...(arch ? [arch] : [])], { cwd: root, encoding: 'utf8' })
    .split(' ').filter(Boolean);
}

function newest(p: string): number {
  const stat = fs.statSync(p);
  return stat.isDirectory() ? fs.readdirSync(p).reduce((n, e) => Math.max(n, newest(path.join(p, e))), stat.mtimeMs) : stat.mtimeMs;
}

/** Runs commands `jobs` at a time; rejects with the first failure's output. */
async function runAll(commands: string[][], jobs: number): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < commands.length) {
      const cmd = commands[next++];
      await new Promise<void>((resolve, reject) => {
        const child = spawn(cmd[0], cmd.slice(1), { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        child.stdout.on('data', (d) => (out += d));
        child.stderr.on('data', (d) => (out += d));
        child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd.join(' ')}\n${out}`))));
      });
    }
  };
  await Promise.all(Array.from({ length: jobs }, worker));
}

/**
 * Compiles `files` with `flags` into a folder of `objRoot` named by the whole command line's hash
 * (so changed flags never reuse stale objects), skipping objects newer than every source; returns the objects.
 */
async function compile(tc: Toolchain, files: string[], objRoot: string, flags: string[], since: number): Promise<string[]> {
  const command = [...tc.cxx, ...baseFlags, ...(tc.pic ? ['-fPIC'] : []), ...tc.compile, ...flags];
  const objDir = path.join(objRoot, createHash('sha1').update(command.join('\0')).digest('hex').slice(0, 12));
  fs.mkdirSync(objDir, { recursive: true });
  const objects = files.map((f) => path.join(objDir, `${f.replace(/[/\\]/g, '_').replace(/\.cpp$/, '')}.o`));
  const todo = files.flatMap((f, i) => (fs.existsSync(objects[i]) && fs.statSync(objects[i]).mtimeMs > since ? []
    : [[...command, '-c', f, '-o', objects[i]]]));
  await runAll(todo, Math.max(1, os.availableParallelism()));
  return objects;
}

/** The newest GLIBC_ and GLIBCXX_ versions the dynamic symbols of `objdump -T` output need. */
function floor(dump: string): string {
  const newest = (prefix: string) => [...dump.matchAll(new RegExp(`\\b${prefix}_([\\d.]+)`, 'g'))].map((m) => m[1])
    .sort((a, b) => a.localeCompare(b, undefined, { numeric: true })).at(-1);
  return ['GLIBC', 'GLIBCXX'].map((p) => (newest(p) ? `${p}_${newest(p)}` : '')).filter(Boolean).join(' ');
}

/** Builds platform `p` into build/platforms/<key>/; returns the files made, each with its glibc floor. */
async function build(p: PlatformPackage, tc: Toolchain): Promise<{ file: string; needs: string }[]> {
  const dir = path.join(outRoot, p.key);
  const since = Math.max(newest(path.join(root, 'native')), newest(headers), newest(path.join(addonApi, 'napi.h')));
  const objects: string[] = [];
  for (const isa of sources('isas', p.cpu))
    objects.push(...await compile(tc, sources('kernels'), path.join(dir, 'obj', `isa${isa}`), [`-DNF_ISA=${isa}`], since));
  objects.push(...await compile(tc, sources('common'), path.join(dir, 'obj', 'common'), [], since));
  const made = [path.join(dir, CPU_ADDON)];
  execFileSync(tc.cxx[0], [...tc.cxx.slice(1), ...objects, ...tc.link, '-o', made[0]], { cwd: root, stdio: 'inherit' });
  if (p.files.includes(MPI_ADDON) && p.key === 'linux-x64-gnu' && onPath('mpicxx')) {
    const showme = (what: string) => execFileSync('mpicxx', [`--showme:${what}`], { encoding: 'utf8' }).trim().split(/\s+/).filter(Boolean);
    const mpiObjects = await compile(tc, ['native/mpi/comm.cpp', 'native/mpi/binding.cpp'], path.join(dir, 'obj', 'mpi'),
      ['-O2', '-DOMPI_SKIP_MPICXX', ...showme('compile')], since);
    made.push(path.join(dir, MPI_ADDON));
    execFileSync(tc.cxx[0], [...tc.cxx.slice(1), ...mpiObjects, ...tc.link, ...showme('link'), '-o', made[1]], { cwd: root, stdio: 'inherit' });
  }
  // A shared object may leave symbols for the loader to resolve (Node-API's, the C library's), so a
  // kernel variant missing from the link would only show when the addon loads: look for ours.
  const dumps = made.map((f) => (tc.objdump ? execFileSync(tc.objdump, ['-T', f], { encoding: 'utf8', maxBuffer: 1 << 26 }) : ''));
  const ours = dumps.flatMap((d, i) => d.split('\n').filter((l) => l.includes('*UND*') && /\b_ZN\w*2nf/.test(l)).map((l) => `${path.basename(made[i])}: ${l.trim()}`));
  if (ours.length) throw new Error(`nodeformer symbols left undefined:\n${ours.slice(0, 10).join('\n')}`);
  if (tc.strip) for (const f of made) execFileSync(tc.strip[0], [...tc.strip.slice(1), f]);
  return made.map((file, i) => ({ file, needs: floor(dumps[i]) }));
}

/** node.exe's import library for MinGW, made from node-api-headers' list of Node-API symbols. */
function nodeImportLib(): string {
  const lib = path.join(outRoot, 'win32-x64', 'libnode.a');
  fs.mkdirSync(path.dirname(lib), { recursive: true });
  const def = path.join(path.dirname(headers), 'def', 'node_api.def');
  execFileSync('x86_64-w64-mingw32-dlltool', ['-d', def, '-l', lib, '-m', 'i386:x86-64'], { stdio: 'inherit' });
  return lib;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args.includes('--clean')) fs.rmSync(outRoot, { recursive: true, force: true });
  const wanted = args.filter((a) => !a.startsWith('--'));
  const unknown = wanted.filter((k) => !PLATFORMS.some((p) => p.key === k));
  if (unknown.length) throw new Error(`unknown platform ${unknown.join(', ')}: one of ${PLATFORMS.map((p) => p.key).join(', ')}`);
  const report: string[] = [];
  let failed = false;
  for (const p of PLATFORMS.filter((q) => !wanted.length || wanted.includes(q.key))) {
    const tc = toolchain(p, nodeImportLib);
    if (typeof tc === 'string') {
      report.push(`${p.key.padEnd(17)} not built: ${tc}`);
      continue;
    }
    const t0 = Date.now();
    console.log(`build:platforms: ${p.key} with ${tc.cxx.join(' ')}`);
    try {
      const made = await build(p, tc);
      const sizes = made.map(({ file, needs }) => `${path.basename(file)} ${(fs.statSync(file).size / 2 ** 20).toFixed(1)} MiB${needs ? ` (needs ${needs})` : ''}`).join(', ');
      report.push(`${p.key.padEnd(17)} built in ${((Date.now() - t0) / 1000).toFixed(0)} s: ${sizes}`);
    } catch (e) {
      failed = true;
      report.push(`${p.key.padEnd(17)} FAILED: ${(e as Error).message.split('\n').slice(0, 12).join('\n  ')}`);
    }
  }
  console.log(`\nbuild:platforms (build/platforms/<platform>/):\n${report.map((l) => `  ${l}`).join('\n')}`);
  if (failed) process.exit(1);
}

main().catch((e: Error) => {
  console.error(`build:platforms: ${e.message}`);
  process.exit(1);
});
