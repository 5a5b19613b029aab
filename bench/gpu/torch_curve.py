"""PyTorch's own loss curves for the loss-curve check (bench/loss_curve.ts): the same model, starting
weights and batches as ours, trained at fp32 and under torch.autocast(dtype=bfloat16), so that our
bf16-vs-fp32 difference can be read against what autocast itself does on the same task.

  python3 bench/gpu/torch_curve.py DIR [--device cpu|cuda] [--threads N] >> torch.jsonl

DIR holds what bench/loss_curve.ts's writeCurveFiles wrote: curve_init.safetensors (our model's
starting weights, loaded strictly into scripts/torch_models.py's ViTClassifier, which has our
parameter names) and curve.json (arch, batch size, steps, batch 0's fingerprint). The batches are
bench/loss_curve.ts's patternBatch, computed here with numpy: its generator is mulberry32 over a
counter (call i of batch k mixes seed_k + i * 0x6d2b79f5), so every call can be evaluated at once;
batch 0 is checked against the fingerprint before any training. AdamW as ours: lr 1e-3, betas
(0.9, 0.999), eps 1e-8, weight decay 1e-2. fp32 on CUDA with TF32 off. Prints one JSON line:
{side: "torch", check: "lossCurve", device, torch, fp32: [...], bf16: [...]}.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

M32 = np.uint64(0xFFFFFFFF)


def uniforms(seed, calls):
    """mulberry32's outputs for call numbers `calls` (1-based) of a generator seeded with `seed`."""
    s = (np.uint64(seed) + calls.astype(np.uint64) * np.uint64(0x6D2B79F5)) & M32
    t = ((s ^ (s >> np.uint64(15))) * (s | np.uint64(1))) & M32
    t = (t ^ ((t + (((t ^ (t >> np.uint64(7))) * (t | np.uint64(61))) & M32)) & M32)) & M32
    return (((t ^ (t >> np.uint64(14))) & M32).astype(np.float64) + 0.5) / 4294967296


def pattern_batch(arch, B, k):
    """bench/loss_curve.ts's patternBatch(arch, B, k): images [B, C, S, S] float32, labels [B] int64."""
    seed = (0x9E3779B9 ^ (((k + 1) * 0x85EBCA6B) & 0xFFFFFFFF)) & 0xFFFFFFFF
    per = arch["inChannels"] * arch["imgSize"] ** 2
    y = np.floor(uniforms(seed, np.arange(1, B + 1)) * arch["numClasses"]).astype(np.int64)
    e = np.arange(B * per)
    u1, u2 = uniforms(seed, B + 2 * e + 1), uniforms(seed, B + 2 * e + 2)
    pattern = np.fmod(np.sin((y[e // per] * per + e % per) * 12.9898) * 43758.5453, 1.0)
    x = np.sqrt(-2 * np.log(u1)) * np.cos(2 * math.pi * u2) + 0.5 * pattern
    return x.astype(np.float32).reshape(B, arch["inChannels"], arch["imgSize"], arch["imgSize"]), y


def check_fingerprint(x, y, want):
    ok = (y.tolist() == want["labels"] and np.allclose(x.reshape(-1)[:8], want["first"], rtol=1e-6, atol=1e-6)
          and abs(float(x.astype(np.float64).sum()) - want["sum"]) <= 1e-6 * max(1.0, abs(want["sum"])) + 1e-3)
    if not ok:
        sys.exit("torch_curve.py: batch 0 differs from bench/loss_curve.ts's: the two generators drifted apart")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=2, help="CPU threads (default 2)")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
    from nf_bench_common import load_weights
    from torch_models import ViTClassifier

    torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    meta = json.load(open(os.path.join(args.dir, "curve.json")))
    arch, B, steps = meta["arch"], meta["batch"], meta["steps"]
    batches = [pattern_batch(arch, B, k) for k in range(steps)]
    check_fingerprint(*batches[0], meta["fingerprint"])
    dev = torch.device(args.device)

    def curve(bf16):
        model = ViTClassifier(arch["imgSize"], arch["patchSize"], arch["inChannels"], arch["numClasses"],
                              arch["dModel"], arch["numHeads"], arch["dFF"], arch["depth"])
        load_weights(model, os.path.join(args.dir, "curve_init.safetensors"))
        model.to(dev).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
        losses = []
        for x, y in batches:
            images, labels = torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)
            with torch.autocast(args.device, dtype=torch.bfloat16, enabled=bf16):
                loss = F.cross_entropy(model(images), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    print(json.dumps({"side": "torch", "check": "lossCurve", "device": args.device, "torch": torch.__version__,
                      "fp32": curve(False), "bf16": curve(True)}), flush=True)


if __name__ == "__main__":
    main()
