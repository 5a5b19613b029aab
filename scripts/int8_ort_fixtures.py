"""The onnxruntime side of test/int8_models.test.ts: onnxruntime's own dynamic int8 quantization
(onnxruntime.quantization.quantize_dynamic(weight_type=QuantType.QInt8), its defaults otherwise) of
two models with real weights, and how far it moves their outputs from float32:

  mnist   the MNIST demo's ViT (test/fixtures/int8/mnist_vit.safetensors: `nodeformer train`, seed 0,
          12 epochs; 139,018 parameters) on the demo's 2000 test digits, which
          scripts/int8_fixture_inputs.ts writes through the library (loadMnist, as `nodeformer eval`
          feeds them): test accuracy in float32 and int8, ‖logits_int8 − logits_fp32‖ / ‖logits_fp32‖
          and how many predictions int8 changes.
  ppocr   the two PP-OCRv4 transformer blocks of test/fixtures/ppocr (their weights, the first block's
          input for the three text lines): ‖out − ref‖ / ‖ref‖ of the second block's output in float32
          and int8 against the fixture's float64 recomputation (f64.block1).

The models are the PyTorch definitions (scripts/torch_models.py's ViTClassifier; reference/
torch_reference.py's EncoderBlock with SiLU and PP-OCR's LayerNorm eps) loaded strictly with the same
weights, exported to ONNX (opset 17, the benchmark's exporter settings), quantized, and run by
onnxruntime's CPU provider. Writes test/fixtures/int8/ort_int8.json (committed: the test needs no
Python). Run with the benchmark's Python (npm run bench:setup; pip install onnxruntime):

  .venv-bench/bin/python scripts/int8_ort_fixtures.py
"""
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "reference"))
FIXTURES = os.path.join(ROOT, "test", "fixtures")
MNIST_ARCH = dict(img_size=28, patch_size=7, in_channels=1, num_classes=10, d_model=64, num_heads=4, d_ff=128, depth=4)

import nf_bench_common as common  # noqa: E402


def rel(a, b):
    return float(np.linalg.norm((a - b).ravel()) / np.linalg.norm(b.ravel()))


def export(model, example, names, path):
    import torch

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, example, path, input_names=names, output_names=["out"],
                          dynamic_axes={names[0]: {0: "batch"}, "out": {0: "batch"}}, opset_version=17,
                          do_constant_folding=True, dynamo=False)


def sessions(model, example, names, tmp, tag):
    """onnxruntime sessions of the float32 export and of its quantize_dynamic(weight_type=QInt8)."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fp32, int8 = os.path.join(tmp, f"{tag}.onnx"), os.path.join(tmp, f"{tag}.int8.onnx")
    export(model, example, names, fp32)
    quantize_dynamic(fp32, int8, weight_type=QuantType.QInt8)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    make = lambda f: ort.InferenceSession(f, opts, providers=["CPUExecutionProvider"])  # noqa: E731
    return make(fp32), make(int8)


def mnist(tmp):
    import torch
    import torch_models

    inputs = os.path.join(tmp, "mnist_inputs.safetensors")
    tsx = os.path.join(ROOT, "node_modules", ".bin", "tsx")
    subprocess.run([tsx, os.path.join(ROOT, "scripts", "int8_fixture_inputs.ts"), inputs], check=True, cwd=ROOT)
    data = common.load_safetensors(inputs)
    images, labels = data["images"], data["labels"]
    model = torch_models.ViTClassifier(**MNIST_ARCH).eval()
    common.load_weights(model, os.path.join(FIXTURES, "int8", "mnist_vit.safetensors"))
    s32, s8 = sessions(model, (torch.from_numpy(images[:2].copy()),), ["images"], tmp, "mnist")
    l32, l8 = (s.run(None, {"images": images})[0] for s in (s32, s8))
    with torch.no_grad():
        torch_logits = model(torch.from_numpy(images.copy())).numpy()
    p32, p8 = l32.argmax(1), l8.argmax(1)
    return {
        "count": int(len(labels)),
        "fp32Accuracy": float((p32 == labels).mean()),
        "int8Accuracy": float((p8 == labels).mean()),
        "int8LogitsRelDiff": rel(l8, l32),
        "int8ChangedPredictions": int((p8 != p32).sum()),
        "fp32AgainstPyTorch": rel(l32, torch_logits),
    }


def ppocr(tmp):
    import torch
    import torch.nn as nn
    import torch_reference as ref

    meta = json.load(open(os.path.join(FIXTURES, "ppocr", "meta.json")))
    c = meta["config"]
    blocks = nn.ModuleList()
    for _ in range(2):
        b = ref.EncoderBlock(c["dModel"], c["numHeads"], c["dFF"], norm_first=True, eps=c["eps"])
        b.mlp.act = nn.SiLU()
        blocks.append(b)
    state = {k[len("blocks."):]: torch.from_numpy(v.copy()) for k, v in
             common.load_safetensors(os.path.join(FIXTURES, "ppocr", "blocks.safetensors")).items()}
    blocks.load_state_dict(state, strict=True)
    model = nn.Sequential(*blocks).eval()
    io = common.load_safetensors(os.path.join(FIXTURES, "ppocr", "io.safetensors"))
    x, ref_out = io["input.x"], io["f64.block1"]
    s32, s8 = sessions(model, (torch.from_numpy(x[:1].copy()),), ["x"], tmp, "ppocr")
    y32, y8 = (s.run(None, {"x": x})[0] for s in (s32, s8))
    return {"fp32RelErr": rel(y32, ref_out), "int8RelErr": rel(y8, ref_out)}


def main():
    import onnxruntime

    common.torch_setup(2)
    with tempfile.TemporaryDirectory() as tmp:
        out = {
            "what": "onnxruntime.quantization.quantize_dynamic(weight_type=QuantType.QInt8) of the ONNX export, "
                    "onnxruntime CPU provider; see scripts/int8_ort_fixtures.py",
            "onnxruntime": onnxruntime.__version__,
            "mnist": mnist(tmp),
            "ppocr": ppocr(tmp),
        }
    path = os.path.join(FIXTURES, "int8", "ort_int8.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
