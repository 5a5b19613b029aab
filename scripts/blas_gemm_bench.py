#!/usr/bin/python3
"""The OpenBLAS peer of the GEMM benchmark: C = A·op(B) in float32 through numpy's BLAS.

  OPENBLAS_NUM_THREADS=2 /usr/bin/python3 scripts/blas_gemm_bench.py --shapes '[{"M":..,"N":..,"K":..,"transB":true}]' \
      [--warmup 1] [--reps 5] [--budget 5]

numpy hands a transposed operand to sgemm as a transpose flag (no copy), so transB measures the
same x·Wᵀ product as our Linear. Only OpenBLAS is measured: with another BLAS (Debian's default
is netlib's reference libblas3) it prints {"event": "unavailable", "reason": ...} instead.
Prints JSON lines: {"event": "ready", "blas": {...}}, then {"event": "case", "index": i,
"samples": [seconds, ...]} per shape.
"""
import argparse
import json
import time

import nf_bench_common as common


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--budget", type=float, default=5.0)
    args = ap.parse_args()

    import numpy as np

    np.ones((64, 64), np.float32) @ np.ones((64, 64), np.float32)  # maps the BLAS library
    blas = common.blas_library()
    if blas["kind"] != "openblas":
        common.emit("unavailable", reason=f"numpy's BLAS is {blas['kind']} ({blas['path']}), not OpenBLAS", blas=blas)
        return
    common.emit("ready", blas=blas, numpy=np.__version__)
    rng = np.random.default_rng(0)
    for i, s in enumerate(json.loads(args.shapes)):
        M, N, K = s["M"], s["N"], s["K"]
        a = rng.standard_normal((M, K), dtype=np.float32)
        b = rng.standard_normal((N, K) if s.get("transB") else (K, N), dtype=np.float32)
        op_b = b.T if s.get("transB") else b
        c = np.empty((M, N), np.float32)
        samples, spent, n = [], 0.0, 0
        while len(samples) < args.reps and (not samples or spent < args.budget):
            t0 = time.perf_counter()
            np.matmul(a, op_b, out=c)
            dt = time.perf_counter() - t0
            if n >= args.warmup:
                samples.append(dt)
                spent += dt
            n += 1
        common.emit("case", index=i, samples=samples)


if __name__ == "__main__":
    main()
