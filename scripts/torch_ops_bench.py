"""PyTorch's side of the operator table (bench/op_cases.ts): each case at one model's shapes, timed
in PyTorch 2.x eager the way a training step runs it (autograd on; a backward pass is timed after
an untimed forward, as a new graph needs).

  python scripts/torch_ops_bench.py --cases '<json list>' [--threads 2] [--warmup 1] [--reps 5] [--budget 2]

  linear       torch.mm: y = x·Wᵀ, dX = dy·W, dW = dyᵀ·x (what F.linear and its backward call)
  attention    torch_models.Attention (QKV Linear, F.scaled_dot_product_attention, output Linear)
               forward and backward; core: F.scaled_dot_product_attention alone on q, k, v
               [B, H, T, Dh] with requires_grad
  feedforward  torch_models.Mlp (fc1, GELU or ReLU, fc2); core: the activation alone on [rows, F]
  layernorm    nn.LayerNorm
  adamw        torch.optim.AdamW(lr=1e-3, weight_decay=0.01) over tensors of the model's parameter
               sizes, the implementation PyTorch picks by default (torch_setup's "adamw")
Prints JSON lines: {"event": "ready", ...}, then {"event": "case", "index": i, "passes": {pass: [seconds, ...]}}
per case, then {"event": "result", "maxRssKb": ...}.
"""
import argparse
import json
import time

import nf_bench_common as common
import torch_models


def backward_timed(forward, grad):
    """A function running forward() untimed, then timing its output's backward(grad)."""

    def run():
        out = forward()
        t0 = time.perf_counter()
        out.backward(grad)
        return time.perf_counter() - t0

    return run


def forward_backward(args, forward, grad):
    return {"forward": common.timed_runs(forward, args), "backward": common.timed_runs(backward_timed(forward, grad), args)}


def linear(c, args, torch):
    x, W, dy = torch.randn(c["rows"], c["inFeatures"]), torch.randn(c["outFeatures"], c["inFeatures"]), torch.randn(c["rows"], c["outFeatures"])
    with torch.no_grad():
        return {
            "forward": common.timed_runs(lambda: torch.mm(x, W.t()), args),
            "dX": common.timed_runs(lambda: torch.mm(dy, W), args),
            "dW": common.timed_runs(lambda: torch.mm(dy.t(), x), args),
        }


def attention(c, args, torch):
    import torch.nn.functional as F

    B, Tq, Tk, D, H = c["B"], c["Tq"], c["Tk"], c["D"], c["H"]
    layer = torch_models.Attention(D, H)
    x = torch.randn(B, Tq, D, requires_grad=True)
    memory = torch.randn(B, Tk, D, requires_grad=True) if c["cross"] else None
    passes = forward_backward(args, lambda: layer(x, memory, causal=c["causal"]), torch.randn(B, Tq, D))
    Dh = D // H
    q, k, v = (torch.randn(B, H, T, Dh, requires_grad=True) for T in (Tq, Tk, Tk))
    core = forward_backward(args, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=c["causal"]), torch.randn(B, H, Tq, Dh))
    return {**passes, "coreForward": core["forward"], "coreBackward": core["backward"]}


def feedforward(c, args, torch):
    rows, D, F_ = c["rows"], c["D"], c["F"]
    mlp = torch_models.Mlp(D, F_, c["activation"])
    x = torch.randn(rows, D, requires_grad=True)
    passes = forward_backward(args, lambda: mlp(x), torch.randn(rows, D))
    h = torch.randn(rows, F_, requires_grad=True)
    core = forward_backward(args, lambda: mlp.act(h), torch.randn(rows, F_))
    return {**passes, "coreForward": core["forward"], "coreBackward": core["backward"]}


def layernorm(c, args, torch):
    norm = torch.nn.LayerNorm(c["D"])
    x = torch.randn(c["rows"], c["D"], requires_grad=True)
    return forward_backward(args, lambda: norm(x), torch.randn(c["rows"], c["D"]))


def adamw(c, args, torch):
    params = [torch.nn.Parameter(torch.randn(n) * 0.02) for n in c["sizes"]]
    for p in params:
        p.grad = torch.randn(p.shape) * 1e-3
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)
    return {"step": common.timed_runs(opt.step, args)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", required=True)
    common.add_timer_args(ap)
    args = ap.parse_args()

    import torch

    info = common.torch_setup(args.threads)
    torch.manual_seed(0)
    common.emit("ready", **info)
    run = {"linear": linear, "attention": attention, "feedforward": feedforward, "layernorm": layernorm, "adamw": adamw}
    for i, c in enumerate(json.loads(args.cases)):
        common.emit("case", index=i, passes=run[c["op"]](c, args, torch))
    common.emit("result", maxRssKb=common.max_rss_kb())


if __name__ == "__main__":
    main()
