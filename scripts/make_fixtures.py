#!/usr/bin/python3
"""Writes the model-level test fixtures, test/fixtures/<case>.safetensors, from the PyTorch reference.

Run with Debian's PyTorch (`apt-get install python3-torch`):  /usr/bin/python3 scripts/make_fixtures.py
The reference spec is <repo>/reference/torch_reference.py, or the file named by the
NF_TORCH_REFERENCE environment variable. The output is deterministic (fixed seeds, one thread):
the same bytes on every run on the same machine.

Every case builds one reference module, replaces every parameter by seeded random values rounded to
float32, runs it in float64 on float32-representable inputs, back-propagates loss = sum(output * dy)
for random float32-representable upstream gradients dy, and writes parameters, inputs, outputs and
gradients to one file (the layout is described in test/fixtures/README.md). Each file is then
reloaded, and the forward and backward passes re-run from what was read, and compared bit for bit.
"""
import importlib.util
import json
import math
import os
import sys
import zlib

import numpy as np
import torch
import torch.nn as nn

from reference_path import reference_path

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT_DIR = os.path.join(REPO, "test", "fixtures")


REF_PATH = reference_path()
if not os.path.isfile(REF_PATH):
    sys.exit(f"make_fixtures: reference spec not found at {REF_PATH} (set NF_TORCH_REFERENCE)")

_spec = importlib.util.spec_from_file_location("torch_reference", REF_PATH)
ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ref)

torch.set_num_threads(1)
torch.manual_seed(0)  # module constructors draw from the global generator (then overwritten)

ADAMW = {"optimizer": "AdamW", "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weightDecay": 0.01}


# ---------------------------------------------------------------------------------------------
# Random data, always float32 values (held in float64 tensors for the computation)
# ---------------------------------------------------------------------------------------------
def generator(name):
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


def randn(g, *shape, scale=1.0, shift=0.0):
    """Normal samples computed in float32, so the float64 result is exactly float32-representable."""
    return (torch.randn(*shape, generator=g) * scale + shift).double()


def randint(g, low, high, *shape):
    return torch.randint(low, high, shape, generator=g)


def padding_mask(lengths, T):
    """[B, T] bool, True at positions >= lengths[b] (padding at the end of the row)."""
    return torch.arange(T)[None, :] >= torch.tensor(lengths)[:, None]


def randomize(model, g):
    """Every parameter random and O(1)-scaled: linear/conv weights N(0, 1/fan_in), biases N(0, 0.2^2),
    LayerNorm gains 1 + N(0, 0.2^2), embeddings N(0, 1), tokens and position tables N(0, 0.5^2)."""
    with torch.no_grad():
        for _, mod in model.named_modules():
            for pname, p in mod.named_parameters(recurse=False):
                shape = tuple(p.shape)
                if isinstance(mod, nn.LayerNorm):
                    v = randn(g, *shape, scale=0.2, shift=1.0 if pname == "weight" else 0.0)
                elif isinstance(mod, nn.Embedding):
                    v = randn(g, *shape)
                elif "bias" in pname:
                    v = randn(g, *shape, scale=0.2)
                elif "weight" in pname:
                    v = randn(g, *shape, scale=1.0 / math.sqrt(p[0].numel()))
                else:
                    v = randn(g, *shape, scale=0.5)
                p.copy_(v)


def new_model(build):
    """build() in float64 with requires_grad parameters; None for parameter-free functions."""
    return None if build is None else build().double()


def params_of(model):
    if model is None:
        return {}
    named = dict(model.named_parameters())
    assert list(named) == list(model.state_dict()), "state_dict must hold exactly the parameters"
    return named


# ---------------------------------------------------------------------------------------------
# Storage conversions
# ---------------------------------------------------------------------------------------------
def exactly_f32(t):
    f = t.detach().float()
    assert torch.equal(f.double(), t.detach().double()), "value not exactly representable in float32"
    return f


def store_input(t):
    if t.dtype == torch.bool:
        return t.to(torch.uint8)
    if t.dtype in (torch.int64, torch.int32):
        return t.to(torch.int32)
    return exactly_f32(t)


def load_input(a):
    t = torch.from_numpy(np.array(a))
    if t.dtype == torch.uint8:
        return t.bool()
    if t.dtype == torch.int32:
        return t.long()
    return t.double()


def load_params(model, tensors, prefix):
    with torch.no_grad():
        for name, p in params_of(model).items():
            p.copy_(torch.from_numpy(np.array(tensors[prefix + name])).double())


