"""Joins nf_cuda_attention_bench's and attention_torch.py's JSON lines into issue 23's attention
table (markdown on stdout): per precision, T, head width, causal and pass — ours and PyTorch's
milliseconds, TFLOP/s of each, and the ratio torch ms / ours ms (above 1: ours is faster).

  python bench/gpu/attention_table.py ours.jsonl torch.jsonl

FLOPs (FlashAttention-2's convention): forward 4·B·H·T²·Dh (the products Q Kᵀ and P V), halved when
causal; backward 2.5x the forward (its 5 products: S and dP recomputed, dV, dK, dQ), whatever a kernel
really executes (our deterministic dQ pass recomputes S and dP: 7 products; the atomic one runs 5), so
TFLOP/s compare as throughput of the same work.
"""
import json
import sys


def flops(r):
    f = 4.0 * r['B'] * r['H'] * r['T'] * r['T'] * r['Dh'] * (0.5 if r['causal'] else 1.0)
    return f * (2.5 if r['pass'] == 'bwd' else 1.0)


def load(path):
    """Rows by (precision, T, Dh, causal, pass, storage, dq); PyTorch's lines have no storage (its bf16
    SDPA reads bf16 tensors, its fp32 and tf32 float32) and no dq (how our backward forms dQ: the
    recompute pass or atomic adds, a line each)."""
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith('{'):
                r = json.loads(line)
                rows[(r['precision'], r['T'], r['Dh'], r['causal'], r['pass'], r.get('storage', ''), r.get('dq', ''))] = r
    return rows


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: attention_table.py ours.jsonl torch.jsonl')
    ours, torch = load(sys.argv[1]), load(sys.argv[2])
    devices = sorted({r['device'] for r in list(ours.values()) + list(torch.values())})
    print(f"Attention core, ours vs PyTorch scaled_dot_product_attention, on {', '.join(devices)}"
          f" (B = max(1, 16384 / T), H = 2048 / Dh)\n")
    print('| precision | our storage | T | head | causal | pass | our dQ | ours ms | torch ms | ours TFLOP/s | torch TFLOP/s | torch/ours |')
    print('| --- | --- | ---: | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |')
    for key in sorted(ours, key=lambda k: (k[0], k[5], k[1], k[2], k[3], k[4] == 'bwd', k[6] == 'atomic')):
        o, t = ours[key], torch.get(key[:5] + ('', ''))
        precision, T, Dh, causal, name, storage, dq = key
        ot = flops(o) / (o['ms'] * 1e9)
        tt = f"{flops(t) / (t['ms'] * 1e9):.1f}" if t else '-'
        tms = f"{t['ms']:.3f}" if t else '-'
        ratio = f"{t['ms'] / o['ms']:.2f}" if t else '-'
        print(f"| {precision} | {storage or 'fp32'} | {T} | {Dh} | {'yes' if causal else 'no'} | {name} | {dq or '-'} | {o['ms']:.3f} | {tms} | {ot:.1f} | {tt} | {ratio} |")


if __name__ == '__main__':
    main()
