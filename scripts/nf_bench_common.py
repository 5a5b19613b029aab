"""Shared by the benchmark's Python peers (export_onnx.py, torch_train_bench.py, blas_gemm_bench.py).

- load_reference(): the PyTorch reference spec, found as scripts/make_fixtures.py finds it:
  $NF_TORCH_REFERENCE, else shared/reference/torch_reference.py in the nearest ancestor of the
  repository that has one.
- build_model(arch): the reference model for a benchmark architecture (the JSON the harness passes,
  see bench/specs.ts), loaded with our model's weights by load_weights().
- blas_library(): which BLAS shared library this process has mapped (to say what a peer ran on).
- emit(): one JSON line on stdout, the protocol every benchmark child process speaks.
"""
import importlib.util
import json
import os
import sys

from reference_path import reference_path


def load_reference():
    path = reference_path()
    if not os.path.isfile(path):
        fail(f"reference spec not found at {path} (set NF_TORCH_REFERENCE)")
    spec = importlib.util.spec_from_file_location("torch_reference", path)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    return ref


def build_model(ref, arch):
    """arch: {"kind": "vit", imgSize, patchSize, inChannels, numClasses, dModel, numHeads, dFF, depth}
    or {"kind": "seq2seq", vocab, maxLen, dModel, numHeads, dFF, depth} (bench/specs.ts)."""
    common = dict(d_model=arch["dModel"], num_heads=arch["numHeads"], d_ff=arch["dFF"], depth=arch["depth"])
    if arch["kind"] == "vit":
        return ref.ViTClassifier(img_size=arch["imgSize"], patch_size=arch["patchSize"], in_channels=arch["inChannels"],
                                 num_classes=arch["numClasses"], **common)
    if arch["kind"] == "seq2seq":
        return ref.Transformer(arch["vocab"], arch["vocab"], arch["maxLen"], pad_idx=0, **common)
    fail(f"unknown architecture kind {arch['kind']!r}")


def load_weights(ref, model, path):
    """Copies every tensor of a safetensors file (our model's stateDict) into the model (strict)."""
    import torch

    tensors = ref.load_safetensors(path)
    state = {k: torch.from_numpy(v.copy()) for k, v in tensors.items()}
    model.load_state_dict(state, strict=True)


def blas_library():
    """The BLAS shared library mapped into this process: {"path", "kind"} where kind is "openblas",
    "blis", "mkl", "reference" (netlib's libblas3, very slow) or "none"."""
    try:
        with open("/proc/self/maps") as f:
            libs = sorted({line.split()[-1] for line in f if ".so" in line})
    except OSError:
        return {"path": None, "kind": "unknown"}
    for key, kind in (("openblas", "openblas"), ("blis", "blis"), ("mkl", "mkl"), ("libblas.so", "reference")):
        hit = next((lib for lib in libs if key in lib), None)
        if hit:
            return {"path": hit, "kind": kind}
    return {"path": None, "kind": "none"}


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def fail(message):
    emit("error", message=message)
    sys.exit(1)