def meta(module, config, forward, description, **extra):
    m = {"module": module, "config": json.dumps(config, sort_keys=True),
         "forward": json.dumps(forward, sort_keys=True), "description": description}
    m.update({k: json.dumps(v, sort_keys=True) for k, v in extra.items()})
    return m


# ---------------------------------------------------------------------------------------------
# Forward/backward cases
# ---------------------------------------------------------------------------------------------
class Case:
    """name; module (class name); config/forward (camelCase JSON); build() -> module or None;
    inputs: dict name -> tensor (float64 holding float32 values, int64 ids, bool masks);
    run(model, inputs) -> dict output name -> tensor; dy: names of the outputs that get an upstream
    gradient input.d<name> (None: the single output is a scalar loss, back-propagated as is)."""

    def __init__(self, name, module, config, forward, description, build, inputs, run, dy=("y",)):
        self.name, self.module, self.config, self.forward = name, module, config, forward
        self.description, self.build, self.inputs, self.run, self.dy = description, build, inputs, run, dy


def forward_backward(case, model, inputs, dys=None, g=None):
    """Runs the case; returns outputs, the dy tensors used, and grads of every float input/param."""
    inputs = {k: (v.clone().requires_grad_(True) if v.is_floating_point() else v) for k, v in inputs.items()}
    if model is not None:
        model.zero_grad(set_to_none=True)
    outputs = case.run(model, inputs)
    if case.dy is None:
        (loss,) = outputs.values()
        loss, dys = loss.sum(), {}
    else:
        if dys is None:
            dys = {o: randn(g, *outputs[o].shape) for o in case.dy}
        loss = sum((outputs[o] * dys[o]).sum() for o in case.dy)
    loss.backward()
    grads = {f"grad.{k}": v.grad for k, v in inputs.items() if v.is_floating_point()}
    grads.update({f"grad.param.{k}": p.grad for k, p in params_of(model).items()})
    for k, v in list(outputs.items()) + list(grads.items()):
        assert v is not None and torch.isfinite(v).all(), f"{case.name}: {k} missing or not finite"
    return {k: v.detach() for k, v in outputs.items()}, dys, grads


def write_case(case):
    g = generator(case.name)
    model = new_model(case.build)
    if model is not None:
        randomize(model, g)
    outputs, dys, grads = forward_backward(case, model, case.inputs, g=g)
    tensors = {f"param.{k}": exactly_f32(p) for k, p in params_of(model).items()}
    tensors.update({f"input.{k}": store_input(v) for k, v in case.inputs.items()})
    tensors.update({f"input.d{k}": exactly_f32(v) for k, v in dys.items()})
    tensors.update({f"output.{k}": v for k, v in outputs.items()})
    tensors.update(grads)
    path = os.path.join(OUT_DIR, case.name + ".safetensors")
    ref.save_safetensors(path, tensors, meta(case.module, case.config, case.forward, case.description))
    verify_case(case, path)
    return path


def verify_case(case, path):
    """Reloads the file into a fresh module and re-runs forward and backward: bitwise equal."""
    t = ref.load_safetensors(path)
    model = new_model(case.build)
    if model is not None:
        load_params(model, t, "param.")
    inputs = {k: load_input(t[f"input.{k}"]) for k in case.inputs}
    dys = {o: load_input(t[f"input.d{o}"]) for o in (case.dy or ())}
    outputs, _, grads = forward_backward(case, model, inputs, dys)
    for k, v in list({f"output.{k}": v for k, v in outputs.items()}.items()) + list(grads.items()):
        assert np.array_equal(v.numpy(), t[k]), f"{case.name}: {k} differs after reload"
    assert set(t) == {f"param.{k}" for k in params_of(model)} | {f"input.{k}" for k in case.inputs} \
        | {f"input.d{o}" for o in (case.dy or ())} | {f"output.{k}" for k in outputs} | set(grads)


