// Runs node-gyp: the one npm runs scripts with (npm_config_node_gyp), else npm's bundled copy next
// to this Node, else the PATH's. Used by the explicit native builds (scripts/ensure-built.js,
// native/mpi/build.js); installing nodeformer never runs it.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

/** Runs `node-gyp ...args` with inherited output; returns its exit status. */
function nodeGyp(args) {
  const candidates = [process.env.npm_config_node_gyp,
    path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js')];
  const gyp = candidates.find((f) => f && fs.existsSync(f));
  const r = gyp ? spawnSync(process.execPath, [gyp, ...args], { stdio: 'inherit' }) : spawnSync('node-gyp', args, { stdio: 'inherit' });
  return r.status ?? 1;
}

module.exports = { nodeGyp };
