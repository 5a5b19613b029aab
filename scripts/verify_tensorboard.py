#!/usr/bin/env python3
"""Checks the event files of nodeformer's SummaryWriter with TensorBoard's own reader (EventAccumulator).

    python3 -m venv /work/venv-tb && /work/venv-tb/bin/pip install tensorboard
    npx tsx scripts/tensorboard_demo_run.ts /tmp/tb-verify
    /work/venv-tb/bin/python scripts/verify_tensorboard.py /tmp/tb-verify

scripts/tensorboard_demo_run.ts writes the run and expected.json (every value it logged); this script
reads every run folder with tensorboard.backend.event_processing.event_accumulator and checks each
value: scalars (float32), addScalars' runs, images (PNG bytes, width, height), histograms (bucket
limits and counts against torch's make_histogram rule with TensorFlow's default bins, computed here
with numpy; min, max, num, sum, sum of squares), text (the text plugin's string tensor), hparams
(the plugin's experiment, session start and end records, and the metric scalars), and the scalars and
histograms of the fit() run. Exits 1 on the first mismatch, else prints what it checked.
"""
import base64
import json
import os
import sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

CHECKS = []


def check(cond, what):
    if not cond:
        sys.exit(f"MISMATCH: {what}")
    CHECKS.append(what)


def load(path):
    ea = event_accumulator.EventAccumulator(path, size_guidance={k: 0 for k in ("scalars", "images", "histograms", "tensors")})
    ea.Reload()
    return ea


def f32(x):
    return float(np.float32(x))


def default_bins():
    """torch.utils.tensorboard.SummaryWriter's default_bins (TensorFlow's)."""
    v, pos = 1e-12, []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return [-x for x in reversed(pos)] + [0.0] + pos


def expected_histogram(values):
    """torch.utils.tensorboard.summary.make_histogram with the default bins."""
    values = np.asarray(values, dtype=np.float32)
    counts, limits = np.histogram(values, bins=default_bins())
    nonzero = np.nonzero(counts)[0]
    start, end = int(nonzero[0]), int(nonzero[-1]) + 1
    counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
    return limits[start:end + 1], counts, values


def check_scalars(ea, tag, points, where):
    got = [(e.step, e.value) for e in ea.Scalars(tag)]
    check(got == [(s, f32(v)) for s, v in points], f"{where} scalars {tag} ({len(points)} points)")


def verify_records(root, exp):
    ea = load(root)
    for tag, points in exp["scalars"].items():
        check_scalars(ea, tag, points, "records")
    multi = exp["scalarsMulti"]
    for key, points in multi["runs"].items():
        run = os.path.join(root, multi["main"].replace("/", "_") + "_" + key)
        check_scalars(load(run), multi["main"], points, f"addScalars run {os.path.basename(run)}")
    for im in exp["images"]:
        (e,) = ea.Images(im["tag"])
        check(e.step == im["step"] and e.width == im["width"] and e.height == im["height"], f"image {im['tag']} step and size {im['width']}x{im['height']}")
        check(e.encoded_image_string == base64.b64decode(im["png"]), f"image {im['tag']} PNG bytes")
    events = ea.Histograms("demo/drift")
    check([e.step for e in events] == [h["step"] for h in exp["histograms"]], "histogram steps")
    for e, h in zip(events, exp["histograms"]):
        limits, counts, values = expected_histogram(h["values"])
        hv = e.histogram_value
        check(list(hv.bucket_limit) == list(limits) and list(hv.bucket) == list(counts.astype(float)),
              f"histogram step {h['step']}: {len(counts)} buckets")
        check((hv.min, hv.max, hv.num) == (float(values.min()), float(values.max()), len(values)), f"histogram step {h['step']}: min, max, num")
        v64 = values.astype(np.float64)
        check(abs(hv.sum - v64.sum()) < 1e-9 * max(1, abs(v64.sum())) and abs(hv.sum_squares - v64.dot(v64)) < 1e-9 * v64.dot(v64),
              f"histogram step {h['step']}: sum, sum of squares")
    for t in exp["texts"]:
        (e,) = ea.Tensors(t["tag"] + "/text_summary")
        check(e.step == t["step"] and e.tensor_proto.string_val[0].decode("utf-8") == t["text"], f"text {t['tag']}")
        check(ea.SummaryMetadata(t["tag"] + "/text_summary").plugin_data.plugin_name == "text", f"text {t['tag']} plugin")
    verify_hparams(os.path.join(root, exp["hparams"]["run"]), exp["hparams"])


def verify_hparams(run, exp):
    ea = load(run)
    content = {tag: plugin_data_pb2.HParamsPluginData.FromString(c) for tag, c in ea.PluginTagToContent("hparams").items()}
    experiment = content["_hparams_/experiment"].experiment
    types = {bool: api_pb2.DATA_TYPE_BOOL, str: api_pb2.DATA_TYPE_STRING, int: api_pb2.DATA_TYPE_FLOAT64, float: api_pb2.DATA_TYPE_FLOAT64}
    check([(i.name, i.type) for i in experiment.hparam_infos] == [(k, types[type(v)]) for k, v in exp["hparams"].items()],
          "hparams experiment: names and types")
    check([m.name.tag for m in experiment.metric_infos] == list(exp["metrics"]), "hparams experiment: metric tags")
    start = content["_hparams_/session_start_info"].session_start_info.hparams
    got = {k: start[k].WhichOneof("kind") and getattr(start[k], start[k].WhichOneof("kind")) for k in start}
    check(got == exp["hparams"], "hparams session start: values")
    check(content["_hparams_/session_end_info"].session_end_info.status == api_pb2.STATUS_SUCCESS, "hparams session end: STATUS_SUCCESS")
    for tag, v in exp["metrics"].items():
        check_scalars(ea, tag, [(0, v)], "hparams metric")


def verify_fit(root, exp):
    ea = load(root)
    keys = {"loss/train": "loss", "loss/validation": "valLoss", "accuracy/train": "accuracy", "accuracy/validation": "valAccuracy",
            "learning_rate": "lr", "throughput/samples_per_second": "samplesPerSecond"}
    for tag, key in keys.items():
        check_scalars(ea, tag, [(h["epoch"], h[key]) for h in exp["history"]], "fit")
    epochs = [h["epoch"] for h in exp["history"]]
    for name in exp["parameters"]:
        for kind in ("weights", "gradients"):
            check([e.step for e in ea.Histograms(f"{kind}/{name}")] == epochs, f"fit histograms {kind}/{name}")


def main():
    logdir = sys.argv[1] if len(sys.argv) > 1 else "/tmp/tb-verify"
    exp = json.load(open(os.path.join(logdir, "expected.json")))
    verify_records(os.path.join(logdir, "records"), exp["records"])
    verify_fit(os.path.join(logdir, "fit"), exp["fit"])
    print(f"OK: {len(CHECKS)} checks passed with tensorboard's EventAccumulator")
    for c in CHECKS:
        print("  " + c)


if __name__ == "__main__":
    main()
