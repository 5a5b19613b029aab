/**
 * Runs a child process of the harness (a bench/worker.ts measurement or a Python peer) under a
 * wall-clock limit and collects its JSON-line events (see protocol.ts). A child that runs past its
 * limit is killed (by its own pid; its peak RSS is polled from /proc meanwhile), and what it
 * reported until then is kept, so a slow peer still yields the steps it finished.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import type { ChildEvent, WorkerRequest } from './protocol';

export const REPO_ROOT = path.resolve(__dirname, '..');
/** How long to wait for a child's pipes to close after it exits or is killed. */
const GRACE_MS = 5000;

export interface ChildResult {
  events: ChildEvent[];
  exitCode: number | null;
  timedOut: boolean;
  /** The last lines the child wrote to stderr (for error messages). */
  stderrTail: string;
  seconds: number;
  /** The peak RSS last read from /proc before a timed-out child was killed. */
  killedAtRssKb: number | null;
}

export interface ChildOptions {
  timeoutS: number;
  env?: NodeJS.ProcessEnv;
  /** Called for each event as it arrives (progress output). */
  onEvent?: (e: ChildEvent) => void;
}

/** The peak RSS of a live process from /proc (Linux), read off the event loop: such a read can wait on the process. */
async function vmHwmKb(pid: number | undefined): Promise<number | null> {
  try {
    const m = /VmHWM:\s+(\d+)\s+kB/.exec(await fs.promises.readFile(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

function parseEvent(line: string): ChildEvent | null {
  if (!line.startsWith('{')) return null;
  try {
    const v = JSON.parse(line) as unknown;
    return v && typeof v === 'object' && typeof (v as ChildEvent).event === 'string' ? (v as ChildEvent) : null;
  } catch {
    return null;
  }
}

/** Runs `command args` from the repository root; resolves when it exits or has been killed at the limit. */
export function runChild(command: string, args: readonly string[], o: ChildOptions): Promise<ChildResult> {
  const t0 = process.hrtime.bigint();
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: REPO_ROOT, env: o.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const events: ChildEvent[] = [];
    let stdoutRest = '', stderr = '', timedOut = false, killedAtRssKb: number | null = null;
    const onLine = (line: string) => {
      const e = parseEvent(line.trim());
      if (!e) return;
      e.at = Number(process.hrtime.bigint() - t0) / 1e9;  // when it arrived, seconds after the start
      events.push(e);
      o.onEvent?.(e);
    };
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (stdoutRest + chunk).split('\n');
      stdoutRest = lines.pop() ?? '';
      lines.forEach(onLine);
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-4000);
    });
    let done = false, grace: NodeJS.Timeout | undefined, lastHwmKb: number | null = null;
    // Poll the peak RSS, so a child killed at the limit still has one.
    const poll = setInterval(() => void vmHwmKb(child.pid).then((kb) => (lastHwmKb = kb ?? lastHwmKb)), 1000);
    const timer = setTimeout(() => {
      timedOut = true;
      killedAtRssKb = lastHwmKb;
      child.kill('SIGKILL');
      // Resolve even if the child cannot die at once or a grandchild keeps its pipes open.
      grace = setTimeout(() => finish(null), GRACE_MS);
    }, o.timeoutS * 1000);
    const finish = (exitCode: number | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(grace);
      clearInterval(poll);
      if (stdoutRest) onLine(stdoutRest);
      const stderrTail = stderr.split('\n').filter((l) => l.trim() && !l.startsWith('npm warn')).slice(-6).join('\n');
      resolve({ events, exitCode, timedOut, stderrTail, seconds: Number(process.hrtime.bigint() - t0) / 1e9, killedAtRssKb });
    };
    child.on('error', (err) => {
      stderr += `\n${err.message}`;
      finish(null);
    });
    child.on('exit', (code) => {
      grace ??= setTimeout(() => finish(code), GRACE_MS);  // 'close' waits for the pipes, which a grandchild may hold
    });
    child.on('close', (code) => finish(code));
  });
}

/** Runs bench/worker.ts with one request in a fresh Node process (through tsx, like the harness). */
export function runWorker(request: WorkerRequest, o: ChildOptions): Promise<ChildResult> {
  const worker = path.join(__dirname, 'worker.ts');
  return runChild(process.execPath, ['--import', 'tsx', worker, JSON.stringify(request)], o);
}

/** The events of one kind. */
export function eventsOf(r: ChildResult, event: string): ChildEvent[] {
  return r.events.filter((e) => e.event === event);
}

/** The last event of one kind, if any. */
export function lastEvent(r: ChildResult, event: string): ChildEvent | undefined {
  return eventsOf(r, event).at(-1);
}

/** Why a child produced no result: its error event, a time-out, or its exit status and stderr. */
export function failureReason(r: ChildResult): string {
  const err = lastEvent(r, 'error') ?? lastEvent(r, 'unavailable');
  if (err) return String(err.message ?? err.reason);
  if (r.timedOut) return `stopped after ${r.seconds.toFixed(0)} s (time limit)`;
  return `exited with status ${r.exitCode}${r.stderrTail ? `: ${r.stderrTail}` : ''}`;
}