def mha_cases():
    D, H4, H2 = 24, 4, 2
    out = []

    def mha(name, H, B, Tq, desc, Tk=None, forward=None, masks=None, need_weights=False, causal=False):
        g = generator(name + ".inputs")
        inputs = {"x": randn(g, B, Tq, D)}
        if Tk is not None:
            inputs["memory"] = randn(g, B, Tk, D)
        inputs.update(masks or {})

        def run(m, i):
            r = m(i["x"], i.get("memory"), attn_mask=i.get("attnMask"), key_padding_mask=i.get("keyPaddingMask"),
                  causal=causal, need_weights=need_weights)
            return {"y": r[0], "weights": r[1]} if need_weights else {"y": r}

        fwd = {"causal": causal, "needWeights": need_weights}
        fwd.update({k: f"input.{k}" for k in (masks or {})})
        out.append(Case(name, "MultiHeadAttention", {"dModel": D, "numHeads": H, "dropout": 0.0}, fwd, desc,
                        lambda: ref.MultiHeadAttention(D, H), inputs, run))

    mha("mha_self", H4, 2, 7, "Self-attention, D 24, 4 heads of width 6, no mask.")
    mha("mha_causal", H2, 3, 9, "Causal self-attention, D 24, 2 heads of width 12.", causal=True)
    mha("mha_key_padding", H4, 3, 7, "Self-attention with a key padding mask (rows of length 7, 4, 2).",
        masks={"keyPaddingMask": padding_mask([7, 4, 2], 7)})
    g = generator("mha_attn_mask_2d.mask")
    m2 = torch.rand(9, 9, generator=g) < 0.4
    m2[torch.arange(9), torch.randint(0, 9, (9,), generator=g)] = False  # every row keeps a key
    mha("mha_attn_mask_2d", H2, 2, 9, "Self-attention with a shared [Tq, Tk] boolean attn_mask (True = blocked).",
        masks={"attnMask": m2})
    g = generator("mha_attn_mask_3d.mask")
    m3 = torch.rand(3, 7, 7, generator=g) < 0.5
    m3[1, 3, :] = True   # a fully blocked query row: output 0 for that row before proj, no gradient
    m3[2, 0, :] = True
    m3[0, 5, :] = False
    mha("mha_attn_mask_3d", H4, 3, 7, "Self-attention with a per-batch [B, Tq, Tk] attn_mask; query rows "
        "(b=1, t=3) and (b=2, t=0) are fully blocked, so their attention weights are 0 (nan_to_num).",
        masks={"attnMask": m3})
    mha("mha_need_weights", H4, 2, 7, "Causal self-attention with a key padding mask (lengths 7, 5) returning "
        "the attention weights [B, H, Tq, Tk]; the upstream gradient is on y only (weights are not "
        "differentiated).", masks={"keyPaddingMask": padding_mask([7, 5], 7)}, need_weights=True, causal=True)
    mha("mha_cross", H2, 3, 7, "Cross-attention: queries from x [B, 7, D], keys/values from memory "
        "[B, 9, D]; keyPaddingMask [B, 9] masks memory positions (lengths 9, 6, 3).", Tk=9,
        masks={"keyPaddingMask": padding_mask([9, 6, 3], 9)})
    return out


def layer_cases():
    out = []
    g = generator("layernorm.inputs")
    out.append(Case("layernorm", "LayerNorm", {"dModel": 20, "eps": 1e-6}, {},
                    "torch.nn.LayerNorm(20, eps=1e-6) over the last dim of x [3, 7, 20] (inputs with mean 0.5, std 2).",
                    lambda: nn.LayerNorm(20, eps=1e-6), {"x": randn(g, 3, 7, 20, scale=2.0, shift=0.5)},
                    lambda m, i: {"y": m(i["x"])}))
    for act in ("gelu", "gelu_tanh", "relu"):
        g = generator(f"ffn_{act}.inputs")
        out.append(Case(f"ffn_{act}", "FeedForward", {"dModel": 24, "dFF": 40, "activation": act, "dropout": 0.0}, {},
                        f"FeedForward D 24, F 40, activation {act}, x [2, 7, 24].",
                        lambda act=act: ref.FeedForward(24, 40, act), {"x": randn(g, 2, 7, 24)},
                        lambda m, i: {"y": m(i["x"])}))

    def enc_block(name, norm_first, act, H, desc, masks, causal=False):
        g = generator(name + ".inputs")
        cfg = {"dModel": 24, "numHeads": H, "dFF": 48, "normFirst": norm_first, "activation": act,
               "dropout": 0.0, "eps": 1e-5}
        fwd = {"causal": causal, **{k: f"input.{k}" for k in masks}}
        out.append(Case(name, "EncoderBlock", cfg, fwd, desc,
                        lambda: ref.EncoderBlock(24, H, 48, norm_first, act), {"x": randn(g, 2, 9, 24), **masks},
                        lambda m, i: {"y": m(i["x"], attn_mask=i.get("attnMask"),
                                             key_padding_mask=i.get("keyPaddingMask"), causal=causal)}))

    enc_block("encoder_block_preln_gelu", True, "gelu", 4, "Pre-LN EncoderBlock, D 24, 4 heads, F 48, gelu, "
              "key padding mask (lengths 9, 6).", {"keyPaddingMask": padding_mask([9, 6], 9)})
    enc_block("encoder_block_postln_relu", False, "relu", 2, "Post-LN EncoderBlock, D 24, 2 heads, F 48, relu, "
              "causal.", {}, causal=True)

    def dec_block(name, norm_first, act, desc):
        g = generator(name + ".inputs")
        cfg = {"dModel": 24, "numHeads": 4, "dFF": 48, "normFirst": norm_first, "activation": act,
               "dropout": 0.0, "eps": 1e-5}
        masks = {"tgtKeyPaddingMask": padding_mask([7, 5], 7), "memoryKeyPaddingMask": padding_mask([6, 9], 9)}
        fwd = {"causal": True, **{k: f"input.{k}" for k in masks}}
        out.append(Case(name, "DecoderBlock", cfg, fwd, desc, lambda: ref.DecoderBlock(24, 4, 48, norm_first, act),
                        {"x": randn(g, 2, 7, 24), "memory": randn(g, 2, 9, 24), **masks},
                        lambda m, i: {"y": m(i["x"], i["memory"], causal=True,
                                             tgt_key_padding_mask=i["tgtKeyPaddingMask"],
                                             memory_key_padding_mask=i["memoryKeyPaddingMask"])}))

    dec_block("decoder_block_preln_gelu", True, "gelu", "Pre-LN DecoderBlock, D 24, 4 heads, F 48, gelu, x [2, 7, D], "
              "memory [2, 9, D], causal, tgt lengths 7, 5 and memory lengths 6, 9.")
    dec_block("decoder_block_postln_relu", False, "relu", "Post-LN DecoderBlock, D 24, 4 heads, F 48, relu, x [2, 7, D], "
              "memory [2, 9, D], causal, tgt lengths 7, 5 and memory lengths 6, 9.")
    return out


