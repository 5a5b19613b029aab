/**
 * Two builds of the addon, or two thread counts, timed against each other on a shared, noisy machine:
 *
 *   npm run bench:ab -- [--pairs 12] [--seconds 0.25] [--threads 2] [--peak] SIDE_A SIDE_B CASE...
 *
 * SIDE: an addon file (a .node; `default` for the one lib/ loads), optionally @threads (e.g.
 * /tmp/old.node@1). CASE: see ab_cases.ts (gemm:1576x3072x768:B, linear:197x2304x768@int8,
 * attention:16x145x256x8:b@bf16, ...).
 * Each side runs in a worker process of its own (ab_worker.ts) that keeps its buffers; per case both
 * warm up, then take turns, A B then B A, `pairs` times, each turn the case repeated for about
 * `seconds`. The machine's load drifts over seconds and minutes, so a pair's two turns see nearly the
 * same machine: the report's judge is the median over pairs of A's time ÷ B's (above 1: B is
 * faster), beside each side's median and fastest turn. --peak adds each turn's GFLOP/s over the FMA
 * peak its worker measures right after it (a share of what the cores gave at that moment; GEMM
 * cases only). Not part of `npm run bench`: it compares our own builds, not us with the peers.
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { parseArgs } from 'node:util';

import { CASE_SYNTAX, caseFlops, parseCase } from './ab_cases';
import { REPO_ROOT } from './child';
import { median } from './sampling';

const USAGE = `usage: npm run bench:ab -- [--pairs N] [--seconds S] [--threads T] [--peak] SIDE_A SIDE_B CASE...
  SIDE  an addon file or 'default', optionally @threads
  CASE  ${CASE_SYNTAX}`;

interface Worker {
  ask: (q: object) => Promise<Record<string, number>>;
  close: () => void;
}

/** A worker process for one side: `spec` is FILE[@threads]. */
function startWorker(spec: string, threads: number): Worker {
  const [file, t] = spec.split('@');
  const env: NodeJS.ProcessEnv = { ...process.env, NF_AB_THREADS: t ?? String(threads) };
  if (file === 'default') delete env.NF_ADDON_PATH;
  else env.NF_ADDON_PATH = path.resolve(file);
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'bench/ab_worker.ts')],
    { env, stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting: ((reply: Record<string, number>) => void)[] = [];
  readline.createInterface({ input: child.stdout! }).on('line', (line) => waiting.shift()?.(JSON.parse(line)));
  child.on('exit', (code) => {
    if (waiting.length) {
      process.stderr.write(`bench:ab: the worker for ${spec} exited (code ${code})\n`);
      process.exit(1);
    }
  });
  const ready = new Promise((res) => waiting.push(res));  // its first line, {"ready": true}
  return {
    ask: async (q) => {
      await ready;
      return new Promise((res) => {
        waiting.push(res);
        child.stdin!.write(`${JSON.stringify(q)}\n`);
      });
    },
    close: () => child.kill(),
  };
}

async function main(): Promise<void> {
  const { values: v, positionals } = parseArgs({
    args: process.argv.slice(2), allowPositionals: true, strict: true,
    options: { pairs: { type: 'string' }, seconds: { type: 'string' }, threads: { type: 'string' }, peak: { type: 'boolean' }, help: { type: 'boolean' } },
  });
  if (v.help || positionals.length < 3) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(v.help ? 0 : 2);
  }
  const positive = (name: string, text: string | undefined, fallback: number) => {
    const x = text === undefined ? fallback : Number(text);
    if (!(x > 0)) throw new Error(`--${name} must be a positive number, not '${text}'`);
    return x;
  };
  const pairs = Math.round(positive('pairs', v.pairs, 12)), seconds = positive('seconds', v.seconds, 0.25);
  const threads = Math.round(positive('threads', v.threads, 2));
  const [sideA, sideB, ...caseTexts] = positionals;
  const cases = caseTexts.map((text) => ({ text, c: parseCase(text) }));
  const a = startWorker(sideA, threads), b = startWorker(sideB, threads);
  process.stdout.write(`A = ${sideA}, B = ${sideB}; ${pairs} pairs of turns of about ${seconds} s; ratio = A's time ÷ B's (above 1: B faster)\n`);
  try {
    for (const { text, c } of cases) {
      const flops = caseFlops(c);
      await a.ask({ case: text, reps: 1 }), await b.ask({ case: text, reps: 1 });  // buffers, first touch
      const once = (await a.ask({ case: text, reps: 1 })).ms;
      const reps = Math.max(1, Math.round((seconds * 1000) / once));
      const ms = { a: [] as number[], b: [] as number[] }, share = { a: [] as number[], b: [] as number[] }, ratio: number[] = [];
      const turn = async (w: Worker, side: 'a' | 'b') => {
        const t = (await w.ask({ case: text, reps })).ms;
        ms[side].push(t);
        if (v.peak && flops) share[side].push(flops / t / 1e6 / (await w.ask({ peak: true })).gflops);
        return t;
      };
      for (let i = 0; i < pairs; i++) {
        let ta: number, tb: number;
        if (i % 2 === 0) ta = await turn(a, 'a'), tb = await turn(b, 'b');
        else tb = await turn(b, 'b'), ta = await turn(a, 'a');
        ratio.push(ta / tb);
      }
      const side = (k: 'a' | 'b') => {
        const rate = flops ? ` (${(flops / median(ms[k]) / 1e6).toFixed(0)} GFLOP/s)` : '';
        const peak = share[k].length ? `, ${(100 * median(share[k])).toFixed(0)}% of the peak` : '';
        return `${median(ms[k]).toFixed(3)} ms${rate}, fastest ${Math.min(...ms[k]).toFixed(3)}${peak}`;
      };
      process.stdout.write(`${text}: A ${side('a')} | B ${side('b')} | ratio ${median(ratio).toFixed(3)} ` +
        `(pairs ${Math.min(...ratio).toFixed(2)}-${Math.max(...ratio).toFixed(2)})\n`);
    }
  } finally {
    a.close();
    b.close();
  }
}

main().catch((e: Error) => {
  process.stderr.write(`bench:ab: ${e.message}\n${USAGE}\n`);
  process.exit(2);
});
