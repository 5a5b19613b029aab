#!/usr/bin/env bash
# npm run bench:setup — the Python environment of the benchmark's PyTorch peers: .venv-bench/ at the
# repository root (git-ignored), made with `python3 -m venv`, holding PyTorch 2.x (its CPU build
# brings MKL and oneDNN), onnx (the ONNX export for onnxruntime-node), onnxruntime (its quantize_dynamic
# makes the onnxruntime int8 peer's model) and numpy, from the pip index
# pip is configured with. `npm run bench` finds it there (NF_BENCH_PYTHON overrides it).
#
# PyTorch: torch==$NF_BENCH_TORCH (default 2.13.0, the version the README's figures were taken
# with), else the newest 2.x the index has, else — flagged loudly, and flagged again in every
# report — the newest PyTorch it has at all.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-bench
WANT=${NF_BENCH_TORCH:-2.13.0}
PYTHON=${PYTHON:-python3}
say() { printf 'bench:setup: %s\n' "$*"; }

if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $($PYTHON --version 2>&1) ($PYTHON -m venv $VENV)"
  "$PYTHON" -m venv "$VENV"
else
  say "$VENV exists; installing into it"
fi
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check)

say "installing numpy, onnx and onnxruntime: pip install numpy onnx onnxruntime"
"${PIP[@]}" numpy onnx onnxruntime

say "installing PyTorch: pip install torch==$WANT"
if ! "${PIP[@]}" "torch==$WANT"; then
  say "torch==$WANT cannot be installed from this index; trying the newest PyTorch 2.x: pip install 'torch>=2,<3'"
  if ! "${PIP[@]}" 'torch>=2,<3'; then
    say "WARNING: no PyTorch 2.x can be installed; falling back to the newest PyTorch there is: pip install torch"
    say "WARNING: the benchmark will flag its PyTorch figures: the targets are set against PyTorch 2.x"
    "${PIP[@]}" torch
  fi
fi

"$VENV/bin/python" - <<'PY'
import sys
sys.path.insert(0, "scripts")
import nf_bench_common as c
info = c.torch_setup(2)
print("bench:setup: PyTorch %(torch)s, BLAS %(blas)s (MKL %(mkl)s), oneDNN %(onednn)s, CPU capability %(cpuCapability)s, AdamW default %(adamw)s" % info)
if int(info["torch"].split(".")[0]) < 2:
    print("bench:setup: WARNING: this is not PyTorch 2.x; `npm run bench` will flag its figures")
PY
say "done: npm run bench uses $VENV/bin/python (set NF_BENCH_PYTHON to use another Python)"