def vision_cases():
    out = []
    g = generator("patch_embedding.inputs")
    out.append(Case("patch_embedding", "PatchEmbedding", {"imgSize": 12, "patchSize": 4, "inChannels": 3, "dModel": 20},
                    {}, "PatchEmbedding: images [2, 3, 12, 12] (NCHW) -> [2, 9, 20], a 4x4 stride-4 conv, patches in "
                    "row-major order.", lambda: ref.PatchEmbedding(12, 4, 3, 20), {"images": randn(g, 2, 3, 12, 12)},
                    lambda m, i: {"y": m(i["images"])}))
    vit = {"imgSize": 16, "patchSize": 4, "inChannels": 3, "numClasses": 5, "dModel": 24, "numHeads": 4, "dFF": 48,
           "depth": 2, "dropout": 0.0, "eps": 1e-5, "activation": "gelu"}
    g = generator("vit_classifier.inputs")
    out.append(Case("vit_classifier", "ViTClassifier", vit, {}, "ViTClassifier img 16, patch 4, 3 channels, D 24, "
                    "4 heads, F 48, depth 2, 5 classes; images [3, 3, 16, 16] -> logits y [3, 5].",
                    lambda: ref.ViTClassifier(16, 4, 3, 5, 24, 4, 48, 2), {"images": randn(g, 3, 3, 16, 16)},
                    lambda m, i: {"y": m(i["images"])}))
    dec = {"imgSize": 12, "patchSize": 4, "inChannels": 3, "dModel": 24, "numHeads": 4, "dFF": 48, "depth": 2,
           "dropout": 0.0, "eps": 1e-5, "activation": "gelu"}
    for causal in (True, False):
        name = "vit_decoder_causal" if causal else "vit_decoder_parallel"
        g = generator(name + ".inputs")
        inputs = {"memory": randn(g, 2, 10, 24)}
        if causal:
            inputs["memoryKeyPaddingMask"] = padding_mask([10, 7], 10)

        def run(m, i, causal=causal):
            tokens, patches = m(i["memory"], causal=causal, memory_key_padding_mask=i.get("memoryKeyPaddingMask"))
            return {"tokens": tokens, "patches": patches}

        fwd = {"causal": causal, **{k: f"input.{k}" for k in inputs if k != "memory"}}
        out.append(Case(name, "ViTDecoder", dec, fwd, f"ViTDecoder img 12, patch 4, 3 channels, D 24, 4 heads, F 48, "
                        f"depth 2, {'causal' if causal else 'non-causal'} self-attention, memory [2, 10, D]"
                        f"{' with memory lengths 10, 7' if causal else ''}; outputs tokens [2, 9, D] and patches "
                        "[2, 9, 48]; upstream gradients on both (dtokens and dpatches).",
                        lambda: ref.ViTDecoder(12, 4, 3, 24, 4, 48, 2), inputs, run, dy=("tokens", "patches")))
    g = generator("unpatchify.inputs")
    out.append(Case("unpatchify", "unpatchify", {"imgSize": 12, "patchSize": 4, "inChannels": 3}, {},
                    "unpatchify: patches [2, 9, 48] (channel-last within a patch: (py*P + px)*C + c) -> images "
                    "[2, 3, 12, 12]; grad.patches is dy gathered back.", None, {"patches": randn(g, 2, 9, 48)},
                    lambda m, i: {"y": ref.unpatchify(i["patches"], 12, 4, 3)}))
    return out


