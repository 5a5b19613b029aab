#!/usr/bin/env node
// Builds the optional collectives addon (native/mpi → native/mpi/build/Release/nodeformer_mpi.node)
// with node-gyp, using Open MPI's compiler wrapper flags (mpicxx --showme:compile / --showme:link).
//   node native/mpi/build.js              `npm run build:mpi`: fails when MPI is missing or the build fails
//   node native/mpi/build.js --optional   `npm install`: builds only when mpicc is on the PATH, never fails
'use strict';
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const optional = process.argv.includes('--optional');
const dir = __dirname;

function onPath(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

if (!onPath('mpicc') || !onPath('mpicxx')) {
  const msg = 'nodeformer: MPI not found (no mpicc/mpicxx on the PATH); the distributed addon is not built. ' +
    'Install Open MPI (Debian/Ubuntu: apt-get install openmpi-bin libopenmpi-dev) and run `npm run build:mpi`.';
  console.log(msg);
  process.exit(optional ? 0 : 1);
}
// node-gyp: the one npm runs scripts with (npm_config_node_gyp), else npm's bundled copy, else the PATH's.
const fs = require('node:fs');
const candidates = [process.env.npm_config_node_gyp,
  path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js')];
const gyp = candidates.find((f) => f && fs.existsSync(f));
const args = ['rebuild', '-j', 'max', `--directory=${dir}`];
const r = gyp ? spawnSync(process.execPath, [gyp, ...args], { stdio: 'inherit' }) : spawnSync('node-gyp', args, { stdio: 'inherit' });
if (r.status !== 0) {
  console.log(`nodeformer: building the distributed addon failed (exit ${r.status})${optional ? '; continuing without it' : ''}`);
  process.exit(optional ? 0 : 1);
}
