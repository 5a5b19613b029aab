"""Fixtures of multi-head attention whose heads are narrower than d_model / num_heads.

The seeds' MultiHeadAttention(d_model, d_k, d_v, num_heads) with d_k = d_v = Dh: W_q, W_k, W_v map
d_model → num_heads·Dh, W_o maps num_heads·Dh → d_model, scores scaled by 1/√Dh, masks with
PyTorch's meaning (True = may not be attended to). Writes test/fixtures/attention_heads.safetensors:
per case <name>.input.* (x, memory, dout, masks as uint8), <name>.param.* (float32, our names:
qkv.weight = [W_q; W_k; W_v], qkv.bias, proj.weight = W_o, proj.bias), <name>.output.y and
<name>.grad.* (the gradients of sum(y · dout) with respect to the inputs and the parameters),
computed in float64 from the float32 values the file holds. The metadata holds each case's config.

    /work/venv-timm/bin/python scripts/gen_attention_heads_fixtures.py   (any venv with torch, safetensors)
"""
import json
import math
import os

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'test', 'fixtures', 'attention_heads.safetensors')

CASES = [
    # name, config (D, H, Dh, B, Tq, Tk for cross-attention, masks)
    ('self_d40_h4_dh6', dict(D=40, H=4, Dh=6, B=2, Tq=5)),
    ('self_d64_h4_dh8_causal_padding', dict(D=64, H=4, Dh=8, B=2, Tq=6, causal=True, keyPadding=True)),
    ('self_d30_h4_dh5_attnmask', dict(D=30, H=4, Dh=5, B=3, Tq=4, attnMask='3d')),
    ('cross_d30_h4_dh5_padding_attnmask', dict(D=30, H=4, Dh=5, B=2, Tq=4, Tk=7, keyPadding=True, attnMask='2d')),
]


class MultiHeadAttention(torch.nn.Module):
    """The seeds' MultiHeadAttention(d_model, d_k, d_v, num_heads), d_k = d_v = Dh."""

    def __init__(self, D, H, Dh):
        super().__init__()
        self.H, self.Dh = H, Dh
        self.W_q, self.W_k, self.W_v = (torch.nn.Linear(D, H * Dh) for _ in range(3))
        self.W_o = torch.nn.Linear(H * Dh, D)

    def forward(self, x, memory, blocked):
        src = x if memory is None else memory
        heads = lambda t: t.view(t.shape[0], t.shape[1], self.H, self.Dh).transpose(1, 2)
        q, k, v = heads(self.W_q(x)), heads(self.W_k(src)), heads(self.W_v(src))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.Dh)
        if blocked is not None:
            scores = scores.masked_fill(blocked[:, None], float('-inf'))
        ctx = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
        return self.W_o(ctx)


def masks(c, Tk, gen):
    """The uint8 masks of a case and the [B, Tq, Tk] bool of what they block (None without masks); no query row is fully blocked."""
    B, Tq = c['B'], c['Tq']
    out, blocked = {}, torch.zeros(B, Tq, Tk, dtype=torch.bool)
    if c.get('causal'):
        blocked |= torch.ones(Tq, Tk, dtype=torch.bool).triu(1)
    if c.get('keyPadding'):
        pad = torch.rand(B, Tk, generator=gen) < 0.3
        pad[:, 0] = False
        out['keyPaddingMask'] = pad
        blocked |= pad[:, None, :]
    if c.get('attnMask'):
        m = torch.rand(B if c['attnMask'] == '3d' else 1, Tq, Tk, generator=gen) < 0.25
        m[..., 0] = False
        out['attnMask'] = m if c['attnMask'] == '3d' else m[0]
        blocked |= m
    return {k: v.to(torch.uint8) for k, v in out.items()}, (blocked if out or c.get('causal') else None)


def case(name, c, gen):
    D, H, Dh, B, Tq = c['D'], c['H'], c['Dh'], c['B'], c['Tq']
    Tk = c.get('Tk', Tq)
    model = MultiHeadAttention(D, H, Dh)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * (0.3 if p.dim() == 1 else 1 / p.shape[1] ** 0.5))
    x = torch.randn(B, Tq, D, generator=gen)
    memory = torch.randn(B, Tk, D, generator=gen) if 'Tk' in c else None
    dout = torch.randn(B, Tq, D, generator=gen)
    mask_inputs, blocked = masks(c, Tk, gen)
    params = {'qkv.weight': torch.cat([model.W_q.weight, model.W_k.weight, model.W_v.weight]),
              'qkv.bias': torch.cat([model.W_q.bias, model.W_k.bias, model.W_v.bias]),
              'proj.weight': model.W_o.weight, 'proj.bias': model.W_o.bias}
    inputs = {'x': x, 'dout': dout, **mask_inputs, **({'memory': memory} if memory is not None else {})}
    m = model.double()
    x64 = x.double().requires_grad_(True)
    mem64 = memory.double().requires_grad_(True) if memory is not None else None
    y = m(x64, mem64, blocked)
    (y * dout.double()).sum().backward()
    grads = {'x': x64.grad, 'qkv.weight': torch.cat([m.W_q.weight.grad, m.W_k.weight.grad, m.W_v.weight.grad]),
             'qkv.bias': torch.cat([m.W_q.bias.grad, m.W_k.bias.grad, m.W_v.bias.grad]),
             'proj.weight': m.W_o.weight.grad, 'proj.bias': m.W_o.bias.grad}
    if mem64 is not None:
        grads['memory'] = mem64.grad
    out = {f'{name}.input.{k}': v.contiguous() for k, v in inputs.items()}
    out.update({f'{name}.param.{k}': v.detach().float().contiguous() for k, v in params.items()})
    out[f'{name}.output.y'] = y.detach().contiguous()
    out.update({f'{name}.grad.{k}': v.detach().contiguous() for k, v in grads.items()})
    return out


def main():
    gen = torch.Generator().manual_seed(14)
    tensors = {}
    for name, c in CASES:
        tensors.update(case(name, c, gen))
    save_file(tensors, OUT, metadata={'cases': json.dumps(dict(CASES)),
                                      'description': f'torch {torch.__version__}: MultiHeadAttention(d_model, d_k, d_v, num_heads)'})
    print(f'{OUT}: {os.path.getsize(OUT)} bytes')


if __name__ == '__main__':
    main()