def sequence_cases():
    out = []
    base = {"maxLen": 12, "dModel": 24, "numHeads": 4, "dFF": 48, "depth": 2, "dropout": 0.0, "eps": 1e-5}

    def kw(cfg):
        return dict(d_model=cfg["dModel"], num_heads=cfg["numHeads"], d_ff=cfg["dFF"], depth=cfg["depth"],
                    norm_first=cfg["normFirst"], activation=cfg["activation"], positional=cfg["positional"],
                    scale_embedding=cfg["scaleEmbedding"])

    def tokens(g, V, lengths, T):
        t = randint(g, 1, V, len(lengths), T)
        return t.masked_fill(padding_mask(lengths, T), 0)

    def encoder(name, desc, **opts):
        cfg = {"vocabSize": 13, **base, **opts}
        g = generator(name + ".inputs")
        inputs = {"tokens": tokens(g, 13, [9, 6, 3], 9), "keyPaddingMask": padding_mask([9, 6, 3], 9)}
        out.append(Case(name, "Encoder", cfg, {"keyPaddingMask": "input.keyPaddingMask"}, desc,
                        lambda: ref.Encoder(13, 12, **kw(cfg)), inputs,
                        lambda m, i: {"y": m(i["tokens"], key_padding_mask=i["keyPaddingMask"])}))

    encoder("encoder_sinusoidal_postln", "Encoder vocab 13, maxLen 12, D 24, 4 heads, F 48, depth 2, post-LN, relu, "
            "sinusoidal positions, tokens [3, 9] padded (0) to lengths 9, 6, 3.",
            normFirst=False, activation="relu", positional="sinusoidal", scaleEmbedding=False)
    encoder("encoder_learned_preln_scaled", "Encoder vocab 13, maxLen 12, D 24, 4 heads, F 48, depth 2, pre-LN "
            "(final norm), gelu, learned positions, embeddings scaled by sqrt(24), tokens [3, 9] padded (0) to "
            "lengths 9, 6, 3.", normFirst=True, activation="gelu", positional="learned", scaleEmbedding=True)

    def decoder(name, desc, **opts):
        cfg = {"vocabSize": 11, **base, **opts}
        g = generator(name + ".inputs")
        inputs = {"tokens": tokens(g, 11, [7, 4], 7), "memory": randn(g, 2, 9, 24),
                  "tgtKeyPaddingMask": padding_mask([7, 4], 7), "memoryKeyPaddingMask": padding_mask([5, 9], 9)}
        fwd = {"causal": True, "tgtKeyPaddingMask": "input.tgtKeyPaddingMask",
               "memoryKeyPaddingMask": "input.memoryKeyPaddingMask"}
        out.append(Case(name, "Decoder", cfg, fwd, desc, lambda: ref.Decoder(11, 12, **kw(cfg)), inputs,
                        lambda m, i: {"y": m(i["tokens"], i["memory"], tgt_key_padding_mask=i["tgtKeyPaddingMask"],
                                             memory_key_padding_mask=i["memoryKeyPaddingMask"])}))

    decoder("decoder_sinusoidal_postln_scaled", "Decoder vocab 11, maxLen 12, D 24, 4 heads, F 48, depth 2, post-LN, "
            "relu, sinusoidal positions, embeddings scaled by sqrt(24); tokens [2, 7] (lengths 7, 4), memory "
            "[2, 9, D] (lengths 5, 9); logits y [2, 7, 11].",
            normFirst=False, activation="relu", positional="sinusoidal", scaleEmbedding=True)
    decoder("decoder_learned_preln", "Decoder vocab 11, maxLen 12, D 24, 4 heads, F 48, depth 2, pre-LN (final "
            "norm), gelu, learned positions; tokens [2, 7] (lengths 7, 4), memory [2, 9, D] (lengths 5, 9); "
            "logits y [2, 7, 11].", normFirst=True, activation="gelu", positional="learned", scaleEmbedding=False)

    cfg = {"srcVocab": 13, "tgtVocab": 11, "padIdx": 0, **base, "normFirst": False, "activation": "relu",
           "positional": "sinusoidal", "scaleEmbedding": False}
    g = generator("transformer.inputs")
    inputs = {"src": tokens(g, 13, [9, 5, 7], 9), "tgt": tokens(g, 11, [7, 7, 3], 7)}
    out.append(Case("transformer", "Transformer", cfg, {}, "Transformer src vocab 13, tgt vocab 11, maxLen 12, "
                    "padIdx 0, D 24, 4 heads, F 48, depth 2, post-LN, relu, sinusoidal; src [3, 9] (lengths 9, 5, 7), "
                    "tgt [3, 7] (lengths 7, 7, 3); padding masks derived from padIdx on both sides; logits y "
                    "[3, 7, 11].", lambda: ref.Transformer(13, 11, 12, 0, **kw(cfg)), inputs,
                    lambda m, i: {"y": m(i["src"], i["tgt"])}))

    g = generator("cross_entropy.inputs")
    targets = randint(g, 0, 11, 3, 7)
    targets[torch.rand(3, 7, generator=g) < 0.3] = -100
    ce = {"labelSmoothing": 0.1, "ignoreIndex": -100}
    out.append(Case("cross_entropy", "cross_entropy", ce, {}, "cross_entropy(logits [3, 7, 11], targets [3, 7]) with "
                    "label smoothing 0.1 and ignoreIndex -100 (some targets ignored); mean over non-ignored "
                    "targets; output.loss [1] is the loss and grad.logits its gradient (no dy).", None,
                    {"logits": randn(g, 3, 7, 11, scale=2.0), "targets": targets},
                    lambda m, i: {"loss": ref.cross_entropy(i["logits"], i["targets"], 0.1, -100).reshape(1)}, dy=None))
    return out


