"""Shared by the benchmark's Python peers (torch_bench.py, torch_ops_bench.py, export_onnx.py).

- emit() / fail(): one JSON line on stdout, the protocol every benchmark child process speaks
  (bench/protocol.ts).
- torch_setup(threads): sets PyTorch's threads to ours and says what PyTorch runs on (version,
  BLAS, oneDNN, CPU capability, threads), from torch.__config__.
- load_safetensors() / load_weights() / load_inputs(): the harness's files (our model's stateDict
  and the batch), read without the safetensors package.
- timed_runs(): the repetition policy of bench/sampling.ts (warm-up runs, then timed runs until
  --reps or --budget seconds, at least one), with add_timer_args() for its options.
"""
import json
import re
import struct
import sys
import time

import numpy as np

_DT = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "U8": np.uint8, "BOOL": np.bool_}


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def fail(message):
    emit("error", message=message)
    sys.exit(1)


def torch_setup(threads):
    """torch.set_num_threads(threads); returns what PyTorch runs on, for the report."""
    import torch

    torch.set_num_threads(threads)
    config = torch.__config__.show()

    def find(pattern):
        m = re.search(pattern, config)
        return m.group(1).strip() if m else None

    return {
        "torch": torch.__version__,
        "blas": find(r"BLAS_INFO=(\w+)"),
        "mkl": find(r"Math Kernel Library Version ([\w.]+)"),
        "onednn": find(r"MKL-DNN (v[\w.]+)"),
        "cpuCapability": find(r"CPU capability usage: (\w+)"),
        "parallel": find(r"ATen parallel backend: (\w+)") or find(r"(OpenMP [\d.]+)"),
        "threads": torch.get_num_threads(),
        "mkldnnEnabled": bool(torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled),
        "adamw": adamw_implementation(torch),
    }


def adamw_implementation(torch):
    """What torch.optim.AdamW runs on CPU tensors by default: fused, foreach or the for-loop."""
    try:
        from torch.optim.optimizer import _default_to_fused_or_foreach
    except ImportError:
        return "unknown"
    fused, foreach = _default_to_fused_or_foreach([torch.zeros(1, requires_grad=True)], differentiable=False, use_fused=False)
    return "fused" if fused else "foreach" if foreach else "for-loop (single tensor)"


def load_safetensors(path):
    """name -> numpy array (a view of the file's bytes)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {name: np.frombuffer(data[s:e], dtype=_DT[info["dtype"]]).reshape(info["shape"])
            for name, info in header.items() if name != "__metadata__"
            for s, e in [info["data_offsets"]]}


def load_weights(model, path):
    """Copies every tensor of our stateDict file into the model (strict: names and shapes must match)."""
    import torch

    state = {k: torch.from_numpy(v.copy()) for k, v in load_safetensors(path).items()}
    model.load_state_dict(state, strict=True)


def load_inputs(arch, path):
    """(model inputs tuple, int64 labels) of the harness's batch."""
    import torch

    data = load_safetensors(path)
    labels = torch.from_numpy(data["labels"].astype("int64"))
    if arch["kind"] == "vit":
        return (torch.from_numpy(data["images"].copy()),), labels
    return (torch.from_numpy(data["src"].astype("int64")), torch.from_numpy(data["tgt"].astype("int64"))), labels


def timed_runs(fn, args, on_run=None):
    """Runs fn() args.warmup times untimed, then timed until args.reps runs or args.budget seconds of
    them (at least one); returns the timed runs' seconds. fn may return the seconds it timed itself
    (a backward pass after its untimed forward), else its whole call is timed. on_run(seconds,
    warmup) hears of every run as it ends."""
    timed, spent, i = [], 0.0, 0
    while len(timed) < args.reps and (not timed or spent < args.budget):
        t0 = time.perf_counter()
        own = fn()
        s = own if isinstance(own, float) else time.perf_counter() - t0
        warmup = i < args.warmup
        if on_run:
            on_run(s, warmup)
        if not warmup:
            timed.append(s)
            spent += s
        i += 1
    return timed


def add_timer_args(ap):
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--budget", type=float, default=15.0)


def max_rss_kb():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
