#!/usr/bin/env python3
"""Weights files exchanged between volt (C++) and Python's torch, both directions.

Needs torch and the helper program tests/serialization/interop/weights_tool.cpp (CMake target
volt_weights_tool). Run by ctest as volt.serialization.python when the CMake cache variable VOLT_PYTHON is set,
or by hand (e.g. on the GPU machine):

    python3 tests/python/check_weights.py --tool build/tests/volt_weights_tool --workdir /tmp/volt-weights

Exits non-zero with a message on the first mismatch.
"""
import argparse
import collections
import os
import sys

from volt_checks import expect, run

import torch


def reference_weights():
    """What weights_tool's reference_weights() writes."""
    return collections.OrderedDict([
        ("layer.weight", torch.arange(12, dtype=torch.float32).reshape(3, 4) / 8.0),
        ("layer.bias", torch.arange(3, dtype=torch.float64) - 1.5),
        ("bn.num_batches_tracked", torch.tensor(7, dtype=torch.int64)),
        ("half", torch.arange(5, dtype=torch.float32).to(torch.float16) / 4.0),
        ("bf16", torch.arange(4, dtype=torch.float32).to(torch.bfloat16) * 2.0),
        ("mask", torch.arange(6).remainder(2).eq(0)),
        ("transposed", torch.arange(6, dtype=torch.float32).reshape(2, 3).t()),
        ("big", torch.tensor([1 << 40, -(1 << 35)], dtype=torch.int64)),
        ("empty", torch.empty(0, 3)),
    ])


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def check_dicts(loaded, expected, what):
    expect(list(loaded.keys()) == list(expected.keys()), f"{what}: keys and order {list(loaded.keys())}")
    for key, value in expected.items():
        expect(isinstance(loaded[key], torch.Tensor) and same(loaded[key], value),
               f"{what}: {key} ({value.dtype}, {tuple(value.shape)}) equal")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    path = lambda name: os.path.join(args.workdir, name)
    print("torch", torch.__version__)

    # 1. volt -> Python: torch.load, with and without weights_only.
    run(args.tool, "write", path("from_volt.pt"))
    for weights_only in (True, False):
        loaded = torch.load(path("from_volt.pt"), weights_only=weights_only)
        expect(isinstance(loaded, dict), f"torch.load(weights_only={weights_only}) gives a dict ({type(loaded).__name__})")
        check_dicts(loaded, reference_weights(), f"volt file, weights_only={weights_only}")
    loaded = torch.load(path("from_volt.pt"))  # torch's default (weights_only=True since 2.6)
    expect(len(loaded) == len(reference_weights()), "torch.load with the default arguments")

    # 2. Python -> volt -> Python: every dtype survives a volt load and save.
    torch.save(reference_weights(), path("from_python.pt"))
    run(args.tool, "roundtrip", path("from_python.pt"), path("roundtrip.pt"))
    check_dicts(torch.load(path("roundtrip.pt"), weights_only=True), reference_weights(), "Python file through volt")

    # 3. A real model: Python's state_dict (OrderedDict with _metadata, views sharing storage) loaded strictly
    #    into the same C++ model gives the same outputs.
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    model = torch.nn.Module()
    model.net = net
    model.train()
    for _ in range(3):  # non-trivial running statistics and num_batches_tracked
        net(torch.randn(8, 4))
    model.eval()
    torch.save(model.state_dict(), path("python_model.pt"))
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    x = torch.arange(20, dtype=torch.float32).reshape(5, 4) / 10.0 - 1.0
    with torch.no_grad():
        expected = net(x)
    for device in devices:
        run(args.tool, "forward", path("python_model.pt"), path(f"volt_output_{device}.pt"), device)
        output = torch.load(path(f"volt_output_{device}.pt"), weights_only=True)["output"]
        expect(torch.allclose(output, expected, rtol=1e-5, atol=1e-6),
               f"C++ model with Python's weights on {device} gives Python's outputs (max diff "
               f"{(output - expected).abs().max().item():.2e})")

    # 4. Errors name the missing keys.
    broken = model.state_dict()
    del broken["net.0.bias"]
    torch.save(broken, path("broken.pt"))
    message = run(args.tool, "check-error", path("broken.pt"))
    expect('Missing key(s) in state_dict: "net.0.bias"' in message and "broken.pt" in message,
           "missing key named: " + message.strip().replace("\n", " "))
    print("check_weights: all checks passed")


if __name__ == "__main__":
    main()
