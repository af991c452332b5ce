"""CPU four-way benchmark: volt's Trainer, a hand-written LibTorch loop, a plain PyTorch loop and Lightning's Trainer
train the seed MLP (784-256-256-10 with BatchNorm, ReLU and Dropout 0.2; Adam 1e-3; batch 128) on the same
Fashion-MNIST batches (the first 468 batches of 128 training images in file order, normalised with the dataset's
mean and standard deviation, held in memory: no data loading is timed) for the same number of optimizer steps.

One round runs the C++ program (benchmarks/cpp/cpu_four_way.cpp: volt and LibTorch alternating) and then the two
Python loops, alternating; every run trains a fresh model for `--warmup` steps and then times `--steps` steps. After
`--rounds` rounds it prints a Markdown table of the median steps/s of each loop and the ratios, and writes it with
the command line to `--output`. Every loop runs on one thread: torch.set_num_threads(1) here, at::set_num_threads(1)
in C++ (Debian's LibTorch defaults to 1 thread anyway).

    python cpu_four_way.py --cpp-binary build/benchmarks/bench_cpu_four_way [--steps 300] [--warmup 30]
                           [--rounds 3] [--data-dir /usr/share/datasets/fashion-mnist] [--output results.md]
"""

from __future__ import annotations

import argparse
import gzip
import logging
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np
import torch

BATCH = 128

NOTES = """Notes:

* Same batches, same model, same optimizer settings, same number of steps; only the training loop differs. Data
  loading is not timed (all four iterate the same in-memory batches), nor is process start-up or model creation.
* The optimizer step differs: volt's Trainer steps LibTorch's Adam through `volt::optim::step` (LibTorch's fused
  Adam kernel where it has one for the CPU, as 2.11 does, else multi-tensor ops; on LibTorch's own optimizer
  state); the hand-written LibTorch loop calls `torch::optim::Adam::step()` (parameter by parameter); PyTorch's
  Adam on the CPU uses its per-parameter loop too (`foreach` defaults to on for CUDA tensors only), and so does
  Lightning, which calls the same optimizer. Part of volt's lead over the hand-written loop is that step, which a
  LibTorch user does not get without writing it.
* One thread everywhere, so the comparison measures the loops rather than thread scheduling.
* The machine was shared while this ran (see the load averages above): absolute steps/s vary from run to run by
  up to 2x; the loops alternate within each round, so the ratios of the medians are the figures to read.
"""


def read_idx(path: str) -> np.ndarray:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as file:
        data = file.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load_batches(data_dir: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    def find(name):
        for candidate in (os.path.join(data_dir, name), os.path.join(data_dir, name + ".gz")):
            if os.path.exists(candidate):
                return candidate
        raise SystemExit(f"{name}[.gz] not found in {data_dir} (Debian package dataset-fashion-mnist)")

    images = torch.from_numpy(read_idx(find("train-images-idx3-ubyte")).astype(np.float32) / 255.0)
    labels = torch.from_numpy(read_idx(find("train-labels-idx1-ubyte")).astype(np.int64))
    images = ((images - 0.2860) / 0.3530).reshape(-1, 784).contiguous()
    count = images.shape[0] // BATCH
    return [(images[i * BATCH:(i + 1) * BATCH].clone(), labels[i * BATCH:(i + 1) * BATCH].clone())
            for i in range(count)]


def seed_mlp() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.BatchNorm1d(256), torch.nn.ReLU(), torch.nn.Dropout(0.2),
        torch.nn.Linear(256, 256), torch.nn.BatchNorm1d(256), torch.nn.ReLU(), torch.nn.Dropout(0.2),
        torch.nn.Linear(256, 10),
    )


def pytorch_rate(batches, warmup: int, steps: int) -> float:
    """The loop a PyTorch user writes by hand."""
    torch.manual_seed(0)
    model = seed_mlp()
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    step, total, start = 0, warmup + steps, 0.0
    while step < total:
        for x, y in batches:
            if step == total:
                break
            if step == warmup:
                start = time.perf_counter()
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            step += 1
    return steps / (time.perf_counter() - start)


class InMemoryBatches:
    """The batch list as an iterable with a length, which Lightning takes as a training dataloader."""

    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)

    def __len__(self):
        return len(self.batches)


