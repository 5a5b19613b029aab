#!/usr/bin/env node
// Compiles the TypeScript sources (npm run build:ts) when dist/ is missing or older than any
// file under lib/, so `npm run demo` always runs the current code without a needless rebuild.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const target = path.join(root, 'dist', 'cjs', 'bin.js');

function newestSource(dir) {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(p) : fs.statSync(p).mtimeMs);
  }
  return newest;
}

const built = fs.existsSync(target) ? fs.statSync(target).mtimeMs : -1;
if (built < Math.max(newestSource(path.join(root, 'lib')), fs.statSync(path.join(root, 'tsconfig.json')).mtimeMs)) {
  const r = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', 'build:ts'], { cwd: root, stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
