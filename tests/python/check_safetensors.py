#!/usr/bin/env python3
"""safetensors files exchanged between volt (C++) and Python's safetensors package, both directions.

Needs torch, safetensors and the helper program tests/serialization/interop/safetensors_tool.cpp (CMake target
volt_safetensors_tool). Run by ctest as volt.serialization.safetensors_python when the CMake cache variable
VOLT_PYTHON is set (skipped, exit code 77, when that Python lacks safetensors), or by hand:

    python3 tests/python/check_safetensors.py --tool build/tests/volt_safetensors_tool --workdir /tmp/volt-st

Exits non-zero with a message on the first mismatch.
"""
import argparse
import collections
import json
import os
import struct
import sys

from volt_checks import expect, run

import torch

try:
    import safetensors
    from safetensors.torch import load_file, save_file
except ImportError:
    print("SKIP: this Python has no safetensors package (tools/install-python.sh installs it)")
    sys.exit(77)


def reference_tensors(names):
    """What safetensors_tool's reference_tensors() writes, restricted to the names it reports."""
    everything = torch.arange(256, dtype=torch.int64).to(torch.uint8)
    t = collections.OrderedDict([
        ("layer.weight", torch.arange(12, dtype=torch.float32).reshape(3, 4) / 8.0),
        ("f64", torch.arange(3, dtype=torch.float64) - 1.5),
        ("f16", (torch.arange(5, dtype=torch.float32) / 4.0).to(torch.float16)),
        ("bf16", (torch.arange(4, dtype=torch.float32) * 2.0).to(torch.bfloat16)),
        ("i64", torch.tensor([1 << 40, -(1 << 35)], dtype=torch.int64)),
        ("i32", torch.arange(-3, 3, dtype=torch.int32)),
        ("i16", (torch.arange(-3, 3) * 1000).to(torch.int16)),
        ("i8", everything.view(torch.int8)),
        ("u8", everything.clone()),
        ("bool", torch.arange(6).remainder(2).eq(0)),
        ("c64", torch.view_as_complex(torch.arange(6, dtype=torch.float32).reshape(3, 2))),
        ("scalar", torch.tensor(2.5)),
        ("empty", torch.empty(0, 3)),
        ("transposed", torch.arange(6, dtype=torch.float32).reshape(2, 3).t()),
    ])
    for name, dtype in [("Float8_e5m2", "float8_e5m2"), ("Float8_e4m3fn", "float8_e4m3fn"),
                        ("Float8_e5m2fnuz", "float8_e5m2fnuz"), ("Float8_e4m3fnuz", "float8_e4m3fnuz"),
                        ("Float8_e8m0fnu", "float8_e8m0fnu"), ("UInt16", "uint16"), ("UInt32", "uint32"),
                        ("UInt64", "uint64"), ("Float4_e2m1fn_x2", "float4_e2m1fn_x2")]:
        if hasattr(torch, dtype):
            t[name] = everything.view(getattr(torch, dtype))
    missing = [name for name in t if name not in names]
    extra = [name for name in names if name not in t]
    expect(not extra, f"the C++ tool writes no tensor Python does not know ({extra})")
    if missing:
        print("note: this volt build's LibTorch lacks", missing)
    # Separate storage per tensor: save_file refuses tensors that share memory.
    return collections.OrderedDict((k, v.contiguous().clone()) for k, v in t.items() if k in names)


def bits(tensor):
    """The tensor's bytes, for bit-exact comparison of every dtype (NaN patterns included)."""
    return tensor.contiguous().view(-1).view(torch.uint8) if tensor.numel() else torch.empty(0, dtype=torch.uint8)


def check_dicts(loaded, expected, what):
    expect(sorted(loaded.keys()) == sorted(expected.keys()), f"{what}: keys {sorted(loaded.keys())}")
    for key, value in expected.items():
        got = loaded[key]
        expect(got.dtype == value.dtype and got.shape == value.shape and torch.equal(bits(got), bits(value)),
               f"{what}: {key} ({value.dtype}, {tuple(value.shape)}) bit-exact")


def header(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    return length, json.loads(data[8:8 + length]), data


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    path = lambda name: os.path.join(args.workdir, name)
    print("torch", torch.__version__, "safetensors", safetensors.__version__)
    reference = reference_tensors(run(args.tool, "names").split())

    # 1. volt -> Python: load_file gives every tensor bit-exact, safe_open the metadata; the file is the very
    #    bytes save_file writes for the same tensors and metadata.
    run(args.tool, "write", path("from_volt.safetensors"))
    check_dicts(load_file(path("from_volt.safetensors")), reference, "volt file read by safetensors.torch.load_file")
    with safetensors.safe_open(path("from_volt.safetensors"), framework="pt") as f:
        expect(f.metadata() == {"format": "pt"}, f"metadata read by safe_open: {f.metadata()}")
    save_file(reference, path("from_python.safetensors"), metadata={"format": "pt"})
    length, _, volt_bytes = header(path("from_volt.safetensors"))
    _, _, python_bytes = header(path("from_python.safetensors"))
    expect(length % 8 == 0, f"header length {length} is a multiple of 8")
    expect(volt_bytes == python_bytes, f"volt's file is byte for byte save_file's ({len(volt_bytes)} bytes)")

    # 2. Python -> volt -> Python: every dtype survives a volt load (memory-mapped) and save, bit-exact.
    run(args.tool, "roundtrip", path("from_python.safetensors"), path("roundtrip.safetensors"))
    check_dicts(load_file(path("roundtrip.safetensors")), reference, "Python file through volt")
    with open(path("roundtrip.safetensors"), "rb") as f:
        expect(f.read() == python_bytes, "volt rewrites Python's file byte for byte")

    # 3. A real model: Python's state_dict loaded strictly into the same C++ model gives the same outputs.
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    model = torch.nn.Module()
    model.net = net
    model.train()
    for _ in range(3):  # non-trivial running statistics and num_batches_tracked
        net(torch.randn(8, 4))
    model.eval()
    save_file(model.state_dict(), path("python_model.safetensors"))
    x = torch.arange(20, dtype=torch.float32).reshape(5, 4) / 10.0 - 1.0
    with torch.no_grad():
        expected = net(x)
    run(args.tool, "forward", path("python_model.safetensors"), path("volt_output.safetensors"))
    output = load_file(path("volt_output.safetensors"))["output"]
    expect(torch.allclose(output, expected, rtol=1e-5, atol=1e-6),
           f"C++ model with Python's weights gives Python's outputs (max diff {(output - expected).abs().max().item():.2e})")

    # 4. Errors name the missing keys and the file.
    broken = model.state_dict()
    del broken["net.0.bias"]
    save_file(broken, path("broken.safetensors"))
    message = run(args.tool, "check-error", path("broken.safetensors"))
    expect('Missing key(s) in state_dict: "net.0.bias"' in message and "broken.safetensors" in message,
           "missing key named: " + message.strip().replace("\n", " "))
    print("check_safetensors: all checks passed")


if __name__ == "__main__":
    main()
