/**
 * `npm run pack:all [--no-build] [platform ...]`: writes into release/ every tarball this machine can build — one
 * per platform package whose addon `npm run build:platforms` made (build/platforms/<key>/), the CUDA
 * package when `npm run build:cuda` made build/cuda/nodeformer_cuda.node, and the main package
 * listing the platform packages packed with it as optionalDependencies — then prints each
 * tarball's size and what was left out and why. `--no-build` packs what is already built; platform
 * names (as build:platforms takes them) build only those first, packing what build/platforms holds.
 * test/package.test.ts installs these tarballs (npm with --strict-allow-scripts, pnpm, bun).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { CUDA_ADDON, CUDA_PLATFORM, packageName, PLATFORMS, type PlatformPackage } from '../lib/native/platform';
import { ownManifest, packMain, packPlatform, repoRoot, type Packed } from './packaging';

const release = path.join(repoRoot, 'release');
const stage = path.join(repoRoot, 'build', 'release-stage');
const npm = [process.platform === 'win32' ? 'npm.cmd' : 'npm'];
const mib = (n: number) => `${(n / 2 ** 20).toFixed(2)} MiB`;

function main(): void {
  if (!process.argv.includes('--no-build')) {
    // Builds what it can and reports the rest; a platform that failed is left out below, not packed stale.
    const platforms = process.argv.slice(2).filter((a) => !a.startsWith('--'));
    const r = spawnSync(process.execPath, [...process.execArgv, path.join(__dirname, 'build_platforms.ts'), ...platforms], { cwd: repoRoot, stdio: 'inherit' });
    if (r.status !== 0) console.log('pack:all: build:platforms reported failures; packing what it built');
  }
  execFileSync(npm[0], ['run', '--silent', 'build:ts'], { cwd: repoRoot, stdio: 'inherit' });
  fs.rmSync(release, { recursive: true, force: true });
  fs.mkdirSync(release, { recursive: true });
  const { version } = ownManifest();
  const packed: Packed[] = [];
  const left: string[] = [];
  const withMain: PlatformPackage[] = [];
  for (const p of PLATFORMS) {
    const built = path.join(repoRoot, 'build', 'platforms', p.key);
    if (!fs.existsSync(path.join(built, p.files[0]))) {
      left.push(`${packageName(p)}: not built here (see npm run build:platforms)`);
      continue;
    }
    packed.push(packPlatform(npm, p, built, stage, release, version));
    withMain.push(p);
  }
  const cudaDir = path.join(repoRoot, 'build', 'cuda');
  if (fs.existsSync(path.join(cudaDir, CUDA_ADDON))) {
    const stripped = path.join(stage, 'cuda-built');
    fs.mkdirSync(stripped, { recursive: true });
    fs.copyFileSync(path.join(cudaDir, CUDA_ADDON), path.join(stripped, CUDA_ADDON));
    execFileSync('strip', ['--strip-unneeded', path.join(stripped, CUDA_ADDON)]);
    packed.push(packPlatform(npm, CUDA_PLATFORM, stripped, stage, release, version));
  } else left.push(`${packageName(CUDA_PLATFORM)}: no build/cuda/${CUDA_ADDON} (npm run build:cuda, needs nvcc)`);
  packed.unshift(packMain(npm, stage, release, withMain));
  console.log(`\npack:all (release/):\n${packed.map((t) => `  ${path.basename(t.file).padEnd(40)} ${mib(t.size).padStart(10)} packed, ` +
    `${mib(t.unpackedSize).padStart(10)} unpacked, ${t.files.length} files`).join('\n')}`);
  if (left.length) console.log(`left out:\n${left.map((l) => `  ${l}`).join('\n')}`);
}

main();
