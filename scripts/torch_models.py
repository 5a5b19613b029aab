"""The benchmark's models in plain PyTorch 2.x, written as a PyTorch user writes them today (timm's
VisionTransformer, nn.Transformer's layers): one fused QKV Linear, F.scaled_dot_product_attention,
nn.LayerNorm, nn.GELU / nn.ReLU. Same math and parameter names as nodeformer's models and the
reference spec (reference/torch_reference.py), so our safetensors weights load strictly.

  ViTClassifier   patch_embed.proj (Conv2d P×P stride P), cls_token, pos_embed, blocks.{i} (pre-LN:
                  norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2; GELU), norm, head on the CLS token
  Transformer     encoder/decoder: embed, sinusoidal positions, blocks.{i} (post-LN, ReLU; decoder
                  blocks add cross_attn and norm3, causal self-attention), decoder.head

Padding masks come from pad id 0 as in the reference; a batch without padding passes no mask to
SDPA (the fast path a PyTorch user gets), and one with padding passes it as a boolean attn_mask.
(A query row whose keys are all padding yields NaN in SDPA where the reference yields 0; the
benchmark's inputs have no padding.)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    """qkv.weight [3D, D] (rows q | k | v), proj.weight [D, D]. Self-attention, or cross-attention
    with queries from x and keys/values from memory."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, memory=None, mask=None, causal=False):
        B, T, D = x.shape
        H, Dh = self.num_heads, self.head_dim
        if memory is None:
            q, k, v = self.qkv(x).view(B, T, 3, H, Dh).permute(2, 0, 3, 1, 4).unbind(0)
        else:
            W, b = self.qkv.weight, self.qkv.bias
            q = F.linear(x, W[:D], b[:D]).view(B, T, H, Dh).transpose(1, 2)
            k, v = F.linear(memory, W[D:], b[D:]).view(B, memory.shape[1], 2, H, Dh).permute(2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None)
        return self.proj(out.transpose(1, 2).reshape(B, T, D))


class Mlp(nn.Module):
    def __init__(self, d_model, d_ff, activation):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.act = nn.GELU() if activation == "gelu" else nn.ReLU()

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class EncoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first, activation):
        super().__init__()
        self.norm_first = norm_first
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = Attention(d_model, num_heads)
        self.mlp = Mlp(d_model, d_ff, activation)

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.attn(self.norm1(x), mask=mask)
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x, mask=mask))
        return self.norm2(x + self.mlp(x))


class DecoderBlock(nn.Module):
    """Post-LN (the seq2seq Transformer's): causal self-attention, cross-attention, MLP."""

    def __init__(self, d_model, num_heads, d_ff, activation):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = Attention(d_model, num_heads)
        self.cross_attn = Attention(d_model, num_heads)
        self.mlp = Mlp(d_model, d_ff, activation)

    def forward(self, x, memory, self_mask=None, memory_mask=None):
        x = self.norm1(x + self.attn(x, mask=self_mask, causal=True))
        x = self.norm2(x + self.cross_attn(x, memory, mask=memory_mask))
        return self.norm3(x + self.mlp(x))


class PatchEmbed(nn.Module):
    def __init__(self, patch_size, in_channels, d_model):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, d_model, patch_size, stride=patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class ViTClassifier(nn.Module):
    def __init__(self, img_size, patch_size, in_channels, num_classes, d_model, num_heads, d_ff, depth):
        super().__init__()
        n = (img_size // patch_size) ** 2
        self.patch_embed = PatchEmbed(patch_size, in_channels, d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, d_model))
        self.blocks = nn.ModuleList([EncoderBlock(d_model, num_heads, d_ff, True, "gelu") for _ in range(depth)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, images):
        x = self.patch_embed(images)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x[:, 0]))


def sinusoidal(length, d_model):
    """PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(...), computed in float64."""
    pos = torch.arange(length, dtype=torch.float64).unsqueeze(1)
    div = 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos / div), torch.cos(pos / div[: d_model // 2])
    return pe.float().unsqueeze(0)


class TokenStack(nn.Module):
    def __init__(self, vocab, max_len, d_model, blocks):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.register_buffer("pe", sinusoidal(max_len, d_model), persistent=False)
        self.blocks = nn.ModuleList(blocks)

    def embedded(self, tokens):
        return self.embed(tokens) + self.pe[:, : tokens.shape[1]]


def key_mask(pad):
    """SDPA's boolean attn_mask (True = may attend) from a [B, Tk] padding mask, or None without padding."""
    return None if not bool(pad.any()) else ~pad[:, None, None, :]


class Transformer(nn.Module):
    def __init__(self, vocab, max_len, d_model, num_heads, d_ff, depth):
        super().__init__()
        self.encoder = TokenStack(vocab, max_len, d_model,
                                  [EncoderBlock(d_model, num_heads, d_ff, False, "relu") for _ in range(depth)])
        self.decoder = TokenStack(vocab, max_len, d_model, [DecoderBlock(d_model, num_heads, d_ff, "relu") for _ in range(depth)])
        self.decoder.head = nn.Linear(d_model, vocab)

    def forward(self, src, tgt):
        src_mask = key_mask(src == 0)
        tgt_pad = tgt == 0
        self_mask = None
        if bool(tgt_pad.any()):
            T = tgt.shape[1]
            causal = torch.ones(T, T, dtype=torch.bool, device=tgt.device).tril()
            self_mask = causal[None, None] & ~tgt_pad[:, None, None, :]
        memory = self.encoder.embedded(src)
        for blk in self.encoder.blocks:
            memory = blk(memory, mask=src_mask)
        x = self.decoder.embedded(tgt)
        for blk in self.decoder.blocks:
            x = blk(x, memory, self_mask=self_mask, memory_mask=src_mask)
        return self.decoder.head(x)


def build_model(arch):
    """The model of a benchmark architecture (the JSON of bench/specs.ts)."""
    common = dict(d_model=arch["dModel"], num_heads=arch["numHeads"], d_ff=arch["dFF"], depth=arch["depth"])
    if arch["kind"] == "vit":
        return ViTClassifier(arch["imgSize"], arch["patchSize"], arch["inChannels"], arch["numClasses"], **common)
    if arch["kind"] == "seq2seq":
        return Transformer(arch["vocab"], arch["maxLen"], **common)
    raise ValueError(f"unknown architecture kind {arch['kind']!r}")

