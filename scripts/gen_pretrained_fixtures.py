"""Fixtures of models from the PyTorch world: timm VisionTransformer, Hugging Face ViT and BERT.

Builds each model with random weights (no downloads) at small, awkward configs, saves it the way
its library does (timm: model.safetensors plus a config.json holding timm's own argument names
under "model_args", as timm's Hub files do; transformers: save_pretrained) into
test/fixtures/pretrained/<name>/, and beside it io.safetensors with the inputs, the library's
outputs and the gradients of the scalar loss sum(output * upstream) with respect to the images (ViTs)
and a few parameters. Also resample_<name>.safetensors: timm's resample_abs_pos_embed on
a random position table.

Outputs and gradients are computed in float64 (model.double()) from the float32 weights and
inputs that the files hold, so a float32 implementation sees exactly the same numbers.

Setup (any venv with the configured pip index):

    python3 -m venv /work/venv-timm
    /work/venv-timm/bin/pip install /opt/wheels/torch-2.13.0+cpu-*.whl transformers safetensors numpy timm
    /work/venv-timm/bin/pip uninstall -y torchvision   # optional: the stub below replaces it anyway
    /work/venv-timm/bin/python scripts/gen_pretrained_fixtures.py

timm imports torchvision at import time (transforms, a frozen batch norm) but the
VisionTransformer does not use it; where torchvision's C extension does not load ("operator
torchvision::nms does not exist") the import fails, so this script installs a stub torchvision
before importing timm (after importing transformers, which would take the stub for the real
package; transformers' models need no torchvision).
"""
import importlib.abc
import importlib.machinery
import json
import os
import shutil
import sys
import types

import torch
from safetensors.torch import save_file, load_file
import transformers
from transformers import BertConfig, BertModel, ViTConfig, ViTForImageClassification, ViTModel

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'test', 'fixtures', 'pretrained')


class _Anything:
    """Stands in for any torchvision name timm touches at import time (never called by the models built here)."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return _Anything()

    def __call__(self, *args, **kwargs):
        return _Anything()

    def __mro_entries__(self, bases):
        return (object,)


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return _Anything()


class _TorchvisionStub(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves `torchvision` and every submodule to a stub module."""

    def find_spec(self, name, path, target=None):
        if name == 'torchvision' or name.startswith('torchvision.'):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StubModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []


sys.meta_path.insert(0, _TorchvisionStub())

import timm  # noqa: E402  (after the stub)
from timm.layers import Attention, resample_abs_pos_embed  # noqa: E402
from timm.models.vision_transformer import VisionTransformer  # noqa: E402

torch.set_num_threads(1)
MAX_BYTES = 300_000


def randomize(model, gen):
    """Every parameter random and O(1)-scaled, so no path of the model is trivially zero or identity."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.split('.')[-1]
            if ('norm' in name or 'LayerNorm' in name or 'layernorm' in name) and leaf == 'weight':
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen))
            elif leaf in ('bias', 'gamma') or p.dim() == 1:
                p.copy_((0.6 if leaf == 'gamma' else 0) + 0.2 * torch.randn(p.shape, generator=gen))
            elif name in ('cls_token', 'pos_embed', 'reg_token') or 'embeddings' in name or 'cls_token' in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in ** 0.5)


def f64(t):
    return t.detach().to(torch.float64).contiguous()


def check_size(folder):
    total = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    assert total < MAX_BYTES, f'{folder}: {total} bytes'
    print(f'{os.path.basename(folder)}: {total} bytes')


def fresh_dir(name):
    folder = os.path.join(OUT, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    return folder


def image_grads(model, images, dout, forward, grad_params, extra_inputs=None):
    """Float64 forward and backward of sum(forward(model, images) * dout); returns (output, grads)."""
    model = model.double().eval()
    x = f64(images).requires_grad_(True)
    out = forward(model, x)
    (out * f64(dout)).sum().backward()
    named = dict(model.named_parameters())
    grads = {'grad.images': f64(x.grad)}
    for n in grad_params:
        grads[f'grad.param.{n}'] = f64(named[n].grad)
    return f64(out), grads


# ---------------------------------------------------------------------------------------------
# timm VisionTransformer

def head_dim_attention(head_dim):
    """timm's Attention with attn_head_dim set (VisionTransformer passes it no head width of its own)."""

    class HeadDimAttention(Attention):
        def __init__(self, dim, **kwargs):
            super().__init__(dim, attn_head_dim=head_dim, **kwargs)

    return HeadDimAttention


