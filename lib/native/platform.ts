/**
 * The platform packages: one optional npm package per platform holds the prebuilt addons for it
 * (as sharp's @img/sharp-<platform> packages do), so installing nodeformer runs no script and needs
 * no compiler. npm, pnpm and Bun install only the package whose `os`, `cpu` and `libc` fields match
 * the machine; the loaders (lib/native/addon.ts, lib/core/device.ts, lib/distributed/collectives.ts)
 * resolve their .node file from it first, then from a local build (build/Release, for developers).
 *
 * This table is the one list of them: `npm run build:platforms` (scripts/build_platforms.ts) builds
 * the binaries per entry, `npm run pack:all` (scripts/pack_all.ts) writes each package's manifest
 * from it and lists them as nodeformer's optionalDependencies.
 */
/** One platform package: its npm name's suffix and the fields npm matches against the machine. */
export interface PlatformPackage {
  /** `@nodeformer/<key>`: `<os>-<cpu>` plus `-gnu` / `-musl` on Linux. */
  key: string;
  os: NodeJS.Platform;
  cpu: 'x64' | 'arm64';
  /** Linux only: which C library the binary links against (npm's `libc` field). */
  libc?: 'glibc' | 'musl';
  /** The addons it holds: the CPU addon, and the MPI addon where it is built (the CUDA package: the CUDA addon alone). */
  files: readonly string[];
}

/** The CPU addon's file, the same name in every package and in build/Release. */
export const CPU_ADDON = 'nodeformer.node';
/** The MPI collectives addon (native/mpi), where Open MPI exists: Linux. */
export const MPI_ADDON = 'nodeformer_mpi.node';
/** The CUDA addon (native/cuda/napi). */
export const CUDA_ADDON = 'nodeformer_cuda.node';

/** The CPU packages, one per platform. */
export const PLATFORMS: readonly PlatformPackage[] = [
  { key: 'linux-x64-gnu', os: 'linux', cpu: 'x64', libc: 'glibc', files: [CPU_ADDON, MPI_ADDON] },
  { key: 'linux-x64-musl', os: 'linux', cpu: 'x64', libc: 'musl', files: [CPU_ADDON] },
  { key: 'linux-arm64-gnu', os: 'linux', cpu: 'arm64', libc: 'glibc', files: [CPU_ADDON] },
  { key: 'linux-arm64-musl', os: 'linux', cpu: 'arm64', libc: 'musl', files: [CPU_ADDON] },
  { key: 'darwin-x64', os: 'darwin', cpu: 'x64', files: [CPU_ADDON] },
  { key: 'darwin-arm64', os: 'darwin', cpu: 'arm64', files: [CPU_ADDON] },
  { key: 'win32-x64', os: 'win32', cpu: 'x64', files: [CPU_ADDON] },
];

/** The CUDA package: the nvcc-built addon, for NVIDIA GPUs on Linux x64 (glibc). */
export const CUDA_PLATFORM: PlatformPackage = { key: 'linux-x64-cuda', os: 'linux', cpu: 'x64', libc: 'glibc', files: [CUDA_ADDON] };

/** The npm name of a platform package. */
export function packageName(p: PlatformPackage): string {
  return `@nodeformer/${p.key}`;
}

/** The C library of this Linux machine (detect-libc: the same answer npm's `libc` field uses), else undefined. */
function libcFamily(): 'glibc' | 'musl' | undefined {
  if (process.platform !== 'linux') return undefined;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const family = (require('detect-libc') as { familySync(): string | null }).familySync();
  return family === 'musl' ? 'musl' : 'glibc';
}

/** This machine's os-cpu(-libc) key, whether or not a package exists for it. */
export function currentKey(): string {
  const libc = libcFamily();
  return `${process.platform}-${process.arch}${libc ? (libc === 'musl' ? '-musl' : '-gnu') : ''}`;
}

/** The CPU package for this machine, or undefined when none is made for it. */
export function currentPlatform(): PlatformPackage | undefined {
  const key = currentKey();
  return PLATFORMS.find((p) => p.key === key);
}

/**
 * Where `file` of platform package `p` is installed, as Node resolves it from nodeformer's own
 * folder (so npm's, pnpm's and Bun's layouts all work), or a sentence saying why it is not there.
 */
export function resolvePlatformFile(p: PlatformPackage, file: string): { file: string } | { missing: string } {
  try {
    return { file: require.resolve(`${packageName(p)}/${file}`) };
  } catch {
    try {
      require.resolve(`${packageName(p)}/package.json`);
      return { missing: `${packageName(p)} is installed but holds no ${file}` };
    } catch {
      return { missing: `${packageName(p)} is not installed` };
    }
  }
}
