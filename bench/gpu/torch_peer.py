"""The GPU benchmark's PyTorch side (issue 22, item 6): PyTorch 2.x eager on the same card, the rows
of the plan bench/gpu/harness.ts writes (model, batch, infer | train, fp32 | tf32 | bf16).

  python3 bench/gpu/torch_peer.py PLAN.json > torch.jsonl      (scripts/gpu_bench.sh runs it)

The model is timm's VisionTransformer when timm is installed (what the issue's baseline table
measured), else scripts/torch_models.py's ViTClassifier (the same architecture in plain PyTorch).
Precisions as a PyTorch user gets them: fp32 (TF32 off for matmul and cuDNN), tf32
(torch.backends.cuda.matmul.allow_tf32 and cudnn.allow_tf32), bf16 (torch.autocast(dtype=bfloat16),
TF32 off). Inference under torch.inference_mode(); a training step is zero_grad, forward,
cross-entropy, backward, AdamW (lr 1e-4). Timing with CUDA events after the plan's warm-up
iterations; the median of the timed ones. One JSON line per row (and a first line naming torch,
timm, the device and the model), so a run stopped early keeps what it has.
"""
import argparse
import json
import os
import statistics
import sys


def emit(**kw):
    print(json.dumps(kw), flush=True)


def build(arch, torch):
    """timm's VisionTransformer of the plan's arch, else torch_models.ViTClassifier; and which."""
    try:
        from timm.models.vision_transformer import VisionTransformer

        return VisionTransformer(img_size=arch["imgSize"], patch_size=arch["patchSize"], in_chans=arch["inChannels"],
                                 num_classes=arch["numClasses"], embed_dim=arch["dModel"], depth=arch["depth"],
                                 num_heads=arch["numHeads"], mlp_ratio=arch["dFF"] / arch["dModel"]), "timm"
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
        import torch_models

        return torch_models.ViTClassifier(arch["imgSize"], arch["patchSize"], arch["inChannels"], arch["numClasses"],
                                          arch["dModel"], arch["numHeads"], arch["dFF"], arch["depth"]), "torch_models"


def set_precision(torch, precision):
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def time_row(torch, row, device):
    import torch.nn.functional as F

    arch, B = row["arch"], row["batch"]
    model, _ = build(arch, torch)
    model = model.to(device)
    set_precision(torch, row["precision"])
    g = torch.Generator().manual_seed(0)
    images = torch.randn(B, arch["inChannels"], arch["imgSize"], arch["imgSize"], generator=g).to(device)
    labels = torch.randint(0, arch["numClasses"], (B,), generator=g).to(device)
    autocast = torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=row["precision"] == "bf16")
    if row["mode"] == "infer":
        model.eval()

        def step():
            with torch.inference_mode(), autocast:
                model(images)
    else:
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            opt.zero_grad(set_to_none=True)
            with autocast:
                loss = F.cross_entropy(model(images), labels)
            loss.backward()
            opt.step()

    for _ in range(row["warmup"]):
        step()
    ms = []
    for _ in range(row["reps"]):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        ms.append(start.elapsed_time(end))
    del model
    torch.cuda.empty_cache()
    return {"medianMs": statistics.median(ms), "minMs": min(ms)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("plan", help="the plan JSON of bench/gpu/harness.ts (`harness plan`)")
    args = ap.parse_args()
    import torch

    with open(args.plan) as f:
        plan = json.load(f)
    if not torch.cuda.is_available():
        emit(side="torch", torch=torch.__version__, error="no CUDA device")
        return
    device = torch.device("cuda")
    timm_version = None
    try:
        import timm

        timm_version = timm.__version__
    except ImportError:
        pass
    emit(side="torch", torch=torch.__version__, timm=timm_version, device=torch.cuda.get_device_name(0),
         model=build(plan["rows"][0]["arch"], torch)[1])
    for row in plan["rows"]:
        key = {k: row[k] for k in ("id", "batch", "mode", "precision")}
        try:
            emit(side="torch", **key, **time_row(torch, row, device))
        except Exception as e:  # (one failing row, e.g. out of memory, must not lose the others)
            emit(side="torch", **key, error=f"{type(e).__name__}: {e}")
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
