"""Exports a benchmark model to ONNX for the onnxruntime-node peer, with our model's weights.

  python scripts/export_onnx.py --arch '<json>' --weights W.safetensors --inputs I.safetensors --out M.onnx \
      [--int8-out M.int8.onnx]

The model is scripts/torch_models.py's (the PyTorch peer's own model) built from --arch (see
bench/specs.ts) and loaded with the safetensors weights that the harness saved from our model's
stateDict(); it is traced on the example inputs (images, or src and tgt token ids) with a dynamic
batch axis by the TorchScript exporter (dynamo=False: the dynamo exporter needs onnxscript),
opset 17 (LayerNormalization), constant folding on. Then onnxruntime's Python package, when
present, checks the graph's logits against PyTorch's before the file is kept. With --int8-out, it also
writes onnxruntime's own dynamic int8 quantization of that graph there, as a user quantizes for CPU
inference: onnxruntime.quantization.quantize_dynamic(weight_type=QuantType.QInt8), its defaults
otherwise (the benchmark's onnxruntime int8 peer; needs the onnxruntime package).
Prints JSON lines: {"event": "result", "seconds": ..., "maxAbsDiff": ... | null} or {"event": "error"}.
"""
import argparse
import json
import os
import time
import warnings

import nf_bench_common as common
import torch_models


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", required=True, help="architecture JSON (bench/specs.ts)")
    ap.add_argument("--weights", required=True, help="safetensors of the model's stateDict")
    ap.add_argument("--inputs", required=True, help="safetensors with images, or src and tgt")
    ap.add_argument("--out", required=True, help="the .onnx file to write")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--int8-out", help="also write onnxruntime's quantize_dynamic(weight_type=QInt8) of the graph here")
    args = ap.parse_args()

    import torch

    common.torch_setup(args.threads)
    t0 = time.time()
    arch = json.loads(args.arch)
    model = torch_models.build_model(arch).eval()
    common.load_weights(model, args.weights)
    example, _ = common.load_inputs(arch, args.inputs)
    names = ["images"] if arch["kind"] == "vit" else ["src", "tgt"]
    axes = {**{n: {0: "batch"} for n in names}, "logits": {0: "batch"}}
    tmp = args.out + ".tmp"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = model(*example)
        torch.onnx.export(model, example, tmp, input_names=names, output_names=["logits"], dynamic_axes=axes,
                          opset_version=17, do_constant_folding=True, dynamo=False)
    diff = None
    try:
        import onnxruntime
    except ImportError:
        onnxruntime = None
    if onnxruntime is not None:
        session = onnxruntime.InferenceSession(tmp, providers=["CPUExecutionProvider"])
        got = session.run(None, {n: x.numpy() for n, x in zip(names, example)})[0]
        diff = float(abs(got - expected.numpy()).max())
        if not diff <= 1e-3 * max(1.0, float(expected.abs().max())):
            common.fail(f"the ONNX graph disagrees with PyTorch: max |diff| {diff:g}")
    if args.int8_out:
        if onnxruntime is None:
            common.fail("--int8-out needs the onnxruntime package (pip install onnxruntime)")
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(tmp, args.int8_out + ".tmp", weight_type=QuantType.QInt8)
        os.replace(args.int8_out + ".tmp", args.int8_out)
    os.replace(tmp, args.out)
    common.emit("result", seconds=time.time() - t0, maxAbsDiff=diff)


if __name__ == "__main__":
    main()
