"""The PyTorch 2.x peer of the model benchmark, eager mode: inference under torch.inference_mode(),
or one training step = zero_grad, forward, cross-entropy, backward, AdamW (lr 1e-3, weight decay
0.01, torch's defaults otherwise, implementation as torch picks it on CPU; the same step as ours).

  python scripts/torch_bench.py --mode infer|train --arch '<json>' --weights W.safetensors \
      --inputs I.safetensors [--ours-logits L.f32] [--autocast bf16] [--threads 2] [--warmup 1] [--reps 5] [--budget 15]

--autocast bf16 runs the forward (and the loss) under torch.autocast('cpu', dtype=torch.bfloat16):
PyTorch's mixed precision on the CPU (bf16 matrix products through oneDNN, fp32 master weights and
optimizer), the peer of our precision 'bf16' (bench/bf16_suite.ts).

The model is scripts/torch_models.py's, built from --arch and loaded with our model's weights; the
inputs (images or src/tgt, and labels) are the harness's. Prints JSON lines as it goes (so a
harness that stops it early keeps what it has):
  {"event": "ready", "torch": version, "threads": n, "blas": ..., ...}   (nf_bench_common.torch_setup)
  {"event": "sample", "seconds": s, "warmup": bool, "loss"?: first-step loss}   one per step
  {"event": "result", "maxRssKb": peak RSS, "agreement"?: {"maxAbsDiff", "maxAbs"} with our logits}
"""
import argparse
import json
import os

import nf_bench_common as common
import torch_models


def compare_logits(path, logits):
    """max |ours − torch| and max |ours| over our logits (raw float32) and these."""
    import numpy as np

    if not path or not os.path.exists(path):
        return None
    ours = np.fromfile(path, dtype=np.float32)
    theirs = logits.detach().reshape(-1).numpy()
    if ours.size != theirs.size:
        return {"maxAbsDiff": float("inf"), "maxAbs": float("nan")}
    return {"maxAbsDiff": float(np.abs(ours - theirs).max()), "maxAbs": float(np.abs(ours).max())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["infer", "train"], required=True)
    ap.add_argument("--arch", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--ours-logits", default=None, help="our logits (raw float32), to compare with (inference)")
    ap.add_argument("--autocast", choices=["bf16"], default=None, help="run the forward under torch.autocast('cpu', bfloat16)")
    common.add_timer_args(ap)
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F

    info = common.torch_setup(args.threads)
    arch = json.loads(args.arch)
    model = torch_models.build_model(arch)
    common.load_weights(model, args.weights)
    inputs, labels = common.load_inputs(arch, args.inputs)

    def autocast():
        """torch.autocast bf16 under --autocast bf16, else a context that changes nothing."""
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16")

    if args.mode == "infer":
        model.eval()
        common.emit("ready", **info)
        kept = {}

        def step():
            with torch.inference_mode(), autocast():
                kept["logits"] = model(*inputs).float()

        common.timed_runs(step, args, lambda seconds, warmup: common.emit("sample", seconds=seconds, warmup=warmup))
        common.emit("result", maxRssKb=common.max_rss_kb(), agreement=compare_logits(args.ours_logits, kept["logits"]))
        return

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    common.emit("ready", **info)
    losses = []

    def step():
        opt.zero_grad()
        with autocast():
            logits = model(*inputs)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())

    def report(seconds, warmup):
        common.emit("sample", seconds=seconds, warmup=warmup, **({"loss": losses[0]} if len(losses) == 1 else {}))

    common.timed_runs(step, args, report)
    common.emit("result", maxRssKb=common.max_rss_kb(), firstLoss=losses[0])


if __name__ == "__main__":
    main()