def check_cross_entropy_formula():
    """The smoothed loss the fixtures hold, written out: per non-ignored row,
    (1 - e) * -log p[target] + e / C * sum_c -log p[c], then the mean over non-ignored rows."""
    g = generator("cross_entropy.check")
    logits, targets = randn(g, 10, 7), randint(g, 0, 7, 10)
    targets[::3] = -100
    logp = torch.log_softmax(logits, -1)
    keep = targets != -100
    rows = -(0.9 * logp[keep].gather(1, targets[keep, None])[:, 0] + 0.1 / 7 * logp[keep].sum(1))
    assert torch.allclose(rows.mean(), ref.cross_entropy(logits, targets, 0.1, -100), rtol=1e-13, atol=0)


def check_unpatchify_order():
    """image[b, c, gy*P + py, gx*P + px] = patches[b, gy*(S/P) + gx, (py*P + px)*C + c]."""
    S, P, C = 12, 4, 3
    n = S // P
    patches = torch.arange(2 * n * n * P * P * C).reshape(2, n * n, P * P * C)
    b, c, y, x = torch.meshgrid(*(torch.arange(k) for k in (2, C, S, S)), indexing="ij")
    expect = patches[b, (y // P) * n + x // P, ((y % P) * P + x % P) * C + c]
    assert torch.equal(ref.unpatchify(patches, S, P, C), expect), "unpatchify order"


# ---------------------------------------------------------------------------------------------
# torch.nn.TransformerEncoder checkpoint
# ---------------------------------------------------------------------------------------------
def torch_encoder_case():
    name = "torch_transformer_encoder"
    cfg = {"dModel": 24, "numHeads": 4, "dFF": 48, "depth": 2, "normFirst": False, "activation": "relu",
           "dropout": 0.0, "eps": 1e-5}

    def build_torch():
        layer = nn.TransformerEncoderLayer(24, 4, 48, dropout=0.0, activation="relu", batch_first=True,
                                           norm_first=False)
        return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).double()

    def to_project(key):
        for a, b in ref.TORCH_TO_PROJECT:
            key = key.replace(a, b)
        return key

    def run_project(torch_sd, x, mask):
        blocks = nn.Module()
        blocks.blocks = nn.ModuleList([ref.EncoderBlock(24, 4, 48, False, "relu") for _ in range(2)])
        blocks.double().load_state_dict({to_project(k): v for k, v in torch_sd.items()}, strict=True)
        for blk in blocks.blocks:
            x = blk(x, key_padding_mask=mask)
        return x

    g = generator(name)
    model = build_torch()
    randomize(model, g)
    x, mask = randn(g, 2, 7, 24), padding_mask([7, 4], 7)
    y = model(x, src_key_padding_mask=mask).detach()   # train mode, dropout 0: the plain (non-fast) path
    sd = {k: v.detach() for k, v in model.state_dict().items()}
    y_ref = run_project(sd, x, mask).detach()
    err = (y - y_ref).abs().max().item()
    assert err < 1e-12, f"TORCH_TO_PROJECT mapping: reference Encoder blocks differ from torch by {err}"

    tensors = {f"torch.{k}": exactly_f32(v) for k, v in sd.items()}
    tensors.update({"input.x": store_input(x), "input.keyPaddingMask": store_input(mask), "output.y": y})
    path = os.path.join(OUT_DIR, name + ".safetensors")
    ref.save_safetensors(path, tensors, meta(
        "torch.nn.TransformerEncoder", cfg, {"keyPaddingMask": "input.keyPaddingMask"},
        "torch.nn.TransformerEncoder(TransformerEncoderLayer(24, 4, 48, dropout 0, relu, batch_first, post-LN), 2 "
        "layers) state_dict under torch's names (torch.<name>), input x [2, 7, 24], src_key_padding_mask (lengths "
        "7, 4) and torch's output y; mapping the keys with TORCH_TO_PROJECT into 2 EncoderBlocks reproduces y "
        f"(max abs diff {err:.1e} in float64).",
        keyMap={k: to_project(k) for k in sd}))

    t = ref.load_safetensors(path)
    model = build_torch()
    model.load_state_dict({k[len("torch."):]: torch.from_numpy(np.array(v)).double()
                           for k, v in t.items() if k.startswith("torch.")}, strict=True)
    y2 = model(load_input(t["input.x"]), src_key_padding_mask=load_input(t["input.keyPaddingMask"])).detach()
    assert np.array_equal(y2.numpy(), t["output.y"]), f"{name}: output.y differs after reload"
    return path


# ---------------------------------------------------------------------------------------------
# Training trajectories: 10 AdamW steps
# ---------------------------------------------------------------------------------------------
def train(model, batches, loss_fn, steps):
    opt = torch.optim.AdamW(model.parameters(), lr=ADAMW["lr"], betas=tuple(ADAMW["betas"]), eps=ADAMW["eps"],
                            weight_decay=ADAMW["weightDecay"])
    losses = []
    for s in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, {k: v[s] for k, v in batches.items()})
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return torch.tensor(losses, dtype=torch.float64)


