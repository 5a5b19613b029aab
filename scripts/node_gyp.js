// Runs node-gyp: the one npm runs scripts with (npm_config_node_gyp), else npm's bundled copy next
// to this Node, else the PATH's. Used by the explicit native builds (scripts/ensure-built.js,
// native/mpi/build.js); installing nodeformer never runs it.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

/**
 * Runs `node-gyp ...args` with inherited output; returns its exit status. Outside npm (no
 * npm_config_nodedir), node-gyp is pointed at this Node's own headers when it has them
 * (<prefix>/include/node), as npm is here, instead of downloading them.
 */
function nodeGyp(args) {
  const prefix = path.resolve(process.execPath, '..', '..');
  const env = { ...process.env };
  if (!env.npm_config_nodedir && fs.existsSync(path.join(prefix, 'include', 'node', 'node_api.h'))) env.npm_config_nodedir = prefix;
  const candidates = [process.env.npm_config_node_gyp,
    path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js')];
  const gyp = candidates.find((f) => f && fs.existsSync(f));
  const r = gyp ? spawnSync(process.execPath, [gyp, ...args], { stdio: 'inherit', env }) : spawnSync('node-gyp', args, { stdio: 'inherit', env });
  return r.status ?? 1;
}

module.exports = { nodeGyp };
