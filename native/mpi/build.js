#!/usr/bin/env node
// Builds the optional collectives addon (native/mpi → native/mpi/build/Release/nodeformer_mpi.node)
// with node-gyp, using Open MPI's compiler wrapper flags (mpicxx --showme:compile / --showme:link).
//   node native/mpi/build.js              `npm run build:mpi`: fails when MPI is missing or the build fails
//   node native/mpi/build.js --optional   scripts/ensure-built.js (npm test, npm run demo): builds only when mpicc is
//                                         on the PATH, never fails
'use strict';
const { spawnSync } = require('node:child_process');

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
const { nodeGyp } = require('../../scripts/node_gyp');
const status = nodeGyp(['rebuild', '-j', 'max', `--directory=${dir}`]);
if (status !== 0) {
  console.log(`nodeformer: building the distributed addon failed (exit ${status})${optional ? '; continuing without it' : ''}`);
  process.exit(optional ? 0 : 1);
}
