/**
 * `npm run bench`: nodeformer's benchmark harness. Prints the tables (Markdown) on stdout,
 * progress on stderr, and writes the JSON results. See cli.ts for the options.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { lastEvent, runWorker } from './child';
import { HELP, parseOptions, type Options } from './cli';
import { runKernels } from './kernel_suite';
import { runModel, type SuiteContext } from './model_suite';
import { findOpenBlas, probePython } from './peers';
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

function ortAvailability(): string {
  try {
    require.resolve('onnxruntime-node');
    return 'onnxruntime-node installed';
  } catch {
    return 'onnxruntime-node not installed (npm install --save-dev onnxruntime-node)';
  }
}

async function measurePeaks(o: Options): Promise<IsaPeak[]> {
  const r = await runWorker({ task: 'peak', threads: o.threads, minSeconds: o.quick ? 0.1 : 0.3 }, { timeoutS: 120 });
  const peaks = lastEvent(r, 'result')?.peaks as IsaPeak[] | undefined;
  if (!peaks) throw new Error('the FMA peak measurement failed: is the addon built (npm run build:native)?');
  return peaks;
}

async function main(): Promise<void> {
  const parsed = parseOptions(process.argv.slice(2));
  if (parsed === 'help') return void console.log(HELP);
  const o = parsed, started = new Date();
  const loadStart = load();
  if (os.loadavg()[0] > os.cpus().length / 2)
    log(`note: the machine is busy (load average ${loadStart} on ${os.cpus().length} cores); figures will be noisy`);

  const [python, peaks] = await Promise.all([probePython(), measurePeaks(o)]);
  const openblas = findOpenBlas();
  const peers = {
    'onnxruntime-node': o.peers.includes('ort') ? ortAvailability() : 'not requested',
    PyTorch: !o.peers.includes('torch') ? 'not requested' : python.torch ? `${python.torch} (${python.python})` : `unavailable: ${python.reason}`,
    OpenBLAS: !o.peers.includes('openblas') && !o.peers.includes('torch') ? 'not requested'
      : openblas ? `${openblas} (preloaded into the Python peers)` : 'not found (apt-get install libopenblas0-pthread, or set NF_BENCH_OPENBLAS)',
  };
  log(`FMA peak: ${peaks.map((p) => `${p.isa} ${p.gflops.toFixed(1)} GFLOP/s`).join(', ')}`);
  for (const [k, v] of Object.entries(peers)) log(`${k}: ${v}`);

  const ctx: SuiteContext = { opts: o, python, openblas, log };
  const models = [];
  for (const id of o.models) {
    const spec = MODELS.find((m) => m.id === id)!;
    models.push(...(await runModel(o.batch ? { ...spec, batch: o.batch } : spec, ctx)));
  }
  const kernels = await runKernels(ctx, peaks, o.kernels);

  const results: Results = {
    date: started.toISOString(),
    machine: { cpu: cpuName(), cores: os.cpus().length, memoryGiB: +(os.totalmem() / 2 ** 30).toFixed(1), node: process.version,
      platform: `${process.platform}-${process.arch}`, loadStart, loadEnd: load(), seconds: (Date.now() - started.getTime()) / 1e3 },
    options: { ...o }, peaks, peers, models, kernels,
  };
  console.log(render(results));
  writeJson(o.out, results);
  log(`\nwrote ${path.resolve(o.out)} (${results.machine.seconds} s)`);
}

main().catch((e: Error) => {
  log(`bench: ${e.message}`);
  process.exitCode = 1;
});
