"""PyTorch's peer of nf_cuda_attention_bench (native/cuda/bench/attention_bench.cu): times
torch.nn.functional.scaled_dot_product_attention forward and backward on the same shapes and
precisions with CUDA events, one JSON line per (precision, shape, pass) on stdout, in the same
format ("impl": "torch"). bench/gpu/attention_table.py joins the two.

  python bench/gpu/attention_torch.py [--precisions bf16,tf32,fp32] [--reps N] [--warmup N]

Precisions as the module property means them: 'bf16' runs SDPA on bfloat16 tensors (its flash
kernel on sm_80+); 'tf32' on float32 tensors with TF32 allowed (torch.backends.cuda.matmul.allow_tf32
and cudnn.allow_tf32); 'fp32' on float32 tensors with TF32 off (SDPA's memory-efficient kernel). SDPA
picks its backend itself, as a user's code gets it; the backend is printed on stderr per precision.
Inputs are [B, H, T, Dh] (SDPA's layout); the backward is torch.autograd.grad of the output against
q, k, v with a random upstream gradient (its Di pass included, as ours).
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F


def shapes(lengths):
    for T in lengths:
        for Dh in (64, 128):
            for causal in (False, True):
                yield max(1, 16384 // T), 2048 // Dh, T, Dh, causal


def time_ms(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--precisions', default='bf16,tf32,fp32')
    ap.add_argument('--T', default='65,197,1024,4096', help='sequence lengths, comma-separated')
    ap.add_argument('--reps', type=int, default=10)
    ap.add_argument('--warmup', type=int, default=3)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit('attention_torch.py: no CUDA device')
    device = torch.cuda.get_device_name()
    for precision in args.precisions.split(','):
        if precision not in ('bf16', 'tf32', 'fp32'):
            sys.exit(f'attention_torch.py: unknown precision {precision!r}')
        torch.backends.cuda.matmul.allow_tf32 = precision == 'tf32'
        torch.backends.cudnn.allow_tf32 = precision == 'tf32'
        dtype = torch.bfloat16 if precision == 'bf16' else torch.float32
        for B, H, T, Dh, causal in shapes([int(t) for t in args.T.split(',')]):
            q, k, v = (torch.randn(B, H, T, Dh, device='cuda', dtype=dtype, requires_grad=True) for _ in range(3))
            dout = torch.randn(B, H, T, Dh, device='cuda', dtype=dtype)
            scale = 1 / math.sqrt(Dh)

            def fwd():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

            out = fwd()

            def bwd():
                torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

            for name, fn in (('fwd', fwd), ('bwd', bwd)):
                with torch.no_grad() if name == 'fwd' else torch.enable_grad():
                    ms = time_ms(fn, args.warmup, args.reps)
                print(json.dumps({'impl': 'torch', 'device': device, 'precision': precision, 'B': B, 'H': H, 'T': T, 'Dh': Dh,
                                  'causal': causal, 'pass': name, 'ms': ms, 'torch': torch.__version__}), flush=True)
            del q, k, v, dout, out
            torch.cuda.empty_cache()


if __name__ == '__main__':
    main()
