#!/usr/bin/env python3
"""The Chrome trace volt::PyTorchProfiler writes for a Fashion-MNIST fit, loaded with Python's json.

Needs the helper program tests/trainer/interop/profile_tool.cpp (CMake target volt_profile_tool). Run by ctest as
volt.trainer.profiler_trace_python when VOLT_PYTHON is set (on CUDA when this Python's torch sees a GPU), or by
hand:

    python3 tests/python/check_profiler_trace.py --tool build/tests/volt_profile_tool --workdir /tmp/volt-prof

Checks that each trace is one JSON object whose traceEvents hold the training step's operators (the Linear
layers' aten::addmm / aten::mm, the backward functions), the Trainer's training_step annotation, and, on CUDA,
kernels. Exits 77 (a skip for ctest) when the tool skips (no Fashion-MNIST), non-zero with a message on a mismatch.
"""
import argparse
import json
import shutil
import subprocess
import sys

from volt_checks import expect


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    args = parser.parse_args()
    if args.device == "auto":  # the GPU machine's run (tools/gpu-check.sh) profiles on CUDA
        try:
            import torch

            args.device = "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:
            args.device = "cpu"
    print("device:", args.device)
    shutil.rmtree(args.workdir, ignore_errors=True)
    run = subprocess.run([args.tool, args.workdir, args.device], capture_output=True, text=True)
    print(run.stdout, end="")
    if run.returncode == 77:
        sys.exit(77)
    expect(run.returncode == 0, f"the tool ran (exit {run.returncode}: {run.stderr.strip()})")
    traces = [line[len("trace: "):] for line in run.stdout.splitlines() if line.startswith("trace: ")]
    expect(len(traces) == 1, f"one trace for the schedule's one active window (got {traces})")
    with open(traces[0]) as f:
        trace = json.load(f)
    expect(isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list), "the trace is Chrome's object form")
    events = [e for e in trace["traceEvents"] if isinstance(e, dict)]
    names = {e.get("name") for e in events}
    complete = [e for e in events if e.get("ph") == "X"]
    expect(complete and all(isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float))
                            for e in complete), "complete events have numeric ts and dur")
    expect("aten::addmm" in names or "aten::mm" in names, "the Linear layers' matmuls are in the trace")
    expect(any(n and n.startswith("autograd::engine::evaluate_function") or (n and n.endswith("Backward0"))
               for n in names), "the backward pass's functions are in the trace")
    expect(any(n and n.endswith(".training_step") for n in names), "the Trainer's training_step annotation is there")
    addmm = sum(1 for e in complete if e.get("name") == "aten::addmm")
    expect(addmm >= 4, f"two active steps of two Linear layers: at least 4 aten::addmm (got {addmm})")
    if args.device == "cuda":
        expect(any(e.get("cat") == "kernel" for e in events), "CUDA kernels are in the trace")


if __name__ == "__main__":
    main()
