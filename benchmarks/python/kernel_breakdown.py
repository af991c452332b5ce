"""Device time per training step by kind of kernel, for PyTorch eager and torch.compile.

The loops: the plain PyTorch loop (eager), torch.compile(mode="reduce-overhead"), torch.compile's default mode and
torch.compile of the model and its loss (compile-loss, reduce-overhead);
their kernels are recorded with torch.profiler (CPU and CUDA activities) and summed per kind of kernel.
bench_kernel_breakdown (benchmarks/cpp/kernel_breakdown.cpp) prints the same table for volt's Trainer on the same
models and data.

    python kernel_breakdown.py [--model resnet18-cl|gpt] [--precision fp32|bf16|fp32-high] [--batch N] [--warmup 10]
                               [--steps 5] [--loops eager,compile,compile-default,compile-loss]

The models, data and training steps are four_way.py's: ResNet-18 with a CIFAR stem in channels-last (model and each
batch; benchmarks/python/ddp_resnet.py's layout) with Adam 1e-3, or the GPT with fused AdamW 1e-3 (weight decay
0.01); cross-entropy (over every position for the GPT); bf16: torch.autocast("cuda", torch.bfloat16); 8 batches made
on the CPU from torch.manual_seed(1234) (randn images and randint labels, token ids for the GPT) and moved to the
device once; torch.backends.cudnn.benchmark on. The torch.compile loops are compiled with five steps first (the
optimizer step stays eager) and start each step with torch.compiler.cudagraph_mark_step_begin() under
reduce-overhead; no step reads the graphs' outputs.

Every loop first trains `warmup` steps and times `steps` steps between two device synchronisations (the wall time
per step), all loops before the profiler runs for the first time in the process; then each loop in turn runs one
more step and `steps` profiled steps. Batch: the four-way benchmark's (256 for ResNet-18, 64 for the GPT) unless
given.

Device time: the durations of the profiler's CUDA events (kernels, copies, memsets; the user annotations, which span
the kernels of a record_function scope, are left out), summed per category and divided by `steps`. A kernel's
category is the first of CATEGORIES whose pattern its name matches (case-insensitive), as in the C++ program; a
name no pattern matches is "elementwise / reduction / other". Inductor names its kernels after the operators they
fuse, so a Triton kernel with layer_norm, batch_norm or convolution in its name counts there. Prints markdown: per
loop the categories, the total device time against the wall time, and the --top (15) kernels with the most device
time per step.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # four_way.py and ddp_resnet.py
import four_way  # noqa: E402

# The same patterns, in the same order, as bench_kernel_breakdown (nvjet: cuBLAS's GEMM kernels on Hopper and later).
CATEGORIES = [
    ("layer norm", r"layer_norm|layernorm|gammabeta"),
    ("batch norm", r"batch_norm|batchnorm|bn_fw|bn_bw|bn_|welford"),
    ("convolution / matmul",
     r"conv|gemm|xmma|cutlass|implicit|wgrad|dgrad|fprop|cublas|sm90_|sm80_|flash|fmha|attention|nvjet|sdpa"),
    ("optimizer", r"adam|multi_tensor|foreach|fused_adam"),
    ("cross-entropy / log-softmax", r"cross_entropy|log_softmax|nll_loss"),
    ("GELU", r"gelu"),
    ("embedding", r"embedding|radix|sort|index_put|scatter"),
    ("Triton (Inductor-fused)", r"^triton_"),
    ("copy / memset", r"memcpy|memset|copy"),
]
OTHER = "elementwise / reduction / other"
PATTERNS = [(name, re.compile(pattern, re.IGNORECASE)) for name, pattern in CATEGORIES]

LOOPS = {
    "eager": "plain PyTorch loop (Python)",
    "compile": four_way.LOOPS["compile"][1],
    "compile-default": four_way.LOOPS["compile-default"][1],
    "compile-loss": four_way.LOOPS["compile-loss"][1],
}


def category(name: str) -> str:
    return next((label for label, pattern in PATTERNS if pattern.search(name)), OTHER)


def kernel_totals(prof) -> dict[str, list]:
    """Per kernel name: [microseconds, calls] of the profile's CUDA events, user annotations left out. The raw
    Kineto events, the ones bench_kernel_breakdown reads through LibTorch's KinetoEvent."""
    from torch.autograd import DeviceType

    totals: dict[str, list] = {}
    for event in prof.profiler.kineto_results.events():
        if event.device_type() != DeviceType.CUDA or event.is_user_annotation():
            continue
        total = totals.setdefault(event.name(), [0.0, 0])
        total[0] += event.duration_ns() / 1e3
        total[1] += 1
    return totals