TIMM_CASES = [
    # name, timm's VisionTransformer kwargs (attn_head_dim: see timm_vit), image batch
    ('timm_avg_noclass', dict(img_size=[12, 20], patch_size=4, in_chans=3, num_classes=7, embed_dim=36, depth=2,
                              num_heads=3, mlp_ratio=2.5, class_token=False, global_pool='avg'), 2),
    ('timm_fcnorm_noqkvbias', dict(img_size=16, patch_size=4, in_chans=2, num_classes=5, embed_dim=40, depth=2,
                                   num_heads=5, mlp_ratio=1.5, qkv_bias=False, fc_norm=True), 3),
    ('timm_layerscale_noembedclass', dict(img_size=[8, 12], patch_size=2, in_chans=3, num_classes=6, embed_dim=32,
                                          depth=3, num_heads=4, mlp_ratio=2.0, init_values=0.1, no_embed_class=True),
     2),
    ('timm_noprojbias_avg_class', dict(img_size=[20, 12], patch_size=4, in_chans=1, num_classes=9, embed_dim=28,
                                       depth=2, num_heads=2, mlp_ratio=3.0, proj_bias=False, init_values=1e-5,
                                       no_embed_class=True, global_pool='avg', fc_norm=False), 3),
    ('timm_headdim', dict(img_size=12, patch_size=3, in_chans=3, num_classes=4, embed_dim=30, depth=2,
                          num_heads=4, mlp_ratio=2.0, attn_head_dim=11), 2),
]

# Run after every other case (one random stream), so that adding them left the others' fixtures as they were.
LATER_TIMM_CASES = [
    # heads narrower than embed_dim / num_heads (4 · 5 = 20 < 30), and 4 heads not dividing 30
    ('timm_headdim_narrow', dict(img_size=[8, 12], patch_size=4, in_chans=2, num_classes=5, embed_dim=30, depth=2,
                                 num_heads=4, mlp_ratio=2.0, attn_head_dim=5), 2),
]

TIMM_GRAD_PARAMS = ['patch_embed.proj.weight', 'cls_token', 'pos_embed', 'blocks.0.attn.qkv.weight',
                    'blocks.1.attn.proj.weight', 'blocks.1.ls2.gamma', 'blocks.0.mlp.fc1.weight', 'norm.weight',
                    'fc_norm.bias', 'head.weight']


def timm_vit(kwargs):
    args = dict(kwargs)
    head_dim = args.pop('attn_head_dim', None)
    if head_dim is not None:
        args['attn_layer'] = head_dim_attention(head_dim)
    if isinstance(args['img_size'], list):
        args['img_size'] = tuple(args['img_size'])
    return VisionTransformer(**args)


def timm_case(name, kwargs, batch, gen):
    model = timm_vit(kwargs)
    randomize(model, gen)
    folder = fresh_dir(name)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(folder, 'model.safetensors'))
    with open(os.path.join(folder, 'config.json'), 'w') as f:
        json.dump({'architecture': 'vit_custom', 'model_args': kwargs, 'timm_version': timm.__version__}, f, indent=2)
    size = kwargs['img_size'] if isinstance(kwargs['img_size'], list) else [kwargs['img_size']] * 2
    images = torch.randn(batch, kwargs['in_chans'], *size, generator=gen)
    dlogits = torch.randn(batch, kwargs['num_classes'], generator=gen)
    names = dict(model.named_parameters())
    grad_params = [n for n in TIMM_GRAD_PARAMS if n in names]
    # float32 forward too: the same code path a timm user runs (fused attention), reported in the metadata
    with torch.no_grad():
        logits32 = model.eval()(images)
    logits, grads = image_grads(model, images, dlogits, lambda m, x: m(x), grad_params)
    save_file({'input.images': images, 'input.dlogits': dlogits, 'output.logits': logits, **grads},
              os.path.join(folder, 'io.safetensors'),
              metadata={'description': f'timm {timm.__version__} VisionTransformer({json.dumps(kwargs)})',
                        'float32MaxError': repr(float((logits32.double() - logits).abs().max()))})
    check_size(folder)