def lightning_rate(batches, warmup: int, steps: int) -> float:
    import lightning.pytorch as pl

    class SeedModule(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = seed_mlp()

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    marks = []

    class StepTimer(pl.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if trainer.global_step in (warmup, warmup + steps):
                marks.append(time.perf_counter())

    torch.manual_seed(0)
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, max_epochs=-1, max_steps=warmup + steps, logger=False,
        enable_progress_bar=False, enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0,
        callbacks=[StepTimer()],
    )
    trainer.fit(SeedModule(), InMemoryBatches(batches))
    return steps / (marks[1] - marks[0])


def run_cpp(binary: str, data_dir: str, warmup: int, steps: int) -> tuple[dict[str, list[float]], str]:
    command = [binary, "--warmup", str(warmup), "--steps", str(steps), "--repeats", "1"]
    if data_dir:
        command += ["--data-dir", data_dir]
    completed = subprocess.run(command, capture_output=True, text=True, check=True)
    rates: dict[str, list[float]] = {"volt": [], "libtorch": []}
    header = ""
    for line in completed.stdout.splitlines():
        if line.startswith("#"):
            header = line.lstrip("# ")
            continue
        loop, rate = line.split()
        rates[loop].append(float(rate))
    return rates, header


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpp-binary", required=True, help="bench_cpu_four_way")
    parser.add_argument("--data-dir", default="",
                        help="folder with the uncompressed IDX files, for both sides (default: C++ unpacks Debian's "
                        "files into its cache, Python reads them from /usr/share/datasets/fashion-mnist)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", default="")
    parser.add_argument("--command", default="", help="the command line to record in the output")
    arguments = parser.parse_args()

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    for name in ("lightning.pytorch", "lightning.fabric", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import lightning

    data_dir = arguments.data_dir
    batches = load_batches(data_dir or "/usr/share/datasets/fashion-mnist")
    rates: dict[str, list[float]] = {"volt": [], "libtorch": [], "pytorch": [], "lightning": []}
    cpp_header = ""
    load_before = os.getloadavg()
    for round_index in range(arguments.rounds):
        cpp_rates, cpp_header = run_cpp(arguments.cpp_binary, data_dir, arguments.warmup, arguments.steps)
        for loop, values in cpp_rates.items():
            rates[loop].extend(values)
        python_loops = [("pytorch", pytorch_rate), ("lightning", lightning_rate)]
        if round_index % 2 == 1:
            python_loops.reverse()
        for loop, function in python_loops:
            rates[loop].append(function(batches, arguments.warmup, arguments.steps))
        print(f"round {round_index + 1}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in rates.items()), flush=True)

    load_after = os.getloadavg()
    medians = {loop: statistics.median(values) for loop, values in rates.items()}
    names = {
        "volt": "volt `Trainer<volt::CPU>` (C++)",
        "libtorch": "hand-written LibTorch loop (C++)",
        "pytorch": "plain PyTorch loop (Python)",
        "lightning": "Lightning `Trainer(accelerator=\"cpu\")` (Python)",
    }
    lines = [
        "| loop | steps/s (median) | runs | vs LibTorch loop | vs PyTorch loop | vs Lightning |",
        "|---|---|---|---|---|---|",
    ]
    for loop in ("volt", "libtorch", "pytorch", "lightning"):
        values = ", ".join(f"{v:.1f}" for v in rates[loop])
        lines.append(
            f"| {names[loop]} | {medians[loop]:.1f} | {values} | {medians[loop] / medians['libtorch']:.3f} | "
            f"{medians[loop] / medians['pytorch']:.3f} | {medians[loop] / medians['lightning']:.3f} |"
        )
    table = "\n".join(lines)
    setup = (
        f"Seed MLP 784-256-256-10 (BatchNorm, ReLU, Dropout 0.2), Adam 1e-3, batch 128, on the first "
        f"{len(batches)} batches of Fashion-MNIST's training set held in memory; {arguments.warmup} warm-up steps, "
        f"then {arguments.steps} timed steps per run, a fresh model per run, {arguments.rounds} rounds "
        f"(C++: {cpp_header}; Python {platform.python_version()}, torch {torch.__version__}, "
        f"lightning {lightning.__version__}, torch threads {torch.get_num_threads()}). One thread everywhere."
    )
    print()
    print(setup)
    print()
    print(table)
    if arguments.output:
        with open(arguments.output, "w") as file:
            file.write("# CPU four-way: volt vs LibTorch vs PyTorch vs Lightning\n\n")
            file.write("Command (from the repository root):\n\n")
            file.write(f"    {arguments.command or shlex.join(sys.argv)}\n\n")
            file.write(f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; load average "
                       f"(1/5/15 min) {load_before[0]:.1f}/{load_before[1]:.1f}/{load_before[2]:.1f} before the run, "
                       f"{load_after[0]:.1f}/{load_after[1]:.1f}/{load_after[2]:.1f} after it.\n\n")
            file.write(setup + "\n\n" + table + "\n\n" + NOTES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