class Loop:
    """One loop's model, optimizer and step, with the batches it cycles through."""

    def __init__(self, worker, loop: str, model: str, precision: str, batches):
        self.worker, self.model, self.batches = worker, model, batches
        self.bf16 = precision == "bf16"
        self.note = ""
        self.index = 0
        if loop == "eager":
            net = worker.new_model(model)
            # four_way's compile_step with the uncompiled model and no CUDA graphs is its plain PyTorch step:
            # zero_grad, forward (under autocast for bf16), backward, the optimizer's step.
            self.entry = (net, worker.optimizer(model, net.parameters()), net, "eager")
        else:
            self.entry, self.note = worker.compile_prepare(model, precision, batches, four_way.COMPILE_MODES[loop])

    def step(self):
        x, y = self.batches[self.index % len(self.batches)]
        self.index += 1
        self.worker.compile_step(self.entry, self.worker.input(self.model, x), y, self.bf16)

    def timed(self, warmup: int, steps: int) -> float:
        """Trains `warmup` steps, then returns the wall seconds per step of `steps` more."""
        for _ in range(warmup):
            self.step()
        self.worker.sync()
        start = time.perf_counter()
        for _ in range(steps):
            self.step()
        self.worker.sync()
        return (time.perf_counter() - start) / steps

    def profiled(self, steps: int) -> dict[str, list]:
        """One unprofiled step, then the kernels of `steps` profiled ones."""
        from torch.profiler import ProfilerActivity, profile

        self.step()
        self.worker.sync()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                self.step()
            self.worker.sync()
        return kernel_totals(prof)


def report(title: str, note: str, kernels: dict[str, list], steps: int, wall_s: float, top: int = 15) -> str:
    names = [label for label, _ in CATEGORIES] + [OTHER]
    by_category = {label: [0.0, 0] for label in names}
    for name, (us, calls) in kernels.items():
        by_category[category(name)][0] += us
        by_category[category(name)][1] += calls
    total_us = sum(us for us, _ in kernels.values())
    total_calls = sum(calls for _, calls in kernels.values())
    device_ms = total_us / steps / 1e3
    wall_ms = wall_s * 1e3
    lines = [f"## {title}", ""]
    if note:
        lines += [note, ""]
    lines += ["| category | device ms per step | share of device time | kernels per step |", "|---|---|---|---|"]
    for label in names:
        us, calls = by_category[label]
        share = us / total_us * 100 if total_us > 0 else 0.0
        lines.append(f"| {label} | {us / steps / 1e3:.3f} | {share:.1f}% | {calls / steps:.1f} |")
    lines += [f"| total | {device_ms:.3f} | 100% | {total_calls / steps:.1f} |", ""]
    busy = device_ms / wall_ms * 100 if wall_ms > 0 else 0.0
    lines += [f"Device time per step: {device_ms:.3f} ms; wall time per step (profiler off): {wall_ms:.3f} ms; "
              f"device busy {busy:.0f}% of the step.", ""]
    if not kernels:
        return "\n".join(lines + ["The profiler recorded no CUDA activity: the table is empty.", ""])
    lines += [f"Top {top} kernels by device time per step:", "", "| kernel | ms per step | calls per step | category |",
              "|---|---|---|---|"]
    for name, (us, calls) in sorted(kernels.items(), key=lambda item: -item[1][0])[:top]:
        cell = (name if len(name) <= 160 else name[:157] + "...").replace("|", "/")
        lines.append(f"| `{cell}` | {us / steps / 1e3:.3f} | {calls / steps:.1f} | {category(name)} |")
    return "\n".join(lines + [""])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["resnet18-cl", "gpt"], default="resnet18-cl")
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp32-high"], default="fp32",
                        help='fp32-high: float32 matmuls at "high" (TF32), as the four-way fp32-high rows')
    parser.add_argument("--batch", type=int, default=0, help="default: the four-way benchmark's batch for the model")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--loops", default="eager,compile,compile-default")
    parser.add_argument("--top", type=int, default=15, help="how many kernels the per-kernel table lists")
    arguments = parser.parse_args()
    loops = [loop for loop in arguments.loops.split(",") if loop]
    unknown = [loop for loop in loops if loop not in LOOPS]
    if unknown or not loops:
        parser.error(f"--loops takes a comma-separated list of {', '.join(LOOPS)}; got {arguments.loops!r}")
    if arguments.top < 1:
        parser.error(f"--top must be >= 1, got {arguments.top}")
    if arguments.warmup < 1 or arguments.steps < 1:
        parser.error("--warmup and --steps must be >= 1")
    batch = arguments.batch or four_way.MODELS[arguments.model]["cuda"]["batch"]

    import torch

    if not torch.cuda.is_available():
        print("kernel_breakdown.py: no CUDA device; nothing measured")
        return 0
    torch.backends.cudnn.benchmark = True  # bench_kernel_breakdown sets `.benchmark = true`
    torch.set_float32_matmul_precision("high" if arguments.precision == "fp32-high" else "highest")
    worker = four_way.Worker("compile", "cuda", root="")
    batches, _ = four_way.make_data(arguments.model, batch, worker.device)
    worker.sync()

    runs = []
    for loop in loops:  # build, warm up and time every loop before the profiler first runs
        run = Loop(worker, loop, arguments.model, arguments.precision, batches)
        runs.append((loop, run, run.timed(arguments.warmup, arguments.steps)))
    print(f"# Kernel time per step: {arguments.model}, {arguments.precision}, batch {batch}\n")
    print(f"device: {torch.cuda.get_device_name(0)}, PyTorch {torch.__version__}; {arguments.warmup} warm-up steps, "
          f"{arguments.steps} timed steps (profiler off), {arguments.steps} profiled steps\n")
    for loop, run, wall_s in runs:
        print(report(LOOPS[loop], run.note, run.profiled(arguments.steps), arguments.steps, wall_s, arguments.top), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