def check_adamw_formula():
    """torch.optim.AdamW as the trajectories use it, written out for parameter p, gradient g, step t >= 1:
    p *= 1 - lr * wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
    p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)."""
    g = generator("adamw.check")
    p0, grads = randn(g, 50), [randn(g, 50) for _ in range(3)]
    p = p0.clone().requires_grad_(True)
    opt = torch.optim.AdamW([p], lr=ADAMW["lr"], betas=tuple(ADAMW["betas"]), eps=ADAMW["eps"],
                            weight_decay=ADAMW["weightDecay"])
    (b1, b2), lr, wd, eps = ADAMW["betas"], ADAMW["lr"], ADAMW["weightDecay"], ADAMW["eps"]
    q, m, v = p0.clone(), torch.zeros(50, dtype=torch.float64), torch.zeros(50, dtype=torch.float64)
    for t, gr in enumerate(grads, 1):
        p.grad = gr.clone()
        opt.step()
        q = q * (1 - lr * wd)
        m, v = b1 * m + (1 - b1) * gr, b2 * v + (1 - b2) * gr * gr
        q = q - lr / (1 - b1 ** t) * m / (v.sqrt() / math.sqrt(1 - b2 ** t) + eps)
    assert torch.allclose(p.detach(), q, rtol=1e-14, atol=0), "AdamW update formula"


def write_training(name, module, cfg, build, batches, loss_fn, training, description, steps=10):
    g = generator(name)
    model = new_model(build)
    randomize(model, g)
    tensors = {f"param.{k}": exactly_f32(p) for k, p in params_of(model).items()}
    tensors.update({f"input.{k}": store_input(v) for k, v in batches.items()})
    losses = train(model, batches, loss_fn, steps)
    tensors["output.losses"] = losses
    tensors.update({f"final.{k}": p.detach() for k, p in params_of(model).items()})
    path = os.path.join(OUT_DIR, name + ".safetensors")
    ref.save_safetensors(path, tensors, meta(module, cfg, {}, description,
                                             training={**ADAMW, "steps": steps, **training}))

    t = ref.load_safetensors(path)
    model = new_model(build)
    load_params(model, t, "param.")
    again = train(model, {k: load_input(t[f"input.{k}"]) for k in batches}, loss_fn, steps)
    assert np.array_equal(again.numpy(), t["output.losses"]), f"{name}: losses differ after reload"
    for k, p in params_of(model).items():
        assert np.array_equal(p.detach().numpy(), t[f"final.{k}"]), f"{name}: final.{k} differs after reload"
    return path


