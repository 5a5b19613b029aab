/**
 * The Python side of the peers: which Python runs PyTorch 2.x (NF_BENCH_PYTHON, else the project's
 * .venv-bench that `npm run bench:setup` creates), what that PyTorch runs on (version, BLAS,
 * oneDNN, CPU capability, threads: scripts/nf_bench_common.py torch_setup), and running the
 * repository's Python scripts (torch_bench.py, torch_ops_bench.py, export_onnx.py) in it with our
 * thread count.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { REPO_ROOT, runChild, type ChildOptions, type ChildResult } from './child';
import { torchEnv, TORCH_VARIANTS, type TorchVariant } from './variants';

/** What the probe found: the Python, and PyTorch's build and settings, or why there is none. */
export interface PythonInfo {
  python: string | null;
  /** PyTorch's version, or null with `reason` when Python or PyTorch is missing. */
  torch: string | null;
  /** torch_setup()'s fields (blas, mkl, onednn, cpuCapability, parallel, threads) and numpy's and onnx's versions. */
  build: Record<string, unknown>;
  /** Why the PyTorch peer is unavailable, or what is wrong with it (a PyTorch older than 2.x). */
  reason?: string;
}

const SCRIPTS = path.join(REPO_ROOT, 'scripts');
/** The project's own environment, made by scripts/bench_setup.sh. */
export const PROJECT_VENV = path.join(REPO_ROOT, '.venv-bench');
const SETUP_HINT = 'run `npm run bench:setup` (a .venv-bench with PyTorch 2.x, onnx and numpy) or set NF_BENCH_PYTHON';

/** NF_BENCH_PYTHON, else .venv-bench's python, else null. */
export function pythonPath(): string | null {
  if (process.env.NF_BENCH_PYTHON) return process.env.NF_BENCH_PYTHON;
  const venv = path.join(PROJECT_VENV, 'bin', 'python');
  return fs.existsSync(venv) ? venv : null;
}

/** The environment of a Python peer: `threads` for OpenMP and MKL (torch.set_num_threads follows --threads too). */
export function pythonEnv(threads: number): NodeJS.ProcessEnv {
  const n = String(threads);
  return { ...process.env, OMP_NUM_THREADS: n, MKL_NUM_THREADS: n, PYTHONDONTWRITEBYTECODE: '1' };
}

/** Which Python runs the peers, and what its PyTorch is built with and set to (`threads` as ours). */
export async function probePython(threads: number): Promise<PythonInfo> {
  const python = pythonPath();
  if (!python) return { python, torch: null, build: {}, reason: `no Python for the PyTorch peer: ${SETUP_HINT}` };
  const code = [
    'import json, sys', `sys.path.insert(0, ${JSON.stringify(SCRIPTS)})`, 'import numpy, onnx, nf_bench_common as c',
    `info = c.torch_setup(${threads})`,
    'print(json.dumps({"event": "result", **info, "numpy": numpy.__version__, "onnx": onnx.__version__}))',
  ].join('\n');
  const r = await runChild(python, ['-c', code], { timeoutS: 120, env: pythonEnv(threads) });
  const res = r.events.find((e) => e.event === 'result');
  if (!res) {
    const why = r.stderrTail.split('\n').at(-1) || (r.timedOut ? 'timed out' : `exit status ${r.exitCode}`);
    return { python, torch: null, build: {}, reason: `${python} cannot import torch, onnx and numpy (${why}): ${SETUP_HINT}` };
  }
  const { event: _event, at: _at, torch, ...build } = res;
  const version = String(torch);
  const old = Number(version.split('.')[0]) < 2;
  return { python, torch: version, build, ...(old ? { reason: `PyTorch ${version} is not PyTorch 2.x: its figures do not answer the targets (${SETUP_HINT})` } : {}) };
}

/** One line on what the PyTorch peer runs on, for the report. */
export function describeTorch(p: PythonInfo): string {
  if (!p.torch) return `unavailable: ${p.reason}`;
  const b = p.build;
  const blas = b.blas === 'mkl' && b.mkl ? `MKL ${b.mkl}` : String(b.blas ?? 'unknown BLAS');
  return `${p.torch} (${p.python}): BLAS ${blas}, oneDNN ${b.onednn ?? '—'}${b.mkldnnEnabled ? '' : ' (disabled)'}, ` +
    `CPU capability ${b.cpuCapability ?? '—'}, ${b.threads} threads (torch.set_num_threads), ${b.parallel ?? ''}; ` +
    `numpy ${b.numpy}, onnx ${b.onnx}${p.reason ? `. FLAGGED: ${p.reason}` : ''}`;
}

/** Runs one of the repository's Python scripts with arguments, `threads` threads, in a PyTorch variant (default: the first). */
export function runScript(script: string, args: readonly string[], threads: number,
  o: Omit<ChildOptions, 'env'> & { variant?: TorchVariant }): Promise<ChildResult> {
  const python = pythonPath();
  if (!python) throw new Error(`no Python for the PyTorch peer: ${SETUP_HINT}`);
  return runChild(python, [path.join(SCRIPTS, script), ...args], { ...o, env: torchEnv(pythonEnv(threads), o.variant ?? TORCH_VARIANTS[0]) });
}

/** A SHA-256 over files and strings (the ONNX export's cache key). */
export function hashOf(files: readonly string[], extra: readonly string[] = []): string {
  const h = createHash('sha256');
  for (const f of files) h.update(fs.readFileSync(f));
  for (const s of extra) h.update(s);
  return h.digest('hex');
}

/** The files an ONNX export depends on besides the weights: the export script and the model it exports. */
export function exportInputs(): string[] {
  return ['export_onnx.py', 'nf_bench_common.py', 'torch_models.py'].map((f) => path.join(SCRIPTS, f));
}
