#!/usr/bin/env node
// Brings a clone's builds up to date before `npm test` (pretest) and `npm run demo`, so the
// developer flow `npm install && npm test` / `npm install && npm run demo` works on a fresh clone.
// A clone has no platform package (@nodeformer/<platform>: what `npm install nodeformer` gives a
// user, lib/native/platform.ts), and installing runs no build script, so the addon is built here,
// explicitly, and only what is missing or older than its sources:
//   - the CPU addon, build/Release/nodeformer.node (node-gyp, as `npm run build:native`): configured
//     when there is no build/Makefile or native/ changed since, then `node-gyp build` (make rebuilds
//     only what changed) — or copied from this machine's up-to-date `npm run build:platforms` build;
//   - the MPI addon, native/mpi/build/Release/nodeformer_mpi.node, when Open MPI's mpicxx is on the
//     PATH (as `npm run build:mpi`; without it the distributed tests skip, saying why);
//   - the TypeScript build, dist/ (npm run build:ts), which the demo's command line runs.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const { nodeGyp } = require('./node_gyp');

const root = path.resolve(__dirname, '..');
const at = (...p) => path.join(root, ...p);

/** The newest mtime of `p` (a file, or a folder's files and subfolders, recursively), skipping `skip`. */
function newest(p, skip = []) {
  if (!fs.existsSync(p) || skip.includes(p)) return 0;
  const stat = fs.statSync(p);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return fs.readdirSync(p).reduce((n, e) => Math.max(n, newest(path.join(p, e), skip)), stat.mtimeMs);
}
const mtime = (p) => (fs.existsSync(p) ? fs.statSync(p).mtimeMs : -1);

function run(what, status) {
  if (status !== 0) {
    console.error(`ensure-built: ${what} failed (exit ${status})`);
    process.exit(status || 1);
  }
}

// The CPU addon: the sources native/sources.js lists (native/core, native/cpu, native/napi, native/ops) and binding.gyp.
const addon = at('build', 'Release', 'nodeformer.node');
const cpuSources = Math.max(...['core', 'cpu', 'napi', 'ops'].map((d) => newest(at('native', d))), mtime(at('binding.gyp')), mtime(at('native', 'sources.js')));
// This machine's release build (`npm run build:platforms`, which `.ci/run` runs before the tests:
// the same sources with binding.gyp's flags, the addon users install) stands in for node-gyp's when
// it is newer than the sources, rather than compiling everything a second time (~2 min on 2 cores).
// It is stripped: build/Release/obj links to the objects it was linked from, which keep their
// symbols (test/loader.test.ts disassembles them).
const libc = process.platform === 'linux' ? (require('detect-libc').familySync() === 'musl' ? '-musl' : '-gnu') : '';
const released = at('build', 'platforms', `${process.platform}-${process.arch}${libc}`, 'nodeformer.node');
if (mtime(addon) < cpuSources && mtime(released) >= cpuSources) {
  console.log(`ensure-built: the CPU addon from npm run build:platforms (${path.relative(root, released)}), copied to build/Release`);
  fs.mkdirSync(path.dirname(addon), { recursive: true });
  fs.copyFileSync(released, addon);
  const objects = path.join(path.dirname(addon), 'obj');
  fs.rmSync(objects, { recursive: true, force: true });
  fs.symlinkSync(path.relative(path.dirname(addon), path.join(path.dirname(released), 'obj')), objects, 'dir');
}
if (mtime(addon) < cpuSources) {
  console.log('ensure-built: building the CPU addon (build/Release/nodeformer.node)');
  if (!fs.existsSync(at('build', 'Makefile')) || mtime(at('build', 'config.gypi')) < cpuSources) run('node-gyp configure', nodeGyp(['configure', `--directory=${root}`]));
  run('node-gyp build', nodeGyp(['build', '-j', 'max', `--directory=${root}`]));
  fs.utimesSync(addon, new Date(), new Date()); // make may leave it untouched when only a header outside its deps changed
}

// The MPI addon, where Open MPI is installed (native/mpi/build.js --optional never fails).
const mpi = at('native', 'mpi', 'build', 'Release', 'nodeformer_mpi.node');
if (mtime(mpi) < newest(at('native', 'mpi'), [at('native', 'mpi', 'build')]) &&
    spawnSync('sh', ['-c', 'command -v mpicxx'], { stdio: 'ignore' }).status === 0) {
  console.log('ensure-built: building the MPI addon (native/mpi/build/Release/nodeformer_mpi.node)');
  run('native/mpi/build.js', spawnSync(process.execPath, [at('native', 'mpi', 'build.js'), '--optional'], { stdio: 'inherit' }).status ?? 1);
}

// The TypeScript build, when dist/ is missing or older than lib/ or tsconfig.json.
if (mtime(at('dist', 'cjs', 'bin.js')) < Math.max(newest(at('lib')), mtime(at('tsconfig.json')))) {
  const r = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', 'build:ts'], { cwd: root, stdio: 'inherit' });
  run('npm run build:ts', r.status ?? 1);
}