def training_cases():
    steps = 10
    vit = {"imgSize": 8, "patchSize": 4, "inChannels": 3, "numClasses": 5, "dModel": 16, "numHeads": 2, "dFF": 32,
           "depth": 2, "dropout": 0.0, "eps": 1e-5, "activation": "gelu"}
    g = generator("train_vit_classifier.batches")
    batches = {"images": randn(g, steps, 6, 3, 8, 8), "labels": randint(g, 0, 5, steps, 6)}
    p1 = write_training(
        "train_vit_classifier", "ViTClassifier", vit, lambda: ref.ViTClassifier(8, 4, 3, 5, 16, 2, 32, 2), batches,
        lambda m, b: ref.cross_entropy(m(b["images"]), b["labels"]),
        {"loss": "cross_entropy(model(images[s]), labels[s])", "labelSmoothing": 0.0},
        "ViTClassifier img 8, patch 4, 3 channels, D 16, 2 heads, F 32, depth 2, 5 classes, trained 10 AdamW steps "
        "(lr 1e-3, weight decay 0.01 on every parameter) on batch s = images[s] [6, 3, 8, 8], labels[s] [6]; "
        "losses[s] is the loss before update s; final.* the parameters after the 10 updates.", steps)

    cfg = {"srcVocab": 13, "tgtVocab": 11, "maxLen": 10, "padIdx": 0, "dModel": 16, "numHeads": 2, "dFF": 32,
           "depth": 2, "dropout": 0.0, "eps": 1e-5, "normFirst": False, "activation": "relu",
           "positional": "sinusoidal", "scaleEmbedding": False}
    g = generator("train_transformer.batches")
    src = randint(g, 1, 13, steps, 4, 8)
    tgt = randint(g, 3, 11, steps, 4, 9)
    tgt[:, :, 0] = 1                                        # BOS
    for s in range(steps):
        src_len = torch.randint(3, 9, (4,), generator=g)
        tgt_len = torch.randint(3, 9, (4,), generator=g)     # BOS + content + EOS within 9 tokens
        src[s] = src[s].masked_fill(padding_mask(src_len.tolist(), 8), 0)
        for b, n in enumerate(tgt_len.tolist()):
            tgt[s, b, n] = 2                                 # EOS
            tgt[s, b, n + 1:] = 0
    kw = dict(d_model=16, num_heads=2, d_ff=32, depth=2)

    def loss_fn(m, b):
        return ref.cross_entropy(m(b["src"], b["tgt"][:, :-1]), b["tgt"][:, 1:], label_smoothing=0.1, ignore_index=0)

    p2 = write_training(
        "train_transformer", "Transformer", cfg, lambda: ref.Transformer(13, 11, 10, 0, **kw), {"src": src, "tgt": tgt},
        loss_fn, {"loss": "cross_entropy(model(src[s], tgt[s][:, :-1]), tgt[s][:, 1:], labelSmoothing 0.1, "
                  "ignoreIndex padIdx)", "labelSmoothing": 0.1, "ignoreIndex": 0, "teacherForcing": True},
        "Transformer src vocab 13, tgt vocab 11, maxLen 10, padIdx 0, D 16, 2 heads, F 32, depth 2, post-LN, relu, "
        "sinusoidal, trained 10 AdamW steps (lr 1e-3, weight decay 0.01 on every parameter) with teacher forcing: "
        "batch s = src[s] [4, 8], tgt[s] [4, 9] (BOS 1 ... EOS 2, then padding 0); decoder input tgt[s][:, :-1], "
        "targets tgt[s][:, 1:], label smoothing 0.1, padding targets ignored; losses[s] is the loss before update s.",
        steps)
    return [p1, p2]


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    check_cross_entropy_formula()
    check_adamw_formula()
    check_unpatchify_order()
    paths = [write_case(c) for c in mha_cases() + layer_cases() + vision_cases() + sequence_cases()]
    paths.append(torch_encoder_case())
    paths += training_cases()
    names = [os.path.basename(p) for p in paths]
    assert len(set(names)) == len(names)
    stale = sorted(set(f for f in os.listdir(OUT_DIR) if f.endswith(".safetensors")) - set(names))
    if stale:
        print("warning: files not written by this script:", ", ".join(stale), file=sys.stderr)
    total = 0
    print(f"{'case':40s} {'bytes':>9s}")
    for p in paths:
        size = os.path.getsize(p)
        total += size
        print(f"{os.path.basename(p)[:-len('.safetensors')]:40s} {size:9d}")
    print(f"{'total (' + str(len(paths)) + ' files)':40s} {total:9d}")


if __name__ == "__main__":
    main()
