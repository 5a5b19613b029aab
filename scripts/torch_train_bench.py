#!/usr/bin/python3
"""The PyTorch peer of the training benchmark: one step = zero_grad, forward, cross-entropy,
backward, AdamW (lr 1e-3, weight decay 0.01, torch's defaults otherwise; the same as ours).

  /usr/bin/python3 scripts/torch_train_bench.py --arch '<json>' --weights W.safetensors --inputs I.safetensors \
      [--threads 2] [--warmup 1] [--reps 5] [--budget 20]

The model is the PyTorch reference built from --arch and loaded with our model's weights; the
inputs (images or src/tgt, and labels) are the harness's. Timed steps follow the warm-up steps
until --reps steps are done, or --budget seconds of timed steps have passed (at least one).
Prints JSON lines as it goes (so a harness that stops it early keeps what it has):
  {"event": "ready", "torch": version, "threads": n, "blas": {...}}
  {"event": "sample", "seconds": s, "warmup": bool, "loss": first-step loss}   one per step
  {"event": "result", "maxRssKb": peak resident set of this process}
"""
import argparse
import json
import resource
import time

import nf_bench_common as common


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--budget", type=float, default=20.0)
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    arch = json.loads(args.arch)
    ref = common.load_reference()
    model = common.build_model(ref, arch).train()
    common.load_weights(ref, model, args.weights)
    data = ref.load_safetensors(args.inputs)
    labels = torch.from_numpy(data["labels"].astype("int64"))
    if arch["kind"] == "vit":
        inputs = (torch.from_numpy(data["images"].copy()),)
    else:
        inputs = (torch.from_numpy(data["src"].astype("int64")), torch.from_numpy(data["tgt"].astype("int64")))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    torch.ones(64, 64) @ torch.ones(64, 64)  # maps the BLAS library, so it can be named
    common.emit("ready", torch=torch.__version__, threads=torch.get_num_threads(), blas=common.blas_library())

    timed, spent, step = 0, 0.0, 0
    while timed < args.reps and (timed == 0 or spent < args.budget):
        t0 = time.perf_counter()
        opt.zero_grad()
        logits = model(*inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        opt.step()
        seconds = time.perf_counter() - t0
        warmup = step < args.warmup
        common.emit("sample", seconds=seconds, warmup=warmup, **({"loss": float(loss)} if step == 0 else {}))
        if not warmup:
            timed += 1
            spent += seconds
        step += 1
    common.emit("result", maxRssKb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


if __name__ == "__main__":
    main()
