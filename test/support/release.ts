/**
 * The tarballs of `npm run pack:all` (release/) laid out as npm installs them, without npm: for the
 * platform tests that run a package in a runtime npm would not install it for here (the Windows Node
 * under Wine, arm64 Node under qemu, Bun for musl), so each checks the files users get.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { packageName, PLATFORMS } from '../../lib/native/platform';
import { ownManifest } from '../../scripts/packaging';
import { repoRoot } from './bundle';

/** The main package's tarball and platform `key`'s, in release/. */
export function releaseTarballs(key: string): { main: string; platform: string } {
  const { version } = ownManifest();
  return { main: path.join(repoRoot, 'release', `nodeformer-${version}.tgz`), platform: path.join(repoRoot, 'release', `nodeformer-${key}-${version}.tgz`) };
}

/** The release tarballs of platform `key` that are not there (and the commands that make them), or null. */
export function releaseMissing(key: string): string | null {
  const missing = Object.values(releaseTarballs(key)).filter((f) => !fs.existsSync(f)).map((f) => path.relative(repoRoot, f));
  return missing.length ? `${missing.join(', ')} (npm run build:platforms ${key} && npm run pack:all -- --no-build)` : null;
}

/**
 * Extracts nodeformer and `@nodeformer/<key>` from release/ into `dir`/node_modules, with nodeformer's
 * one dependency (detect-libc, this clone's copy); returns the platform package's folder.
 */
export function layOutRelease(dir: string, key: string): string {
  const { main, platform } = releaseTarballs(key);
  const p = PLATFORMS.find((q) => q.key === key);
  if (!p) throw new Error(`no platform ${key}`);
  const modules = path.join(dir, 'node_modules');
  for (const [tarball, to] of [[main, 'nodeformer'], [platform, packageName(p)]]) {
    fs.mkdirSync(path.join(modules, to), { recursive: true });
    execFileSync('tar', ['-xzf', tarball, '-C', path.join(modules, to), '--strip-components=1']);
  }
  fs.cpSync(path.dirname(require.resolve('detect-libc/package.json')), path.join(modules, 'detect-libc'), { recursive: true });
  return path.join(modules, packageName(p));
}
