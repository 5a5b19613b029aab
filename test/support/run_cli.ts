/** Runs the command line's main() in this process, capturing its output lines and what it writes to stderr. */
import { vi } from 'vitest';

import { main } from '../../lib/cli/program';

/** main(args) with its exit status, its output lines joined and its stderr. */
export async function runCli(...args: string[]): Promise<{ status: number; out: string; stderr: string }> {
  const lines: string[] = [];
  let stderr = '';
  const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => ((stderr += String(chunk)), true));
  try {
    const status = await main(args, (l) => lines.push(l));
    return { status, out: lines.join('\n'), stderr };
  } finally {
    spy.mockRestore();
  }
}
