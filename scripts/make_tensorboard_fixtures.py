#!/usr/bin/env python3
"""Writes test/fixtures/tensorboard.json: what torch.utils.tensorboard writes, for the SummaryWriter tests.

Run with a venv that has torch, tensorboard and pillow (the writer imports tensorboard's protos):
    python3 -m venv /work/venv-tb && /work/venv-tb/bin/pip install tensorboard /opt/wheels/torch-*.whl
    /work/venv-tb/bin/python scripts/make_tensorboard_fixtures.py

Contents (deterministic: fixed seeds and wall times):
  records:    framed TFRecord bytes (hex) of events written by torch's SummaryWriter with a given
              walltime (scalars, text, images as PNG), with the arguments that made them;
  histograms: float32 inputs (awkward sizes, zeros, tiny and huge magnitudes) and the HistogramProto
              fields of torch.utils.tensorboard.summary.histogram with SummaryWriter's default bins;
  hparams:    the Summary bytes (hex) of the experiment, session start and end records of add_hparams,
              with the session start's hyperparameter values.
"""
import json
import os
import tempfile

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams, histogram

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "test", "fixtures", "tensorboard.json")
WALL = 1700000000.25


def records(path):
    """The framed records of a TFRecord file, as bytes each (framing included)."""
    data = open(path, "rb").read()
    out, at = [], 0
    while at < len(data):
        n = int.from_bytes(data[at:at + 8], "little")
        out.append(data[at:at + 16 + n])
        at += 16 + n
    return out


def written_records():
    cases = []
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as d:
        w = SummaryWriter(log_dir=d)
        calls = [
            ("scalar", {"tag": "loss/train", "value": 0.123456789, "step": 7}),
            ("scalar", {"tag": "lr", "value": -3.5e-8, "step": 0}),
            ("scalar", {"tag": "big", "value": 1.5e30, "step": 123456789012}),
            ("text", {"tag": "notes", "text": "héllo **markdown** ✓ " * 3, "step": 3}),
        ]
        for kind, a in calls:
            if kind == "scalar":
                w.add_scalar(a["tag"], a["value"], a["step"], walltime=WALL)
            else:
                w.add_text(a["tag"], a["text"], a["step"], walltime=WALL)
            cases.append({"kind": kind, **a})
        for c, h, wd in [(3, 5, 7), (4, 9, 2)]:
            img = rng.integers(0, 256, size=(c, h, wd), dtype=np.uint8)
            w.add_image(f"img{c}", torch.from_numpy(img), 2, walltime=WALL)
            cases.append({"kind": "image", "tag": f"img{c}", "step": 2, "channels": c, "height": h, "width": wd})
        w.close()
        files = [f for f in os.listdir(d) if f.startswith("events.out.tfevents.")]
        recs = records(os.path.join(d, files[0]))[1:]  # the first is file_version with the current time
    assert len(recs) == len(cases)
    for case, r in zip(cases, recs):
        case["record"] = r.hex()
    return cases


def histogram_cases():
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as d:
        w = SummaryWriter(log_dir=d)
        default_bins = w.default_bins  # what add_histogram(bins="tensorflow") uses
        w.close()
    inputs = [
        rng.standard_normal(1000).astype(np.float32),
        (rng.standard_normal(37) * 1e-3).astype(np.float32),
        np.array([0.0], dtype=np.float32),
        np.array([2.5], dtype=np.float32),
        np.array([-7.0, -7.0, -7.0], dtype=np.float32),
        np.concatenate([np.zeros(5), rng.uniform(-1e6, 1e6, 11), [1e-13, -1e-13, 1e-12]]).astype(np.float32),
        rng.uniform(0, 1, 4097).astype(np.float32),
    ]
    out = []
    for x in inputs:
        h = histogram("h", x, default_bins).value[0].histo
        out.append({"values": [float(t) for t in x], "min": h.min, "max": h.max, "num": h.num, "sum": h.sum,
                    "sumSquares": h.sum_squares, "bucketLimit": list(h.bucket_limit), "bucket": list(h.bucket)})
    return out


def hparams_case():
    # No boolean here: torch tests isinstance(v, (int, float)) first, so it writes True as the number 1.0
    # (DATA_TYPE_FLOAT64); nodeformer writes booleans as bool_value with DATA_TYPE_BOOL, as the proto intends.
    hp = {"lr": 0.01, "optimizer": "adamw", "depth": 4}
    metrics = {"hparam/accuracy": 0.9, "hparam/loss": 0.25}
    exp, ssi, sei = hparams(hp, metrics)
    return {"hparams": hp, "metrics": metrics, "experiment": exp.SerializeToString().hex(),
            "sessionStartInfo": ssi.SerializeToString().hex(), "sessionEndInfo": sei.SerializeToString().hex()}


def main():
    fixture = {"wallTime": WALL, "records": written_records(), "histograms": histogram_cases(), "hparams": hparams_case()}
    with open(OUT, "w") as f:
        json.dump(fixture, f)
        f.write("\n")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
