/**
 * The Python side of the peers: finding Debian's Python with PyTorch and numpy, finding OpenBLAS,
 * and running scripts/export_onnx.py, torch_train_bench.py and blas_gemm_bench.py.
 *
 * BLAS: Debian's PyTorch and numpy call whatever libblas.so.3 the system's alternatives select,
 * which is netlib's reference BLAS unless an optimised one (libopenblas0-pthread) is installed.
 * When an OpenBLAS library is found (NF_BENCH_OPENBLAS, or ldconfig's cache) it is preloaded into
 * the Python peers, so PyTorch and numpy run on OpenBLAS either way; without one, PyTorch runs on
 * the reference BLAS and its figures are flagged as unrepresentative.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { REPO_ROOT, runChild, type ChildOptions, type ChildResult } from './child';

export interface PythonInfo {
  python: string;
  /** PyTorch's version, or null with `reason` when Python or PyTorch is missing. */
  torch: string | null;
  numpy: string | null;
  reason?: string;
}

const SCRIPTS = path.join(REPO_ROOT, 'scripts');

/** NF_BENCH_PYTHON, else Debian's /usr/bin/python3, else python3 on the PATH. */
export function pythonPath(): string {
  return process.env.NF_BENCH_PYTHON ?? (fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
}

/** An OpenBLAS shared library: NF_BENCH_OPENBLAS, else the first libopenblas in ldconfig's cache. */
export function findOpenBlas(): string | null {
  const explicit = process.env.NF_BENCH_OPENBLAS;
  if (explicit) return fs.existsSync(explicit) ? path.resolve(explicit) : null;
  for (const ldconfig of ['/sbin/ldconfig', '/usr/sbin/ldconfig', 'ldconfig']) {
    try {
      const cache = execFileSync(ldconfig, ['-p'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
      const m = /libopenblas[\w.-]*\.so[\w.]*\s.*=>\s*(\S+)/.exec(cache);
      return m ? m[1] : null;
    } catch {
      // try the next location
    }
  }
  return null;
}

/** The environment of a Python peer: `threads` for every thread pool, OpenBLAS preloaded when found. */
export function pythonEnv(threads: number, openblas: string | null): NodeJS.ProcessEnv {
  const n = String(threads);
  return {
    ...process.env, OMP_NUM_THREADS: n, OPENBLAS_NUM_THREADS: n, MKL_NUM_THREADS: n, PYTHONDONTWRITEBYTECODE: '1',
    ...(openblas ? { LD_PRELOAD: [openblas, process.env.LD_PRELOAD].filter(Boolean).join(':') } : {}),
  };
}

/** Which Python runs the peers and whether it has PyTorch and numpy. */
export async function probePython(): Promise<PythonInfo> {
  const python = pythonPath();
  const code = 'import json, numpy, torch; print(json.dumps({"event": "result", "torch": torch.__version__, "numpy": numpy.__version__}))';
  const r = await runChild(python, ['-c', code], { timeoutS: 120 });
  const res = r.events.find((e) => e.event === 'result');
  if (res) return { python, torch: String(res.torch), numpy: String(res.numpy) };
  const why = r.stderrTail.split('\n').at(-1) || (r.timedOut ? 'timed out' : `exit status ${r.exitCode}`);
  return { python, torch: null, numpy: null, reason: `${python} cannot import torch and numpy: ${why}` };
}

/** Runs one of the repository's Python scripts with arguments. */
export function runScript(script: string, args: readonly string[], o: ChildOptions): Promise<ChildResult> {
  return runChild(pythonPath(), [path.join(SCRIPTS, script), ...args], o);
}

/** A SHA-256 over files (the ONNX export's cache key). */
export function hashFiles(files: readonly string[]): string {
  const h = createHash('sha256');
  for (const f of files) h.update(fs.readFileSync(f));
  return h.digest('hex');
}

/** The reference spec the scripts load (as scripts/nf_bench_common.py finds it), or null. */
export function referencePath(): string | null {
  if (process.env.NF_TORCH_REFERENCE) return process.env.NF_TORCH_REFERENCE;
  for (let d = path.dirname(REPO_ROOT); ; d = path.dirname(d)) {
    const p = path.join(d, 'shared', 'reference', 'torch_reference.py');
    if (fs.existsSync(p)) return p;
    if (path.dirname(d) === d) return null;
  }
}

/** The files an ONNX export depends on besides the weights: the export scripts and the reference spec. */
export function exportInputs(): string[] {
  const ref = referencePath();
  return [path.join(SCRIPTS, 'export_onnx.py'), path.join(SCRIPTS, 'nf_bench_common.py'), ...(ref ? [ref] : [])];
}
