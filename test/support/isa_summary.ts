/**
 * A vitest reporter (vitest.config.ts) that closes every run with the CPU kernel variants it
 * exercised on this machine, those this CPU lacks, and those the load-time self-check rejected.
 * The kernel tests run every variant in the addon's isaInfo().available (test/helpers.ts `isas`);
 * the rest run on the active one. It asks a child process, so the runner never loads the addon.
 */
import { execFileSync } from 'node:child_process';
import * as os from 'node:os';

import type { Reporter } from 'vitest/node';

import type { IsaInfo } from '../../lib/native/core';
import { bundleEnv } from './bundle';

/** The summary line (and the addon's error when it could not be asked). */
export function isaSummary(): string {
  let info: IsaInfo;
  try {
    const out = execFileSync(process.execPath, ['-p', 'JSON.stringify(require(process.env.NF_ADDON_PATH).isaInfo())'],
      { env: bundleEnv(), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    info = JSON.parse(out) as IsaInfo;
  } catch (e) {
    return `ISA variants: unknown (the addon could not be asked: ${(e as Error).message.split('\n')[0]})`;
  }
  const list = (a: string[]) => (a.length ? a.join(', ') : 'none');
  const missing = info.compiled.filter((isa) => !info.available.includes(isa) && !info.rejected.some((r) => r.isa === isa));
  return `ISA variants exercised: ${list(info.available)}; not available on this CPU: ${list(missing)}; ` +
    `rejected by the self-check: ${list(info.rejected.map((r) => `${r.isa} (${r.reason})`))} ` +
    `[${os.cpus()[0]?.model.trim() ?? 'unknown CPU'}; tests that do not loop over the variants ran on ${info.active}` +
    `${process.env.NF_ISA ? ` (NF_ISA=${process.env.NF_ISA})` : ''}; self-check ${info.selfCheck.ms.toFixed(1)} ms at load]`;
}

export default class IsaSummaryReporter implements Reporter {
  // onFinished, not onTestRunEnd: vitest calls it after the default reporter's summary.
  onFinished(): void {
    console.log(`\n ${isaSummary()}\n`);
  }
}