# ---------------------------------------------------------------------------------------------
# timm resample_abs_pos_embed

RESAMPLE_CASES = [
    # name, old grid, new grid, prefix tokens, antialias
    ('resample_up_14_to_24', [14, 14], [24, 24], 1, False),
    ('resample_up_aa_5x7_to_9x6', [5, 7], [9, 6], 1, True),
    ('resample_down_11_to_4x6', [11, 11], [4, 6], 0, False),
    ('resample_down_aa_13x9_to_5x7', [13, 9], [5, 7], 2, True),
]


def resample_case(name, old, new, prefix, antialias, gen):
    D = 5
    posemb = torch.randn(1, prefix + old[0] * old[1], D, generator=gen)
    out = resample_abs_pos_embed(posemb, new_size=new, old_size=old, num_prefix_tokens=prefix,
                                 interpolation='bicubic', antialias=antialias)
    config = {'oldSize': old, 'newSize': new, 'numPrefixTokens': prefix, 'antialias': antialias}
    path = os.path.join(OUT, f'{name}.safetensors')
    save_file({'input.posEmbed': posemb, 'output.posEmbed': out.contiguous()}, path,
              metadata={'config': json.dumps(config),
                        'description': f'timm {timm.__version__} resample_abs_pos_embed (bicubic, float32 as timm runs it)'})
    print(f'{name}.safetensors: {os.path.getsize(path)} bytes')


# ---------------------------------------------------------------------------------------------
# Hugging Face transformers

HF_VIT_CASES = [
    # name, class, ViTConfig kwargs, batch, parameters (in-memory names) whose gradients are kept
    ('hf_vit_model', ViTModel, dict(hidden_size=36, num_hidden_layers=2, num_attention_heads=4, intermediate_size=50,
                                    image_size=12, patch_size=3, num_channels=2, qkv_bias=True), 2,
     ['embeddings.position_embeddings', 'layers.0.attention.k_proj.weight', 'layers.1.mlp.fc2.weight',
      'layernorm.weight']),
    ('hf_vit_classifier', ViTForImageClassification,
     dict(hidden_size=30, num_hidden_layers=3, num_attention_heads=5, intermediate_size=41, image_size=10,
          patch_size=2, num_channels=3, qkv_bias=False, num_labels=6), 3,
     ['vit.embeddings.cls_token', 'vit.embeddings.patch_embeddings.projection.weight', 'vit.layers.0.attention.q_proj.weight',
      'vit.layers.2.attention.o_proj.weight', 'vit.layers.1.layernorm_after.bias', 'classifier.weight']),
]


def checkpoint_names(model, folder):
    """In-memory parameter name → its name in the saved file (transformers 5 renames modules in memory
    but writes the checkpoint names: matched here by value, every parameter being random)."""
    saved = load_file(os.path.join(folder, 'model.safetensors'))
    out = {}
    for n, p in model.named_parameters():
        hits = [k for k, v in saved.items() if v.shape == p.shape and torch.equal(v, p.detach())]
        assert len(hits) == 1, (n, hits)
        out[n] = hits[0]
    return out


def hf_saved(name, cls, config, gen):
    """A random transformers model (eager attention, exact in float64) saved with save_pretrained into
    fixture folder `name`: (model, folder, in-memory name → checkpoint name)."""
    config._attn_implementation = 'eager'
    model = cls(config)
    randomize(model, gen)
    folder = fresh_dir(name)
    model.save_pretrained(folder)
    return model, folder, checkpoint_names(model, folder)


