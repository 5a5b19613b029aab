/**
 * `npm run bench`: nodeformer's benchmark harness. Prints the tables (Markdown) on stdout,
 * progress on stderr, and writes the JSON results. See cli.ts for the options.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { lastEvent, runWorker } from './child';
import { HELP, parseOptions, type Options } from './cli';
import { runBf16 } from './bf16_suite';
import { runModel, type SuiteContext } from './model_suite';
import { runOps } from './op_suite';
import { describeTorch, probePython } from './peers';
import { render, writeJson } from './report';
import type { IsaPeak, Results } from './results';
import { MODELS } from './specs';

const log = (line: string) => process.stderr.write(`${line}\n`);
const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');

function cpuName(): string {
  try {
    return /model name\s*:\s*(.+)/.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? os.cpus()[0]?.model ?? 'unknown';
  } catch {
    return os.cpus()[0]?.model ?? 'unknown';
  }
}

function describeOrt(threads: number): string {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { version } = require('onnxruntime-node/package.json') as { version: string };
    return `${version}: CPU execution provider, ${threads} intra-op threads, 1 inter-op, sequential, graph optimisations all`;
  } catch {
    return 'not installed (npm install --save-dev onnxruntime-node)';
  }
}

/** The FP32 FMA peak of every ISA variant this CPU runs, and the ISA the measurements run on. */
async function measurePeaks(o: Options): Promise<{ peaks: IsaPeak[]; isa: string; bf16Kernels: string }> {
  const r = await runWorker({ task: 'peak', threads: o.threads, minSeconds: o.quick ? 0.1 : 0.3 }, { timeoutS: 120 });
  const res = lastEvent(r, 'result');
  if (!res) throw new Error('the FMA peak measurement failed: is the addon built (npm run build:native)?');
  return { peaks: res.peaks as IsaPeak[], isa: String(res.isa), bf16Kernels: String(res.bf16Kernels) };
}

async function main(): Promise<void> {
  const parsed = parseOptions(process.argv.slice(2));
  if (parsed === 'help') return void console.log(HELP);
  const o = parsed, started = new Date();
  const loadStart = load();
  if (os.loadavg()[0] > os.cpus().length / 2)
    log(`note: the machine is busy (load average ${loadStart} on ${os.cpus().length} cores); figures will be noisy`);

  const python = await probePython(o.threads);
  const { peaks, isa, bf16Kernels } = await measurePeaks(o);
  const peers = {
    'onnxruntime-node': o.peers.includes('ort') ? describeOrt(o.threads) : 'not requested',
    PyTorch: o.peers.includes('torch') ? describeTorch(python) : 'not requested',
  };
  log(`FMA peak: ${peaks.map((p) => `${p.isa} ${p.gflops.toFixed(1)} GFLOP/s`).join(', ')}; our kernels run ${isa}`);
  for (const [k, v] of Object.entries(peers)) log(`${k}: ${v}`);

  const ctx: SuiteContext = { opts: o, python, log };
  const specs = o.models.map((id) => {
    const spec = MODELS.find((m) => m.id === id)!;
    return o.batch ? { ...spec, batch: o.batch } : spec;
  });
  const models = [], ops = [];
  for (const spec of specs) models.push(...(await runModel(spec, ctx)));
  for (const spec of specs) ops.push(...(await runOps(spec, ctx)));
  const bf16 = [];
  if (o.bf16) for (const spec of specs) bf16.push(...(await runBf16(spec, ctx)));

  const results: Results = {
    date: started.toISOString(),
    command: ['npm run bench', ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : [])].join(' '),
    machine: { cpu: cpuName(), cores: os.cpus().length, memoryGiB: +(os.totalmem() / 2 ** 30).toFixed(1), node: process.version,
      platform: `${process.platform}-${process.arch}`, loadStart, loadEnd: load(), seconds: (Date.now() - started.getTime()) / 1e3 },
    options: { ...o }, isa, bf16Kernels, peaks, peers, models, ops, bf16,
  };
  console.log(render(results));
  writeJson(o.out, results);
  log(`\nwrote ${path.resolve(o.out)} (${results.machine.seconds} s)`);
}

main().catch((e: Error) => {
  log(`bench: ${e.message}`);
  process.exitCode = 1;
});
