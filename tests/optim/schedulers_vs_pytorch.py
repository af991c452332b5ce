"""Compares volt::optim's schedulers with torch.optim.lr_scheduler step by step.

Runs the cases of schedulers_values.cpp through PyTorch and the program given as --values, and checks that
every learning rate (and OneCycleLR's momentum) agrees to 1e-12 relative (PyTorch computes some rates
recursively, volt from the closed forms: the two differ by rounding only). Exit status 0 when all agree.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import warnings

import torch
from torch.optim import SGD, Adam, RMSprop
from torch.optim.lr_scheduler import CosineAnnealingLR, LambdaLR, LinearLR, OneCycleLR, ReduceLROnPlateau, SequentialLR


def parameter():
    return torch.nn.Parameter(torch.zeros(2))


def run(name, scheduler, optimizer, steps, momentum=False):
    rows = []
    for step in range(steps + 1):
        if step > 0:
            optimizer.step()
            scheduler.step()
        values = [group["lr"] for group in optimizer.param_groups]
        if momentum:
            group = optimizer.param_groups[0]
            values.append(group["momentum"] if "momentum" in group and "betas" not in group else group["betas"][0])
        rows.append((name, step, values))
    return rows


def pytorch_rows():
    rows = []
    sgd = SGD([parameter()], lr=0.1)
    rows += run("lambda", LambdaLR(sgd, lambda epoch: 0.95**epoch), sgd, 12)
    sgd = SGD([{"params": [parameter()], "lr": 0.1}, {"params": [parameter()], "lr": 0.01}], lr=0.1)
    rows += run("lambda_groups", LambdaLR(sgd, [lambda e: 1.0 / (e + 1), lambda e: 0.9**e]), sgd, 8)
    sgd = SGD([parameter()], lr=0.1)
    rows += run("linear", LinearLR(sgd, 0.25, 1.0, 4), sgd, 8)
    sgd = SGD([parameter()], lr=0.1)
    rows += run("linear_down", LinearLR(sgd, 1.0, 0.0, 5), sgd, 7)
    sgd = SGD([parameter()], lr=0.1)
    rows += run("cosine", CosineAnnealingLR(sgd, 6, 0.001), sgd, 15)
    sgd = SGD([parameter()], lr=0.1, momentum=0.9)
    rows += run("onecycle", OneCycleLR(sgd, max_lr=1.0, total_steps=20), sgd, 20, momentum=True)
    adam = Adam([parameter()], lr=0.1)
    scheduler = OneCycleLR(adam, max_lr=0.5, total_steps=15, pct_start=0.25, anneal_strategy="linear", three_phase=True)
    rows += run("onecycle_three_linear_adam", scheduler, adam, 15, momentum=True)
    rmsprop = RMSprop([parameter()], lr=0.1, momentum=0.9)
    scheduler = OneCycleLR(rmsprop, max_lr=0.3, epochs=3, steps_per_epoch=4, pct_start=0.4)
    rows += run("onecycle_epochs_rmsprop", scheduler, rmsprop, 12, momentum=True)
    sgd = SGD([parameter()], lr=0.1)
    warmup = LinearLR(sgd, 0.1, 1.0, 3)
    cosine = CosineAnnealingLR(sgd, 5, 0.0)
    rows += run("sequential", SequentialLR(sgd, [warmup, cosine], [3]), sgd, 10)
    metrics = [5, 4, 4, 4.0001, 3.9999, 4, 4, 4, 2, 2, 2, 2, 2, 2]
    cases = [dict(factor=0.5, patience=1), dict(mode="max", factor=0.3, patience=0, cooldown=2),
             dict(factor=0.5, patience=2, threshold=0.5, threshold_mode="abs", min_lr=0.02)]
    for index, kwargs in enumerate(cases):
        sgd = SGD([parameter()], lr=0.1)
        scheduler = ReduceLROnPlateau(sgd, **kwargs)
        for step in range(len(metrics) + 1):
            if step > 0:
                scheduler.step(metrics[step - 1])
            rows.append((f"plateau{index}", step, [group["lr"] for group in sgd.param_groups]))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--values", required=True, help="the schedulers_values program")
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SequentialLR's step(0) of the next scheduler warns in PyTorch
        expected = pytorch_rows()
    output = subprocess.run([args.values], check=True, capture_output=True, text=True).stdout.splitlines()
    got = {}
    for line in output:
        name, step, *values = line.split()
        got[(name, int(step))] = [float(v) for v in values]
    failures = 0
    worst = 0.0
    for name, step, values in expected:
        mine = got.get((name, step))
        if mine is None or len(mine) != len(values):
            print(f"FAIL {name} step {step}: volt printed {mine}, PyTorch {values}")
            failures += 1
            continue
        for a, b in zip(mine, values):
            error = abs(a - b) / max(abs(b), 1e-300) if b != 0 else abs(a)
            worst = max(worst, error)
            if not math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15):
                print(f"FAIL {name} step {step}: volt {a!r}, PyTorch {b!r}")
                failures += 1
    if len(got) != len(expected):
        print(f"FAIL volt printed {len(got)} rows, PyTorch {len(expected)}")
        failures += 1
    print(f"{len(expected)} rows over {len({r[0] for r in expected})} cases; largest relative difference {worst:.3g}; "
          f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
