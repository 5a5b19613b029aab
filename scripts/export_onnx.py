#!/usr/bin/python3
"""Exports a benchmark model to ONNX for the onnxruntime-node peer, with our model's weights.

  /usr/bin/python3 scripts/export_onnx.py --arch '<json>' --weights W.safetensors --inputs I.safetensors --out M.onnx

The model is the PyTorch reference (shared/reference/torch_reference.py) built from --arch (see
bench/specs.ts), loaded with the safetensors weights that the harness saved from our model's
stateDict(), traced on the example inputs (images, or src and tgt token ids) with a dynamic batch
axis, opset 17 (LayerNormalization), constant folding on.

One substitution, for the graph's sake and not the math's: self-attention with no mask (ViT) is
exported as one QKV projection, softmax(QKᵀ/√Dh)·V and the output projection, i.e. the
reference's forward without its all-false masked_fill, its no-op nan_to_num and its three sliced
projections, which would only cost onnxruntime time. Masked attention (the Transformer's padding
and causal masks) is exported exactly as the reference writes it. The exported graph's outputs are
checked against the reference's own forward before the file is written.
Prints JSON lines: {"event": "result", "seconds": ..., "maxAbsDiff": ...} or {"event": "error"}.
"""
import argparse
import json
import math
import os
import time

import nf_bench_common as common


def lean_self_attention(ref):
    """Wraps ref.MultiHeadAttention.forward: the unmasked self-attention path as one fused graph."""
    import torch
    import torch.nn.functional as F

    original = ref.MultiHeadAttention.forward

    def forward(self, x, memory=None, attn_mask=None, key_padding_mask=None, causal=False, need_weights=False):
        if memory is not None or attn_mask is not None or key_padding_mask is not None or causal or need_weights:
            return original(self, x, memory, attn_mask, key_padding_mask, causal, need_weights)
        B, T, D = x.shape
        H, Dh = self.num_heads, self.head_dim
        qkv = F.linear(x, self.qkv.weight, self.qkv.bias).view(B, T, 3, H, Dh).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        weights = torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(Dh), dim=-1)
        out = (self.attn_drop(weights) @ v).transpose(1, 2).reshape(B, T, D)
        return self.proj(out)

    ref.MultiHeadAttention.forward = forward
    return original


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", required=True, help="architecture JSON (bench/specs.ts)")
    ap.add_argument("--weights", required=True, help="safetensors of the model's stateDict")
    ap.add_argument("--inputs", required=True, help="safetensors with images, or src and tgt")
    ap.add_argument("--out", required=True, help="the .onnx file to write")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(2)
    t0 = time.time()
    arch = json.loads(args.arch)
    ref = common.load_reference()
    model = common.build_model(ref, arch).eval()
    common.load_weights(ref, model, args.weights)
    inputs = ref.load_safetensors(args.inputs)
    if arch["kind"] == "vit":
        example = (torch.from_numpy(inputs["images"].copy()),)
        names, axes = ["images"], {"images": {0: "batch"}, "logits": {0: "batch"}}
    else:
        example = (torch.from_numpy(inputs["src"].astype("int64")), torch.from_numpy(inputs["tgt"].astype("int64")))
        names, axes = ["src", "tgt"], {"src": {0: "batch"}, "tgt": {0: "batch"}, "logits": {0: "batch"}}
    with torch.no_grad():
        expected = model(*example)
        original = lean_self_attention(ref)
        try:
            got = model(*example)
            tmp = args.out + ".tmp"
            torch.onnx.export(model, example, tmp, input_names=names, output_names=["logits"], dynamic_axes=axes,
                              opset_version=17, do_constant_folding=True)
        finally:
            ref.MultiHeadAttention.forward = original
    diff = float((got - expected).abs().max())
    scale = float(expected.abs().max())
    if not diff <= 1e-4 * max(1.0, scale):
        common.fail(f"the exported attention path disagrees with the reference: max |diff| {diff:g}")
    os.replace(tmp, args.out)
    common.emit("result", seconds=time.time() - t0, maxAbsDiff=diff)


if __name__ == "__main__":
    main()