def hf_vit_case(name, cls, kwargs, batch, grad_params, gen):
    model, folder, names = hf_saved(name, cls, ViTConfig(hidden_act='gelu', layer_norm_eps=1e-12, **kwargs), gen)
    S = kwargs['image_size']
    images = torch.randn(batch, kwargs['num_channels'], S, S, generator=gen)
    if cls is ViTModel:
        T, D = (S // kwargs['patch_size']) ** 2 + 1, kwargs['hidden_size']
        dout = torch.randn(batch, T, D, generator=gen)
        pooled = {}

        def forward(m, x):
            out = m(pixel_values=x)
            pooled['output.poolerOutput'] = f64(out.pooler_output)
            return out.last_hidden_state
        output, grads = image_grads(model, images, dout, forward, grad_params)
        io = {'input.dLastHiddenState': dout, 'output.lastHiddenState': output, **pooled}
    else:
        dout = torch.randn(batch, kwargs['num_labels'], generator=gen)
        output, grads = image_grads(model, images, dout, lambda m, x: m(pixel_values=x).logits, grad_params)
        io = {'input.dlogits': dout, 'output.logits': output}
    grads = {(f'grad.param.{names[k[11:]]}' if k.startswith('grad.param.') else k): v for k, v in grads.items()}
    save_file({'input.images': images, **io, **grads}, os.path.join(folder, 'io.safetensors'),
              metadata={'description': f'transformers {transformers.__version__} {cls.__name__}'})
    check_size(folder)


def hf_bert_case(name, kwargs, batch, lengths, gen):
    model, folder, names = hf_saved(name, BertModel, BertConfig(hidden_act='gelu', layer_norm_eps=1e-12, **kwargs), gen)
    T = max(lengths)
    ids = torch.randint(0, kwargs['vocab_size'], (batch, T), generator=gen, dtype=torch.int64)
    types_ = torch.randint(0, kwargs['type_vocab_size'], (batch, T), generator=gen, dtype=torch.int64)
    mask = torch.tensor([[1 if t < n else 0 for t in range(T)] for n in lengths], dtype=torch.int64)
    ids = ids * mask  # padding ids 0, as a tokenizer's pad
    m = model.double().eval()
    out = m(input_ids=ids, token_type_ids=types_, attention_mask=mask)
    D = kwargs['hidden_size']
    dhidden, dpooled = torch.randn(batch, T, D, generator=gen), torch.randn(batch, D, generator=gen)
    ((out.last_hidden_state * f64(dhidden)).sum() + (out.pooler_output * f64(dpooled)).sum()).backward()
    grads = {f'grad.param.{names[n]}': f64(p.grad) for n, p in m.named_parameters()
             if n in BERT_GRAD_PARAMS or n.endswith('layer.1.output.LayerNorm.weight')}
    save_file({'input.inputIds': ids.to(torch.int32), 'input.tokenTypeIds': types_.to(torch.int32),
               'input.attentionMask': mask.to(torch.int32), 'input.dLastHiddenState': dhidden, 'input.dPoolerOutput': dpooled,
               'output.lastHiddenState': f64(out.last_hidden_state), 'output.poolerOutput': f64(out.pooler_output), **grads},
              os.path.join(folder, 'io.safetensors'),
              metadata={'description': f'transformers {transformers.__version__} BertModel'})
    check_size(folder)


BERT_GRAD_PARAMS = ['embeddings.word_embeddings.weight', 'embeddings.position_embeddings.weight',
                    'embeddings.token_type_embeddings.weight', 'embeddings.LayerNorm.bias',
                    'encoder.layer.0.attention.self.query.weight', 'encoder.layer.0.attention.self.value.bias',
                    'pooler.dense.weight']
BERT_CASES = [
    ('hf_bert', dict(vocab_size=53, hidden_size=36, num_hidden_layers=2, num_attention_heads=4, intermediate_size=47,
                     max_position_embeddings=24, type_vocab_size=3), 3, [13, 9, 5]),
    ('hf_bert_deep', dict(vocab_size=31, hidden_size=20, num_hidden_layers=3, num_attention_heads=5,
                          intermediate_size=33, max_position_embeddings=11, type_vocab_size=2), 2, [11, 7]),
]


def main():
    os.makedirs(OUT, exist_ok=True)
    gen = torch.Generator().manual_seed(14)
    torch.manual_seed(14)
    for name, kwargs, batch in TIMM_CASES:
        timm_case(name, kwargs, batch, gen)
    for case in RESAMPLE_CASES:
        resample_case(*case, gen)
    for case in HF_VIT_CASES:
        hf_vit_case(*case, gen)
    for name, kwargs, batch, lengths in BERT_CASES:
        hf_bert_case(name, kwargs, batch, lengths, gen)
    for name, kwargs, batch in LATER_TIMM_CASES:
        timm_case(name, kwargs, batch, gen)
    # every file reads back as written
    for root, _dirs, files in os.walk(OUT):
        for f in files:
            if f.endswith('.safetensors'):
                load_file(os.path.join(root, f))


if __name__ == '__main__':
    main()
