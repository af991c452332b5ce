"""Four-way training benchmark: volt's Trainer, a hand-written LibTorch loop, a plain PyTorch loop and Lightning's
Trainer (and on CUDA volt with cuda_graphs, the hand loop's step captured in one CUDA graph, and
torch.compile(mode="reduce-overhead") loops; for the opt-in models also torch.compile's default mode) train the same
models on the same synthetic batches for the same steps; one Markdown table per model and precision, each row with
its share of the roofline (FLOPs per step counted from the model against the matmul peak measured in the same run).
benchmarks/four_way.sh configures the C++ side and runs this script; see it for the knobs.

    python four_way.py --device cpu|cuda --build-dir DIR [--output results.md] [--command "how it was run"]

This script is the driver: it builds bench_four_way (benchmarks/cpp/four_way.cpp) in the background and starts
three workers that answer one request per line (the C++ program; this script with --worker python for the PyTorch
and Lightning rows, the peak measurement and the FLOP count; with --worker compile for the torch.compile rows). On
CUDA the torch.compile models are compiled while the C++ program builds. Then, per model and precision, it runs
ROUNDS rounds; each round runs every row once, in an order rotated from round to round, and each run trains a fresh
model for WARMUP steps and times STEPS steps between two device synchronisations. A row that fails (error, crash,
timeout) is marked failed with the reason and the others go on; a time limit (TIME_LIMIT) cuts rounds rather than
the run.

Models: mlp, simplecnn, resnet18 (the default run); opt-in: resnet18-cl (ResNet-18 in channels-last in every loop),
resnet18-fused (the same, with volt::nn's fused batch-norm modules in the C++ loops), gpt (6 layers, d_model 384,
6 heads, sequence 256, batch 64, vocabulary 8192, AdamW) and gpt-fused (the same, with volt::nn::LayerNorm and
volt::nn::Linear in the C++ loops). Precisions: fp32, bf16
(autocast) and fp32-high (FP32 with float32 matmuls at "high": TF32 on CUDA).

Environment: STEPS, WARMUP (all models; default per model and device), ROUNDS, MODELS, LOOPS
(volt,libtorch,pytorch,lightning,volt-graph,graph,compile,compile-default,compile-loss), PRECISIONS (fp32,bf16,fp32-high),
TIME_LIMIT (seconds from the driver's start; default on CUDA the models' budgets added up), COMPILE_BUDGET (seconds
in which compiles may start; likewise).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import select
import signal
import statistics
import subprocess
import sys
import threading
import time

SEED = 1234
DISTINCT_BATCHES = 8

# Per model: title, input shape, and batch / warm-up steps / timed steps per device.
MODELS = {
    "mlp": {
        "title": "seed MLP 784-256-256-10 (BatchNorm, ReLU, Dropout 0.2), Adam 1e-3",
        "shape": (784,),
        "cuda": {"batch": 128, "warmup": 30, "steps": 300},
        "cpu": {"batch": 128, "warmup": 10, "steps": 100},
        "budget": {"time": 100, "compile": 30},
    },
    "simplecnn": {
        "title": "seed SimpleCNN (conv 32, conv 64, 512 units, Dropout 0.25) on 1x28x28, Adam 1e-3",
        "shape": (1, 28, 28),
        "cuda": {"batch": 128, "warmup": 30, "steps": 300},
        "cpu": {"batch": 128, "warmup": 3, "steps": 20},
        "budget": {"time": 110, "compile": 40},
    },
    "resnet18": {
        "title": "ResNet-18 with a CIFAR stem on 3x32x32, Adam 1e-3",
        "shape": (3, 32, 32),
        "cuda": {"batch": 256, "warmup": 10, "steps": 40},
        "cpu": {"batch": 32, "warmup": 1, "steps": 3},
        "budget": {"time": 170, "compile": 80},
    },
    # Opt-in (MODELS=...): not part of the default run.
    "resnet18-cl": {
        "title": "ResNet-18 with a CIFAR stem on 3x32x32 in channels-last (model and every batch, in every loop), "
                 "Adam 1e-3",
        "shape": (3, 32, 32),
        "cuda": {"batch": 256, "warmup": 10, "steps": 40},
        "cpu": {"batch": 32, "warmup": 1, "steps": 3},
        "optional": True,
        "budget": {"time": 170, "compile": 100},
    },
    "resnet18-fused": {
        "title": "ResNet-18 with a CIFAR stem on 3x32x32 in channels-last, in C++ with volt::nn's fused batch-norm "
                 "modules (BatchNormReLU2d, BatchNormAddReLU2d; the Python loops: the same arithmetic, unfused), "
                 "Adam 1e-3",
        "shape": (3, 32, 32),
        "cuda": {"batch": 256, "warmup": 10, "steps": 40},
        "cpu": {"batch": 32, "warmup": 1, "steps": 3},
        "optional": True,
        "compile_default": False,  # the Python model is resnet18-cl's: its default-mode compile is measured there
        "budget": {"time": 150, "compile": 60},
    },
    "gpt": {
        "title": "GPT, 6 layers, d_model 384, 6 heads, sequence 256, vocabulary 8192, causal "
                 "scaled_dot_product_attention, AdamW 1e-3 (weight decay 0.01; fused in Python on CUDA)",
        "shape": (256,),  # token ids; the targets have the same shape
        "cuda": {"batch": 64, "warmup": 5, "steps": 20},
        "cpu": {"batch": 4, "warmup": 1, "steps": 2},
        "precisions": {"cuda": ["bf16", "fp32", "fp32-high"], "cpu": ["fp32", "fp32-high"]},
        "optional": True,
        "budget": {"time": 330, "compile": 130},
    },
    "gpt-fused": {
        "title": "the GPT, in C++ with volt::nn::LayerNorm (fused kernels, bfloat16 output under autocast) and "
                 "volt::nn::Linear (ATen's linear, as PyTorch's nn.Linear); the Python loops: the same model with "
                 "nn.LayerNorm and nn.Linear; AdamW 1e-3 (weight decay 0.01; fused in Python on CUDA)",
        "shape": (256,),
        "cuda": {"batch": 64, "warmup": 5, "steps": 20},
        "cpu": {"batch": 4, "warmup": 1, "steps": 2},
        "precisions": {"cuda": ["bf16", "fp32", "fp32-high"], "cpu": ["fp32", "fp32-high"]},
        "optional": True,
        "compile_default": False,  # the Python model is gpt's: its default-mode compile is measured there
        "budget": {"time": 300, "compile": 100},
    },
}
GPT = {"vocabulary": 8192, "context": 256, "d_model": 384, "heads": 6, "layers": 6}
DEFAULT_PRECISIONS = {"cuda": ["fp32", "bf16"], "cpu": ["fp32"]}
ALL_PRECISIONS = ["fp32", "bf16", "fp32-high"]
# "budget" above: the seconds a model adds to the default TIME_LIMIT (CUDA) and COMPILE_BUDGET; the default models
# add up to 380 s and 150 s. A run's defaults are the sums over its MODELS, at least 240 s and 60 s.

# Loop name -> (worker, label).
LOOPS = {
    "volt": ("cpp", "volt `Trainer<{accelerator}, SingleDevice, {precision}>` (C++)"),
    "volt-graph": ("cpp", "volt `Trainer<CUDA, SingleDevice, {precision}>` with `.cuda_graphs = true` (C++)"),
    "libtorch": ("cpp", "hand-written LibTorch loop (C++)"),
    "pytorch": ("python", "plain PyTorch loop (Python)"),
    "lightning": ("python", "Lightning `Trainer` (Python)"),
    "graph": ("cpp", "graph limit: the hand loop's step in one CUDA graph (C++)"),
    "compile": ("compile", "`torch.compile(model, mode=\"reduce-overhead\")` loop (Python)"),
    "compile-default": ("compile", "`torch.compile(model)` loop, default mode (Python)"),
    "compile-loss": ("compile", "`torch.compile` of the model and its loss, `mode=\"reduce-overhead\"` (Python)"),
}
# "+loss": the compiled function is the model followed by the cross-entropy (Inductor fuses the loss too); without
# it, torch.compile(model) and the loss eager, as the other rows compute it.
COMPILE_MODES = {"compile": "reduce-overhead", "compile-default": "default", "compile-loss": "reduce-overhead+loss"}
# Precision -> (volt's precision policy, Lightning's precision); fp32-high is FP32 with float32 matmuls at "high".
PRECISION_NAMES = {"fp32": ("FP32", "32-true"), "bf16": ("BF16Autocast", "bf16-mixed"),
                   "fp32-high": ("FP32", "32-true")}


def model_precisions(model: str, device: str) -> list[str]:
    return MODELS[model].get("precisions", DEFAULT_PRECISIONS)[device]


def model_loops(model: str, device: str) -> list[str]:
    """The loops a model runs when LOOPS is not given: the opt-in models add torch.compile's default mode."""
    loops = ["volt", "libtorch", "pytorch", "lightning"]
    if device == "cuda":
        default_mode = MODELS[model].get("optional") and MODELS[model].get("compile_default", True)
        loops += ["volt-graph", "graph", "compile"] + (["compile-default"] if default_mode else [])
        if MODELS[model].get("optional"):
            loops.append("compile-loss")
    return loops


# =====================================================================================================================
# Workers (run with --worker): the Python rows.


def make_model(name: str):
    import torch.nn as nn

    if name == "mlp":
        return nn.Sequential(
            nn.Linear(784, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.2),
            nn.Linear(256, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.2),
            nn.Linear(256, 10),
        )
    if name == "simplecnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(), nn.Dropout(0.25), nn.Linear(512, 10),
        )
    if name in ("resnet18", "resnet18-cl", "resnet18-fused"):
        from ddp_resnet import ResNet18  # benchmarks/python/ddp_resnet.py, the layout of benchmarks/cpp/resnet.hpp

        return ResNet18(10)
    if language_model(name):
        return make_gpt()
    raise ValueError(f"unknown model {name!r} (mlp, simplecnn, resnet18, resnet18-cl, resnet18-fused, gpt, gpt-fused)")


def make_gpt():
    """The GPT of benchmarks/cpp/gpt.hpp: same modules in the same order, same shapes."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ln2, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            batch, length, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(batch, length, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(batch, length, d)
            h = x + self.proj(y)
            return h + self.fc2(F.gelu(self.fc1(self.ln2(h))))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            d = GPT["d_model"]
            self.tokens = nn.Embedding(GPT["vocabulary"], d)
            self.positions = nn.Embedding(GPT["context"], d)
            self.blocks = nn.Sequential(*[Block(d, GPT["heads"]) for _ in range(GPT["layers"])])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, GPT["vocabulary"], bias=False)

        def forward(self, ids):
            x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1], device=ids.device))
            return self.head(self.ln_f(self.blocks(x)))

    return Gpt()


def channels_last_model(model: str) -> bool:
    return model in ("resnet18-cl", "resnet18-fused")


def language_model(model: str) -> bool:
    """The GPT (token-id batches, AdamW): gpt, and gpt-fused (the same model in Python)."""
    return model in ("gpt", "gpt-fused")


def make_data(model: str, batch: int, device):
    """DISTINCT_BATCHES batches made on the CPU exactly as bench_four_way makes them, then moved to the device."""
    import torch

    torch.manual_seed(SEED)
    if language_model(model):  # token ids, inputs and targets
        shape = (DISTINCT_BATCHES, batch, *MODELS[model]["shape"])
        images = torch.randint(0, GPT["vocabulary"], shape)
        labels = torch.randint(0, GPT["vocabulary"], shape)
    else:
        images = torch.randn(DISTINCT_BATCHES, batch, *MODELS[model]["shape"])
        labels = torch.randint(0, 10, (DISTINCT_BATCHES, batch))
    checksum = f"{images.sum(dtype=torch.float64).item():.6e}/{labels.sum().item()}"
    batches = [(images[i].to(device), labels[i].to(device)) for i in range(DISTINCT_BATCHES)]
    return batches, checksum


class Cycle:
    """`length` batches cycling through the distinct ones, with a length: what Lightning takes as a dataloader."""

    def __init__(self, batches, length: int):
        self.batches, self.length = batches, length

    def __iter__(self):
        return (self.batches[i % len(self.batches)] for i in range(self.length))

    def __len__(self):
        return self.length


class Worker:
    def __init__(self, kind: str, device_type: str, root: str):
        import torch

        self.torch = torch
        self.kind = kind
        self.device = torch.device(device_type, 0) if device_type == "cuda" else torch.device("cpu")
        self.root = root
        self.data = {}
        self.compiled = {}

    def sync(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def peak_start(self) -> int:
        if self.device.type != "cuda":
            return -1
        self.sync()
        self.torch.cuda.reset_peak_memory_stats()
        return self.torch.cuda.memory_allocated()

    def peak_added(self, base: int) -> int:
        return self.torch.cuda.max_memory_allocated() - base if base >= 0 else -1

    def hello(self) -> dict:
        torch = self.torch
        info = {"python": platform.python_version(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                "cuda_build": torch.version.cuda}
        if self.kind == "python":
            import lightning

            info["lightning"] = lightning.__version__
        if self.device.type == "cuda":
            info["cuda_available"] = torch.cuda.is_available()
            if torch.cuda.is_available():
                properties = torch.cuda.get_device_properties(0)
                info["gpu"] = properties.name
                info["gpu_memory_gib"] = round(properties.total_memory / 2**30, 1)
                info["capability"] = f"{properties.major}.{properties.minor}"
                info["cudnn"] = torch.backends.cudnn.version()
                try:
                    import ctypes

                    version = ctypes.c_int()
                    ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version))
                    info["cuda_driver_api"] = f"{version.value // 1000}.{version.value % 1000 // 10}"
                except (OSError, AttributeError):
                    pass
        return info

    def batches(self, model: str, batch: int):
        key = (model, batch)
        if key not in self.data:
            self.data[key] = make_data(model, batch, self.device)
        return self.data[key]

    # ---- rows ---------------------------------------------------------------------------------------------------

    def loss(self, net, x, y, bf16: bool):
        torch = self.torch
        if bf16:
            with torch.autocast(self.device.type, dtype=torch.bfloat16):
                return self.cross_entropy(net(x), y)
        return self.cross_entropy(net(x), y)

    def cross_entropy(self, output, y):
        if output.dim() == 3:  # the GPT's (batch, sequence, vocabulary) logits: every position is one prediction
            return self.torch.nn.functional.cross_entropy(output.flatten(0, 1), y.flatten())
        return self.torch.nn.functional.cross_entropy(output, y)

    def new_model(self, model_name):
        """A fresh model (seed 0) on the device, in channels-last for resnet18-cl (as a Python user converts it)."""
        torch = self.torch
        torch.manual_seed(0)
        model = make_model(model_name).to(self.device)
        if channels_last_model(model_name):
            model = model.to(memory_format=torch.channels_last)
        model.train()
        return model

    def optimizer(self, model_name, parameters):
        """Adam 1e-3 with its defaults; for the GPT AdamW 1e-3 (weight decay 0.01), fused on CUDA."""
        torch = self.torch
        if language_model(model_name):
            return torch.optim.AdamW(parameters, lr=1e-3, weight_decay=0.01, fused=self.device.type == "cuda")
        return torch.optim.Adam(parameters, lr=1e-3)

    def input(self, model_name, x):
        """The batch's input as the step gets it: each batch converted to channels-last for resnet18-cl."""
        return x.contiguous(memory_format=self.torch.channels_last) if channels_last_model(model_name) else x

    def pytorch_row(self, model_name, bf16, batches, warmup, steps):
        """The loop a PyTorch user writes: zero_grad, forward (under autocast for bf16), backward, Adam's step."""
        torch = self.torch
        base = self.peak_start()
        model = self.new_model(model_name)
        optimizer = self.optimizer(model_name, model.parameters())
        start = 0.0
        for step in range(warmup + steps):
            if step == warmup:
                self.sync()
                start = time.perf_counter()
            x, y = batches[step % len(batches)]
            x = self.input(model_name, x)
            optimizer.zero_grad()
            loss = self.loss(model, x, y, bf16)
            loss.backward()
            optimizer.step()
        self.sync()
        return steps / (time.perf_counter() - start), self.peak_added(base), ""

    def lightning_row(self, model_name, bf16, batches, warmup, steps):
        """Lightning's Trainer with its defaults (logger, model summary) but no progress bar and no checkpointing."""
        import lightning.pytorch as pl

        torch = self.torch
        worker = self
        marks = []

        class StepTimer(pl.Callback):
            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
                if trainer.global_step in (warmup, warmup + steps):
                    worker.sync()
                    marks.append(time.perf_counter())

        class Task(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = make_model(model_name)
                if channels_last_model(model_name):
                    self.net = self.net.to(memory_format=torch.channels_last)

            def training_step(self, batch, batch_idx):
                x, y = batch
                return worker.cross_entropy(self.net(worker.input(model_name, x)), y)

            def configure_optimizers(self):
                return worker.optimizer(model_name, self.parameters())

        base = self.peak_start()
        torch.manual_seed(0)
        task = Task()
        trainer = pl.Trainer(
            accelerator="gpu" if self.device.type == "cuda" else "cpu", devices=1,
            precision=PRECISION_NAMES["bf16" if bf16 else "fp32"][1], max_steps=warmup + steps,
            enable_progress_bar=False, enable_checkpointing=False, default_root_dir=self.root,
            callbacks=[StepTimer()],
        )
        trainer.fit(task, train_dataloaders=Cycle(batches, warmup + steps + 1))
        if len(marks) != 2:
            raise RuntimeError(f"Lightning stopped at global_step {trainer.global_step} before the last timed step")
        return steps / (marks[1] - marks[0]), self.peak_added(base), ""

    def compile_step(self, entry, x, y, bf16):
        model, optimizer, compiled, mode = entry
        if mode.startswith("reduce-overhead"):
            # A new step for CUDA graph trees: the previous step's graph outputs may be overwritten from here on
            # (nothing reads them: the loss is not kept).
            self.torch.compiler.cudagraph_mark_step_begin()
        optimizer.zero_grad()
        if mode.endswith("+loss"):  # compiled(x, y) is the loss
            if bf16:
                with self.torch.autocast(self.device.type, dtype=self.torch.bfloat16):
                    loss = compiled(x, y)
            else:
                loss = compiled(x, y)
        else:
            loss = self.loss(compiled, x, y, bf16)
        loss.backward()
        optimizer.step()

    def compile_prepare(self, model_name, precision, batches, mode="reduce-overhead"):
        """Compiles the model (forward and backward; CUDA graphs with reduce-overhead) with a few steps; the optimizer
        step stays eager (foreach Adam; fused AdamW for the GPT), as in a user's loop."""
        from torch._dynamo.utils import counters

        torch = self.torch
        bf16 = precision == "bf16"
        key = (model_name, precision, batches[0][0].shape[0], mode)
        if key in self.compiled:
            return self.compiled[key]
        model = self.new_model(model_name)
        optimizer = self.optimizer(model_name, model.parameters())
        if mode.endswith("+loss"):
            worker = self

            def model_and_loss(x, y):
                return worker.cross_entropy(model(x), y)

            compiled = torch.compile(model_and_loss, mode=mode[:-len("+loss")])
        else:
            compiled = torch.compile(model) if mode == "default" else torch.compile(model, mode=mode)
        skips = counters["inductor"]["cudagraph_skips"]
        start = time.perf_counter()
        for step in range(5):  # compile forward, then backward; record the CUDA graphs; replay them
            x, y = batches[step % len(batches)]
            self.compile_step((model, optimizer, compiled, mode), self.input(model_name, x), y, bf16)
        self.sync()
        seconds = time.perf_counter() - start
        skips = counters["inductor"]["cudagraph_skips"] - skips
        note = f"compiled in {seconds:.0f} s" + (f"; CUDA graphs skipped {skips} times" if skips else "")
        self.compiled[key] = ((model, optimizer, compiled, mode), note)
        return self.compiled[key]

    def compile_row(self, model_name, precision, batches, warmup, steps, mode):
        entry, note = self.compile_prepare(model_name, precision, batches, mode)
        bf16 = precision == "bf16"
        base = self.peak_start()
        start = 0.0
        for step in range(warmup + steps):
            if step == warmup:
                self.sync()
                start = time.perf_counter()
            x, y = batches[step % len(batches)]
            self.compile_step(entry, self.input(model_name, x), y, bf16)
        self.sync()
        return steps / (time.perf_counter() - start), self.peak_added(base), note

    # ---- the roofline: FLOPs of a model, the device's peak ---------------------------------------------------

    def flops(self, model_name, batch):
        """Forward FLOPs of one batch (2 per multiply-add), counted by torch.utils.flop_counter on the meta device
        (shapes only, nothing computed): convolutions and matmuls (linear layers, attention) apart."""
        from torch.utils.flop_counter import FlopCounterMode

        torch = self.torch
        with torch.device("meta"):
            model = make_model(model_name)
        shape = (batch, *MODELS[model_name]["shape"])
        x = (torch.zeros(shape, dtype=torch.long, device="meta") if language_model(model_name)
             else torch.empty(shape, device="meta"))
        with FlopCounterMode(display=False) as counter:
            model(x)
        counts = counter.get_flop_counts().get("Global", {})
        conv = sum(v for op, v in counts.items() if "convolution" in str(op))
        return {"conv": conv, "matmul": sum(counts.values()) - conv,
                "ops": sorted(str(op).replace("aten.", "") for op in counts)}

    def peak(self):
        """The device's matmul throughput in FLOP/s, measured: torch.mm of square matrices (8192 on CUDA, timed
        with CUDA events; 1024 on the CPU), bf16, float32 at "highest" and at "high" (TF32 on CUDA); the best of
        three timings of several products each."""
        torch = self.torch
        cuda = self.device.type == "cuda"
        n = 8192 if cuda else 1024
        kinds = {"bf16": (torch.bfloat16, "highest"), "fp32": (torch.float32, "highest"),
                 "tf32": (torch.float32, "high")} if cuda else {"fp32": (torch.float32, "highest")}
        previous = torch.get_float32_matmul_precision()
        if previous != "highest":
            raise RuntimeError(f"the worker's float32 matmul precision is {previous!r}, not PyTorch's default")
        result = {"n": n, "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32) if cuda else False}
        try:
            for name, (dtype, precision) in kinds.items():
                if precision != torch.get_float32_matmul_precision():
                    torch.set_float32_matmul_precision(precision)
                a = torch.randn(n, n, device=self.device, dtype=dtype)
                b = torch.randn(n, n, device=self.device, dtype=dtype)
                out = torch.empty(n, n, device=self.device, dtype=dtype)
                repeats = {"bf16": 40, "tf32": 20, "fp32": 5}[name] if cuda else 5
                for _ in range(3):
                    torch.mm(a, b, out=out)
                best = float("inf")
                for _ in range(3):
                    if cuda:
                        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        begin.record()
                        for _ in range(repeats):
                            torch.mm(a, b, out=out)
                        end.record()
                        end.synchronize()
                        seconds = begin.elapsed_time(end) / 1e3
                    else:
                        start = time.perf_counter()
                        for _ in range(repeats):
                            torch.mm(a, b, out=out)
                        seconds = time.perf_counter() - start
                    best = min(best, seconds / repeats)
                result[name] = 2 * n**3 / best
                del a, b, out
        finally:
            if torch.get_float32_matmul_precision() != previous:
                torch.set_float32_matmul_precision(previous)
        if cuda:
            torch.cuda.empty_cache()
        return result

    def handle(self, words: list[str]) -> str:
        if words[0] == "peak":
            return "ok " + json.dumps(self.peak())
        if words[0] == "flops":
            return "ok " + json.dumps(self.flops(words[1], int(words[2])))
        if words[0] == "prepare":
            model_name, precision, batch = words[1], words[2], int(words[3])
            mode = words[4] if len(words) > 4 else "reduce-overhead"
            batches, checksum = self.batches(model_name, batch)
            with self.matmul_precision(precision):
                _, note = self.compile_prepare(model_name, precision, batches, mode)
            self.release_cached()
            return f"ok 0 -1 {checksum} {note}"
        if words[0] != "run" or len(words) != 7:
            raise ValueError(f"expected 'run <loop> <model> <precision> <batch> <warmup> <steps>', got {words}")
        loop, model_name, precision = words[1:4]
        batch, warmup, steps = (int(w) for w in words[4:7])
        if precision not in PRECISION_NAMES:
            raise ValueError(f"precision is {', '.join(PRECISION_NAMES)}, got {precision}")
        batches, checksum = self.batches(model_name, batch)
        gc.collect()  # earlier rows' Trainers hold reference cycles: free their device memory before this row
        bf16 = precision == "bf16"
        rows = {"pytorch": lambda *a: self.pytorch_row(*a[:1], bf16, *a[2:]),
                "lightning": lambda *a: self.lightning_row(*a[:1], bf16, *a[2:]),
                "compile": lambda *a: self.compile_row(*a, mode="reduce-overhead"),
                "compile-default": lambda *a: self.compile_row(*a, mode="default"),
                "compile-loss": lambda *a: self.compile_row(*a, mode="reduce-overhead+loss")}
        if loop not in rows:
            raise ValueError(f"unknown loop {loop}")
        with self.matmul_precision(precision):
            rate, peak, note = rows[loop](model_name, precision, batches, warmup, steps)
        if loop.startswith("compile"):
            self.release_cached()
        return f"ok {rate:.4f} {peak} {checksum} {note}".rstrip()

    def release_cached(self):
        """Hands the caching allocator's free blocks back to the driver after a compile or a compiled row (the
        compiled models' CUDA graph pools stay): several compiled GPTs once left this worker holding 129 GiB of the
        GPU, and the next eager PyTorch row in the other worker ran out of memory."""
        if self.device.type == "cuda":
            self.torch.cuda.empty_cache()

    def matmul_precision(self, precision):
        """torch.set_float32_matmul_precision("high") for an fp32-high row, restored after it so that no row's
        setting reaches the next."""
        import contextlib

        torch = self.torch

        @contextlib.contextmanager
        def scope():
            previous = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision("high")
            try:
                yield
            finally:
                torch.set_float32_matmul_precision(previous)

        # The other rows leave the worker's setting (PyTorch's default, "highest") as it is.
        return scope() if precision == "fp32-high" else contextlib.nullcontext()


def worker_main(arguments) -> int:
    import logging
    import warnings

    import torch

    warnings.filterwarnings("ignore")
    for name in ("lightning.pytorch", "lightning.fabric", "pytorch_lightning", "lightning"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if arguments.threads > 0:
        torch.set_num_threads(arguments.threads)
    if arguments.device == "cuda":
        torch.backends.cudnn.benchmark = True  # bench_four_way sets the same
    worker = Worker(arguments.worker, arguments.device, arguments.root)
    print("@@ hello " + json.dumps(worker.hello()), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        try:
            reply = worker.handle(words)
        except Exception as error:  # noqa: BLE001 - every failure becomes the row's error message
            message = " ".join(f"{type(error).__name__}: {error}".split())
            reply = f"error {message[:600]}"
        print("@@ " + reply, flush=True)
    return 0


# =====================================================================================================================
# The driver.


class WorkerError(Exception):
    pass


class WorkerProcess:
    """One worker process and its line protocol: requests on stdin, replies as '@@ <kind> <rest>' lines on stdout;
    other output goes to its log."""

    running: set = set()  # every started worker, so that an interrupted driver stops them all

    def __init__(self, name: str, argv: list[str], log_path: str, start_timeout: float):
        self.name, self.argv, self.log_path, self.start_timeout = name, argv, log_path, start_timeout
        self.process = None
        self.buffer = b""
        self.hello = None
        self.log = None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self):
        self.stop()
        self.log = open(self.log_path, "ab")
        self.log.write(f"==== start {' '.join(self.argv)}\n".encode())
        self.log.flush()
        try:
            self.process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=self.log, start_new_session=True)
        except OSError as error:
            raise WorkerError(f"cannot start {self.argv[0]}: {error}") from error
        WorkerProcess.running.add(self)
        self.buffer = b""
        kind, rest = self.read_reply(self.start_timeout)
        if kind != "hello":
            self.stop()
            raise WorkerError(f"{self.name} worker did not start: {kind} {rest}")
        self.hello = rest

    def request(self, line: str, timeout: float) -> tuple[str, str]:
        if not self.alive():
            self.start()
        try:
            self.process.stdin.write((line + "\n").encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise WorkerError(f"{self.name} worker is gone ({error}); {self.last_stderr()}") from error
        return self.read_reply(timeout)

    def read_reply(self, timeout: float) -> tuple[str, str]:
        deadline = time.monotonic() + timeout
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line = self.buffer[:newline].decode(errors="replace")
                self.buffer = self.buffer[newline + 1:]
                marker = line.find("@@ ")
                if marker >= 0:
                    kind, _, rest = line[marker + 3:].partition(" ")
                    return kind, rest
                self.log.write(f"[stdout] {line}\n".encode())
                self.log.flush()
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.stop(force=True)
                raise WorkerError(f"no answer from the {self.name} worker within {timeout:.0f} s (stopped it)")
            ready, _, _ = select.select([self.process.stdout], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if chunk:
                self.buffer += chunk
                continue
            try:
                code = self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            how = (f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}")
            raise WorkerError(f"the {self.name} worker ended ({how}); {self.last_stderr()}")

    def last_stderr(self) -> str:
        try:
            with open(self.log_path, "rb") as file:
                file.seek(max(0, os.path.getsize(self.log_path) - 4000))
                lines = [line.strip() for line in file.read().decode(errors="replace").splitlines()]
        except OSError:
            return "no log"
        lines = [line for line in lines if line and not line.startswith(("====", "[W", "Warning"))]
        return f"last log line: {lines[-1][:300]}" if lines else "log empty"

    def stop(self, force: bool = False):
        """Asks the worker to quit (force: kills it and its children at once)."""
        if self.process is not None:
            if self.process.poll() is None and not force:
                try:
                    self.process.stdin.write(b"quit\n")
                    self.process.stdin.flush()
                    self.process.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            if self.process.poll() is None:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)  # the worker and its own children (compile workers)
                except ProcessLookupError:
                    pass
                self.process.wait()
            self.process = None
        WorkerProcess.running.discard(self)
        if self.log is not None:
            self.log.close()
            self.log = None


def parse_hello(text: str) -> dict:
    if text.startswith("{"):
        return json.loads(text)
    info = {}
    head, _, compiler = text.partition(" compiler=")
    for item in head.split():
        key, _, value = item.partition("=")
        info[key] = value
    if compiler:
        info["compiler"] = compiler
    return info


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def nvidia_driver() -> str:
    try:
        completed = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                   capture_output=True, text=True, timeout=20)
        return completed.stdout.strip().splitlines()[0] if completed.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return ""


def volt_revision() -> str:
    """The commit the run measured, and whether volt's headers had uncommitted changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=20)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "include", "benchmarks/cpp"],
                               capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (no git)"
    if head.returncode != 0:
        return "unknown (not a git checkout)"
    return head.stdout.strip() + (" with uncommitted changes under include/ or benchmarks/cpp/" if dirty.stdout.strip()
                                  else "")


def env_int(name: str):
    value = os.environ.get(name, "").strip()
    return int(value) if value else None


def env_list(name: str, default: list[str], allowed) -> list[str]:
    value = os.environ.get(name, "").strip()
    items = [item.strip() for item in value.split(",") if item.strip()] if value else default
    unknown = [item for item in items if item not in allowed]
    if unknown:
        raise SystemExit(f"{name}: unknown {', '.join(unknown)} (allowed: {', '.join(allowed)})")
    return items


class Row:
    def __init__(self):
        self.rates, self.peaks = [], []
        self.error = ""
        self.note = ""
        self.checksum = ""


def driver_main(arguments) -> int:
    started = time.monotonic()
    device = arguments.device
    cuda = device == "cuda"
    load_before = os.getloadavg()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    models = env_list("MODELS", [m for m in MODELS if not MODELS[m].get("optional")], MODELS)
    all_loops = ["volt", "libtorch", "pytorch", "lightning"] + (
        ["volt-graph", "graph", "compile", "compile-default", "compile-loss"] if cuda else [])
    loops_given = os.environ.get("LOOPS", "").strip() != ""
    loops = env_list("LOOPS", all_loops, all_loops)
    precision_filter = env_list("PRECISIONS", ALL_PRECISIONS, ALL_PRECISIONS)
    rounds = env_int("ROUNDS") or 5
    steps_override, warmup_override = env_int("STEPS"), env_int("WARMUP")
    time_limit = env_int("TIME_LIMIT") or (max(240, sum(MODELS[m]["budget"]["time"] for m in models)) if cuda
                                           else 3600)
    compile_budget = env_int("COMPILE_BUDGET") or max(60, sum(MODELS[m]["budget"]["compile"] for m in models))
    # Blocks (model, precision) in order, each with its loops: the LOOPS given, else the model's own set.
    blocks = [(model, precision) for model in models for precision in model_precisions(model, device)
              if precision in precision_filter]
    if not blocks:
        raise SystemExit(f"PRECISIONS={','.join(precision_filter)} leaves no precision of MODELS={','.join(models)}"
                         f" on {device}")
    block_loops = {block: ([loop for loop in loops] if loops_given else model_loops(block[0], device))
                   for block in blocks}
    loops = [loop for loop in all_loops if any(loop in block_loops[block] for block in blocks)]
    settings = {}
    for model in models:
        setting = dict(MODELS[model][device])
        if steps_override:
            setting["steps"] = steps_override
        if warmup_override:
            setting["warmup"] = warmup_override
        settings[model] = setting
    row_timeout = 150 if cuda else 900

    log_dir = os.path.join(arguments.build_dir, "four-way-logs")
    os.makedirs(log_dir, exist_ok=True)
    script = os.path.abspath(__file__)
    threads = ["--threads", "1"] if not cuda else []
    binary = os.path.join(arguments.build_dir, "benchmarks", "bench_four_way")

    def say(message: str):
        print(f"[{time.monotonic() - started:6.1f} s] {message}", flush=True)

    # The C++ build runs in the background while the Python workers start (and, on CUDA, compile their models).
    build = {"ok": None, "message": "", "seconds": 0.0}

    def run_build():
        build_start = time.monotonic()
        with open(os.path.join(log_dir, "build.log"), "wb") as log:
            try:
                completed = subprocess.run(["cmake", "--build", arguments.build_dir, "--target", "bench_four_way"],
                                           stdout=log, stderr=subprocess.STDOUT)
            except OSError as error:
                build.update(ok=False, message=f"cannot run cmake: {error}")
                return
        build["seconds"] = time.monotonic() - build_start
        build["ok"] = completed.returncode == 0
        if not build["ok"]:
            with open(os.path.join(log_dir, "build.log"), errors="replace") as log:
                errors = [line.strip() for line in log if "error" in line.lower()]
            build["message"] = (f"the C++ build failed ({log_dir}/build.log): " +
                                (errors[0][:300] if errors else f"exit code {completed.returncode}"))

    builder = threading.Thread(target=run_build)
    if arguments.no_build:
        build.update(ok=os.path.exists(binary), message=f"{binary} not found (--no-build)")
    else:
        builder.start()
        say(f"building bench_four_way in {arguments.build_dir} (log: {log_dir}/build.log)")

    def python_worker(kind: str) -> WorkerProcess:
        root = os.path.join(log_dir, f"root-{kind}")
        argv = [sys.executable, script, "--worker", kind, "--device", device, "--root", root] + threads
        return WorkerProcess(kind, argv, os.path.join(log_dir, f"{kind}.log"), start_timeout=240)

    workers = {"python": python_worker("python")}
    if any(LOOPS[loop][0] == "compile" for loop in loops):
        workers["compile"] = python_worker("compile")
    worker_errors = {}
    for name, worker in workers.items():
        try:
            worker.start()
            say(f"{name} worker: {worker.hello}")
        except WorkerError as error:
            worker_errors[name] = str(error)
            say(f"{name} worker failed to start: {error}")

    results = {block: {loop: Row() for loop in block_loops[block]} for block in blocks}

    # The roofline: the device's measured matmul peaks and each model's FLOPs per step, from the Python worker,
    # before anything else uses the device.
    roofline = {"peak": None, "flops": {}, "error": ""}
    if "python" not in worker_errors:
        try:
            kind, rest = workers["python"].request("peak", timeout=180)
            if kind == "ok":
                roofline["peak"] = json.loads(rest)
                say("measured peak: " + ", ".join(f"{k} {flops_text(v)}" for k, v in roofline["peak"].items()
                                                  if k in ("bf16", "tf32", "fp32")))
            else:
                roofline["error"] = f"peak: {rest}"
            for model in models:
                kind, rest = workers["python"].request(f"flops {model} {settings[model]['batch']}", timeout=120)
                if kind == "ok":
                    roofline["flops"][model] = json.loads(rest)
                else:
                    roofline["error"] = f"flops of {model}: {rest}"
        except WorkerError as error:
            roofline["error"] = str(error)
        if roofline["error"]:
            say(f"roofline: {roofline['error']}")

    # Compile phase (CUDA): compiles start only within COMPILE_BUDGET seconds of the start.
    compile_seconds = 0.0
    if "compile" in workers and "compile" not in worker_errors:
        phase_start = time.monotonic()
        for block in blocks:
            model, precision = block
            for loop in block_loops[block]:
                if LOOPS[loop][0] != "compile":
                    continue
                row = results[block][loop]
                if time.monotonic() - started > compile_budget:
                    row.error = f"not compiled: COMPILE_BUDGET ({compile_budget} s) spent on earlier compiles"
                    continue
                mode = COMPILE_MODES[loop]
                say(f"compiling {model} {precision} for the torch.compile row (mode {mode})")
                # A compile that started in time may run on, but not for ever: the rows still need their time.
                timeout = max(60.0, started + compile_budget + 90 - time.monotonic())
                try:
                    kind, rest = workers["compile"].request(
                        f"prepare {model} {precision} {settings[model]['batch']} {mode}", timeout=timeout)
                except WorkerError as error:
                    kind, rest = "error", str(error)
                if kind == "ok":
                    row.note = rest.split(" ", 3)[3] if rest.count(" ") >= 3 else ""
                    say(f"  {row.note}")
                else:
                    row.error = f"torch.compile failed: {rest}"
                    say(f"  {row.error}")
        compile_seconds = time.monotonic() - phase_start

    if not arguments.no_build:
        builder.join()
        say(f"C++ build {'done' if build['ok'] else 'FAILED'} in {build['seconds']:.0f} s")
    cpp_argv = [binary, "--device", device, "--root", os.path.join(log_dir, "root-cpp"),
                "--batches", str(DISTINCT_BATCHES), "--seed", str(SEED)] + threads
    workers["cpp"] = WorkerProcess("cpp", cpp_argv, os.path.join(log_dir, "cpp.log"), start_timeout=120)
    if not build["ok"]:
        worker_errors["cpp"] = build["message"]
    else:
        try:
            workers["cpp"].start()
            say(f"cpp worker: {workers['cpp'].hello}")
        except WorkerError as error:
            worker_errors["cpp"] = str(error)
            say(f"cpp worker failed to start: {error}")

    # Measuring: per block (model, precision), rounds of every row; each block gets an equal share of the time left.
    deadline = started + time_limit - 15
    measure_start = time.monotonic()
    block_notes = {}
    for index, (model, precision) in enumerate(blocks):
        setting = settings[model]
        block_start = time.monotonic()
        share = (deadline - block_start) / (len(blocks) - index)
        rows = results[(model, precision)]
        loops_here = block_loops[(model, precision)]
        for loop in loops_here:
            worker_name = LOOPS[loop][0]
            if worker_name in worker_errors and not rows[loop].error:
                rows[loop].error = worker_errors[worker_name]
        last_round = 0.0
        done = 0
        for round_index in range(rounds):
            now = time.monotonic()
            if now > deadline or (round_index > 0 and now - block_start + last_round > share):
                break
            round_start = now
            active = [loop for loop in loops_here if not rows[loop].error]
            shift = round_index % max(1, len(active))
            for loop in active[shift:] + active[:shift]:
                worker = workers[LOOPS[loop][0]]
                line = f"run {loop} {model} {precision} {setting['batch']} {setting['warmup']} {setting['steps']}"
                timeout = max(30.0, min(row_timeout, deadline + 30 - time.monotonic()))
                try:
                    kind, rest = worker.request(line, timeout=timeout)
                except WorkerError as error:
                    kind, rest = "error", str(error)
                row = rows[loop]
                if kind == "ok":
                    fields = rest.split(" ", 3)
                    row.rates.append(float(fields[0]))
                    row.peaks.append(int(fields[1]))
                    row.checksum = fields[2]
                    if len(fields) > 3:
                        row.note = fields[3]
                else:
                    row.error = rest
                    if loop == "graph":
                        worker.stop(force=True)  # a failed capture may leave the CUDA context unusable: start afresh
            last_round = time.monotonic() - round_start
            done += 1
            say(f"{model} {precision} round {round_index + 1}: " + ", ".join(
                f"{loop} {rows[loop].rates[-1]:.1f}" if rows[loop].rates and not rows[loop].error else f"{loop} failed"
                for loop in loops_here))
        if done < rounds:
            block_notes[(model, precision)] = (f"{done} of {rounds} rounds (TIME_LIMIT {time_limit} s)"
                                               if done else f"not run: TIME_LIMIT {time_limit} s reached")
            for loop in loops_here:
                if not done and not rows[loop].error:
                    rows[loop].error = block_notes[(model, precision)]
    measure_seconds = time.monotonic() - measure_start
    for worker in workers.values():
        worker.stop()
    load_after = os.getloadavg()

    report = write_report(arguments, device, models, loops, settings, rounds, results, block_notes, roofline,
                          workers, worker_errors, load_before, load_after, date,
                          {"build": build["seconds"], "compile": compile_seconds, "measure": measure_seconds,
                           "total": time.monotonic() - started, "time_limit": time_limit})
    print()
    print(report)
    if arguments.output:
        with open(arguments.output, "w") as file:
            file.write(report)
        say(f"wrote {arguments.output}")
    return 0


def rate_text(value: float) -> str:
    """Steps/s with at least three significant digits (ResNet-18 on a CPU runs well under one step a second)."""
    return f"{value:.1f}" if value >= 100 else f"{value:#.3g}"


def flops_text(rate: float) -> str:
    """FLOP/s as TFLOP/s (GFLOP/s below one TFLOP/s, as on a CPU thread)."""
    return f"{rate / 1e12:.1f} TFLOP/s" if rate >= 1e12 else f"{rate / 1e9:.1f} GFLOP/s"


def ratio(a, b) -> str:
    return f"{a / b:.3f}" if a and b else "-"


def peak_for(kind: str, precision: str, peak: dict, cuda: bool) -> float:
    """The measured peak (FLOP/s) that a row's convolutions ("conv") or matmuls ("matmul") run against: bf16 under
    BF16 autocast; float32 matmuls at "high" (fp32-high) and cuDNN's float32 convolutions (allow_tf32, on by
    default) on TF32 tensor cores; other float32 matmuls at FP32. The CPU: its FP32 matmul figure."""
    if not cuda:
        return peak.get("fp32", 0.0)
    if precision == "bf16":
        return peak.get("bf16", 0.0)
    if kind == "conv":
        return peak.get("tf32" if peak.get("cudnn_allow_tf32") else "fp32", 0.0)
    return peak.get("tf32" if precision == "fp32-high" else "fp32", 0.0)


def ideal_seconds(model: str, precision: str, roofline: dict, cuda: bool) -> float:
    """Seconds a training step takes at the measured peak: 3 x the forward FLOPs (forward, and backward as twice
    the forward) of convolutions and of matmuls, each at its peak. 0 when unknown."""
    flops, peak = roofline.get("flops", {}).get(model), roofline.get("peak")
    if not flops or not peak:
        return 0.0
    total = 0.0
    for kind in ("conv", "matmul"):
        if flops[kind]:
            rate = peak_for(kind, precision, peak, cuda)
            if rate <= 0:
                return 0.0
            total += 3 * flops[kind] / rate
    return total


def write_report(arguments, device, models, loops, settings, rounds, results, block_notes, roofline, workers,
                 worker_errors, load_before, load_after, date, seconds) -> str:
    cuda = device == "cuda"
    hellos = {name: (parse_hello(worker.hello) if worker.hello else {}) for name, worker in workers.items()}
    python_info = hellos.get("python") or hellos.get("compile") or {}
    cpp_info = hellos.get("cpp", {})
    out = [f"# Four-way training benchmark: {device.upper()}", "", "Command (from the repository root):", "",
           f"    {arguments.command or ' '.join(sys.argv)}", ""]
    machine = f"{cpu_model()}, {os.cpu_count()} cores, {platform.platform()}"
    if cuda:
        gpu = python_info.get("gpu", "no GPU found")
        driver = nvidia_driver()
        machine += (f"; GPU {gpu} ({python_info.get('gpu_memory_gib', '?')} GiB, compute capability "
                    f"{python_info.get('capability', '?')}), driver {driver or 'unknown'}, CUDA driver API "
                    f"{python_info.get('cuda_driver_api', '?')}")
    out += [f"Date: {date}. Machine: {machine}. Load average (1/5/15 min) "
            f"{'/'.join(f'{v:.1f}' for v in load_before)} before the run, "
            f"{'/'.join(f'{v:.1f}' for v in load_after)} after it.", ""]
    versions = (f"Versions: C++ rows LibTorch {cpp_info.get('libtorch', '?')} (compiler {cpp_info.get('compiler', '?')}, "
                f"{cpp_info.get('threads', '?')} intra-op threads); Python {python_info.get('python', '?')}, torch "
                f"{python_info.get('torch', '?')} (CUDA build {python_info.get('cuda_build')}"
                + (f", cuDNN {python_info.get('cudnn', '?')}" if cuda else "")
                + f", {python_info.get('threads', '?')} threads), lightning {hellos.get('python', {}).get('lightning', '?')}.")
    out += [versions + f" volt: commit {volt_revision()}.", ""]
    per_model = "; ".join(f"{m}: batch {s['batch']}, {s['warmup']} warm-up + {s['steps']} timed steps"
                          for m, s in settings.items())
    checksums = {row.checksum for block in results.values() for row in block.values() if row.checksum}
    per_block = {}
    for (model, precision), block in results.items():
        per_block.setdefault(model, set()).update(row.checksum for row in block.values() if row.checksum)
    same_data = all(len(values) <= 1 for values in per_block.values())
    out += [f"Settings: {rounds} rounds per model and precision ({per_model}); {DISTINCT_BATCHES} distinct "
            f"synthetic batches per model (seed {SEED}) held {'on the GPU' if cuda else 'in memory'}; data checksums "
            f"{'identical in every worker' if same_data else 'DIFFER between workers: ' + ', '.join(sorted(checksums))}."
            f" Run time: build {seconds['build']:.0f} s"
            + (f", torch.compile phase {seconds['compile']:.0f} s (during the build)" if cuda else "")
            + f", measuring {seconds['measure']:.0f} s, total {seconds['total']:.0f} s (TIME_LIMIT "
            f"{seconds['time_limit']} s).", ""]

    def label(loop, model, precision):
        text = LOOPS[loop][1]
        if loop in ("volt", "volt-graph"):
            text = text.format(accelerator="CUDA" if cuda else "CPU", precision=PRECISION_NAMES[precision][0])
            options = []
            if channels_last_model(model):
                options.append("`.memory_format = volt::MemoryFormat::channels_last`")
            if precision == "fp32-high":
                options.append("`.float32_matmul_precision = \"high\"`")
            if options:
                text = text.replace(" (C++)", "") + (" and " if loop == "volt-graph" else " with ") + \
                    " and ".join(options) + " (C++)"
        if loop == "lightning":
            text = f"Lightning `Trainer(precision=\"{PRECISION_NAMES[precision][1]}\")` (Python)"
        return text

    medians = {key: {loop: (statistics.median(row.rates) if row.rates and not row.error else 0.0)
                     for loop, row in block.items()} for key, block in results.items()}

    # The optional torch.compile rows that ran: default mode, and the model with its loss.
    compile_extra = [loop for loop in ("compile-default", "compile-loss") if loop in loops]
    extra_names = {"compile-default": "vs torch.compile default", "compile-loss": "vs torch.compile with loss"}
    # Summary: volt's row against the others.
    header = ["model", "precision", "volt steps/s", "vs hand LibTorch", "vs PyTorch", "vs Lightning"]
    if cuda:
        header += ["vs graph limit", "vs torch.compile"] + [extra_names[loop] for loop in compile_extra]
    out += ["## Summary: volt's Trainer against the other loops (ratios of median steps/s)", "",
            "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (model, precision), med in medians.items():
        cells = [model, precision, rate_text(med["volt"]) if med.get("volt") else "failed"]
        for other in ["libtorch", "pytorch", "lightning"] + (["graph", "compile"] if cuda else []) + compile_extra:
            cells.append(ratio(med.get("volt"), med.get(other)))
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    if cuda and "volt-graph" in loops:
        header = ["model", "precision", "volt cuda_graphs steps/s", "vs graph limit", "vs torch.compile"] + [
            extra_names[loop] for loop in compile_extra] + ["vs Lightning", "vs volt eager"]
        out += ["## Summary: volt's Trainer with `cuda_graphs` (ratios of median steps/s)", "",
                "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for (model, precision), med in medians.items():
            cells = [model, precision, rate_text(med["volt-graph"]) if med.get("volt-graph") else "failed"]
            for other in ["graph", "compile"] + compile_extra + ["lightning", "volt"]:
                cells.append(ratio(med.get("volt-graph"), med.get(other)))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")

    # volt's faster configuration against the fastest other loop (the graph limit is not a peer: it is the bound).
    peers = ["libtorch", "pytorch", "lightning", "compile", "compile-default", "compile-loss"]
    header = ["model", "precision", "volt's best", "steps/s", "fastest peer", "steps/s", "ratio", "volt % of peak"]
    out += ["## Summary: volt's faster configuration against the fastest peer (median steps/s)", "",
            "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (model, precision), med in medians.items():
        volt_best = max((loop for loop in ("volt", "volt-graph") if med.get(loop)), key=lambda l: med[l], default="")
        peer_best = max((loop for loop in peers if med.get(loop)), key=lambda l: med[l], default="")
        ideal = ideal_seconds(model, precision, roofline, cuda)
        cells = [model, precision, volt_best or "failed", rate_text(med[volt_best]) if volt_best else "-",
                 peer_best or "none", rate_text(med[peer_best]) if peer_best else "-",
                 ratio(med.get(volt_best), med.get(peer_best)),
                 f"{100 * med[volt_best] * ideal:.1f}%" if volt_best and ideal else "-"]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")

    # Roofline: the measured peaks and each model's FLOPs.
    out += ["## Roofline: FLOPs per training step against the measured peak", ""]
    peak = roofline.get("peak")
    if peak:
        names = {"bf16": "bf16", "tf32": "float32 at \"high\" (TF32)", "fp32": "float32 at \"highest\""}
        out += [f"Measured peak (`torch.mm` of {peak['n']}x{peak['n']} matrices, best of 3 timings"
                + (", CUDA events" if cuda else ", one thread") + "): "
                + "; ".join(f"{names[k]} {flops_text(peak[k])}" for k in ("bf16", "tf32", "fp32") if k in peak)
                + (f"; cuDNN's float32 convolutions use TF32 (`allow_tf32` {peak.get('cudnn_allow_tf32')})."
                   if cuda else "."), ""]
    if roofline.get("error"):
        out += [f"Roofline incomplete: {roofline['error']}", ""]
    if roofline.get("flops"):
        header = ["model", "batch", "forward GFLOP (conv + matmul)", "GFLOP per step (3 x forward)",
                  "counted operators"] + [f"step at peak, {p}" for p in ALL_PRECISIONS if any(
                      b[1] == p for b in results)]
        out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for model in models:
            flops = roofline["flops"].get(model)
            if not flops:
                continue
            cells = [model, str(settings[model]["batch"]),
                     f"{(flops['conv'] + flops['matmul']) / 1e9:.4g} ({flops['conv'] / 1e9:.4g} + "
                     f"{flops['matmul'] / 1e9:.4g})", f"{3 * (flops['conv'] + flops['matmul']) / 1e9:.4g}",
                     ", ".join(flops["ops"])]
            for p in ALL_PRECISIONS:
                if not any(b[1] == p for b in results):
                    continue
                ideal = ideal_seconds(model, p, roofline, cuda) if (model, p) in results else 0.0
                cells.append(f"{ideal * 1e3:.2f} ms ({rate_text(1 / ideal)} steps/s)" if ideal else "-")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")

    for (model, precision), block in results.items():
        med = medians[(model, precision)]
        what = {"fp32-high": "fp32 with float32 matmuls at \"high\" (TF32)"}.get(precision, precision)
        out += [f"## {model}, {what}: {MODELS[model]['title']}, batch {settings[model]['batch']}", ""]
        if (model, precision) in block_notes:
            out += [f"Rounds: {block_notes[(model, precision)]}.", ""]
        ideal = ideal_seconds(model, precision, roofline, cuda)
        if ideal:
            out += [f"Roofline: one step's {3 * sum(roofline['flops'][model][k] for k in ('conv', 'matmul')) / 1e9:.4g}"
                    f" GFLOP take {ideal * 1e3:.2f} ms at the measured peak, {rate_text(1 / ideal)} steps/s; \"% of "
                    f"peak\" is steps/s against that.", ""]
        columns = ["loop", "steps/s (median)", "runs"] + (["peak memory (MiB)"] if cuda else []) + \
                  ["vs hand LibTorch", "vs Lightning"] + (["vs graph limit"] if cuda else []) + \
                  ["% of peak"] + ["note"]
        out += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        for loop, row in block.items():
            if row.error:
                cells = [label(loop, model, precision), "**failed**", "", *([""] if cuda else []), "", "",
                         *([""] if cuda else []), "", row.error.replace("|", "\\|")]
            else:
                cells = [label(loop, model, precision), rate_text(med[loop]),
                         ", ".join(rate_text(v) for v in row.rates)]
                if cuda:
                    # The first run of a model in a process also holds cuDNN's benchmark search (its workspaces):
                    # the later runs show what the loop itself needs.
                    peaks = row.peaks[1:] if len(row.peaks) > 1 else row.peaks
                    cells.append(f"{max(peaks) / 2**20:.1f}" if peaks and max(peaks) >= 0 else "-")
                cells += [ratio(med[loop], med.get("libtorch")), ratio(med[loop], med.get("lightning"))]
                if cuda:
                    cells.append(ratio(med[loop], med.get("graph")))
                cells.append(f"{100 * med[loop] * ideal:.1f}%" if ideal else "-")
                cells.append(row.note.replace("|", "\\|"))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    out += [NOTES_CUDA if cuda else NOTES_CPU]
    return "\n".join(out)


NOTES_COMMON = """\
* Same model definitions (C++: benchmarks/cpp/four_way.cpp with benchmarks/cpp/resnet.hpp and gpt.hpp; Python:
  benchmarks/python/four_way.py with benchmarks/python/ddp_resnet.py), same synthetic batches (made on the CPU
  from one seed by the same LibTorch, checksums compared; the GPT's are token ids, inputs and targets), same
  optimizer (Adam, lr 1e-3; the GPT: AdamW, lr 1e-3, weight decay 0.01), same number of steps; the training step
  computes the cross-entropy loss (the GPT's over every position) and logs nothing. Every run builds a fresh model
  (seed 0), trains the warm-up steps, and times the timed steps between two device synchronisations; no data
  loading, process start-up or model construction is timed. Each loop cycles through the distinct batches; the
  Trainers get them as one epoch of warm-up + timed + 1 batches, so no epoch boundary falls in the timed steps.
* volt's Trainer and Lightning's run with their default setup (default logger, model summary,
  log_every_n_steps 50; logs under the build folder) except that the progress bar and checkpointing are off.
* The optimizer step differs by loop: volt's Trainer steps LibTorch's Adam through `volt::optim::step`
  (LibTorch's fused Adam kernel where it has one, else multi-tensor ops; on LibTorch's own optimizer state); the
  hand-written LibTorch loop calls `torch::optim::Adam::step()`, which updates parameter by parameter; PyTorch
  and Lightning use `torch.optim.Adam` with its defaults (multi-tensor `foreach` on CUDA, per parameter on the
  CPU). The GPT's AdamW: volt's fused AdamW path, `torch::optim::AdamW::step()` in the hand loop,
  `torch.optim.AdamW(fused=True)` in Python on CUDA (its default, `foreach` or per parameter, on the CPU).
* resnet18-cl: every loop in channels-last. volt's Trainer with `.memory_format = channels_last` (model and each
  batch through its batch transfer); the hand loop and the graph limit convert the model's 4-D parameters and
  buffers (`set_data(contiguous(ChannelsLast))`) and each batch (the graph: its static input buffer is
  channels-last, and each copy into it converts); PyTorch, Lightning and torch.compile
  `model.to(memory_format=torch.channels_last)` and each batch `x.contiguous(memory_format=torch.channels_last)`
  before the forward pass (Lightning: in training_step).
* resnet18-fused: resnet18-cl with, in the C++ loops (volt's Trainer, the hand loop, the graph limit), each batch
  norm that a ReLU follows as `volt::nn::BatchNormReLU2d` and each block's second batch norm, residual add and ReLU
  as `volt::nn::BatchNormAddReLU2d` (cuDNN's fused NHWC kernels for half, bfloat16 and, where cuDNN has them,
  float inputs); the downsample batch norms stay `BatchNorm2d`. The Python loops run resnet18-cl's model: the same
  parameters and arithmetic, unfused, since PyTorch has no such module (torch.compile fuses these ops itself).
* gpt-fused: gpt with, in the C++ loops, every LayerNorm as `volt::nn::LayerNorm` with `autocast_output` (one
  kernel forward and one backward compiled at run time with NVRTC; under autocast its output is bfloat16, what the
  matmul after it casts LibTorch's float32 output to) and every Linear as `volt::nn::Linear` (ATen's `linear`, as
  PyTorch's nn.Linear: for the 3-D activations one addmm with the bias in the epilogue, where LibTorch's C++
  `torch::nn::Linear` runs a matmul and a separate in-place bias add; on CUDA the bias gradient from volt's
  column-sum kernels); each residual add inside the layer norm that reads it (`LayerNorm::forward_add`); q, k and
  v from `volt::nn::functional::split_qkv` (its backward one gather kernel on CUDA); fc1 and GELU as
  `Linear::forward_gelu` (GELU's and fc1's bias gradients from one kernel on CUDA); the loss
  `volt::nn::functional::cross_entropy`. The same arithmetic; the Python loops run gpt's model.
* fp32-high: FP32 with float32 matmuls at "high" (TF32 tensor cores on CUDA; no effect on the CPU): volt's
  Trainer with `.float32_matmul_precision = "high"`, the hand loops `at::globalContext().setFloat32MatmulPrecision
  ("high")`, the Python rows `torch.set_float32_matmul_precision("high")`; set for the row and set back to
  "highest" after it in every worker, so that no row's setting reaches another (the other rows never set it).
* Roofline ("% of peak"): the row's steps/s times the time one step takes at the measured peak. FLOPs are counted
  from the model by `torch.utils.flop_counter.FlopCounterMode` on one forward pass (on the meta device: shapes
  only): convolutions, matmuls and attention, 2 FLOPs per multiply-add; causal attention counted in full (its
  kernels skip the masked half; for the GPT that is under 10% of the count); embeddings, normalisation,
  activations, the loss and the optimizer are not counted. A step is 3 x the forward FLOPs (backward = 2 x
  forward; the first layer's unneeded input gradient included). The peak is a measured `torch.mm` of square
  matrices, in the precision the row's convolutions and matmuls run in: bf16 under BF16 autocast; TF32 for
  float32 convolutions (cuDNN's `allow_tf32`, on by default) and for float32 matmuls at "high"; FP32 for float32
  matmuls at "highest". Convolutions and matmuls are timed apart at their own peak and added.
* In each round every row runs once, in an order rotated from round to round; the median over rounds is shown
  and every round's figure is listed under "runs"."""

NOTES_CPU = f"""Notes:

{NOTES_COMMON}
* One intra-op thread in every worker (at::set_num_threads(1), torch.set_num_threads(1)), so that the loops rather
  than thread scheduling are compared. The machine is shared (see the load averages): absolute steps/s vary from
  run to run; the loops alternate within each round, so the ratios of the medians are the figures to read.
* Peak memory is not measured on the CPU.
"""

NOTES_CUDA = f"""Notes:

{NOTES_COMMON}
* BF16 rows: volt's `BF16Autocast`; the hand loop switches LibTorch's autocast on around the forward pass
  (set_autocast_enabled / set_autocast_dtype / nesting / clear_cache, through volt/core/compat.hpp so that one
  source serves LibTorch 1.13 and 2.x); PyTorch uses `torch.autocast("cuda", torch.bfloat16)`; Lightning
  `precision="bf16-mixed"`.
* Graph limit: the hand loop's whole step (forward, backward, `at::_fused_adam_` with the step counters on the
  GPU) captured once with `at::cuda::CUDAGraph` after three eager steps on a side stream, then replayed; each
  replay is preceded by copying the next batch into the graph's static input buffers. It is what the GPU does
  when no launch overhead is left.
* volt with `cuda_graphs`: the same Trainer with `TrainerOptions::cuda_graphs = true`: three eager steps, then
  the whole step (forward, backward, Adam on device-side state) captured by volt and replayed for every batch;
  the row fails unless every timed step was a replay.
* torch.compile: `torch.compile(model, mode="reduce-overhead")` (CUDA graphs of forward and backward), the
  optimizer step eager; compiled once per model and precision before the rounds (the compile time is in the
  note), then every round continues training that model; `torch.compiler.cudagraph_mark_step_begin()` starts
  each step, and no step reads an output of the graphs (the loss is not kept). The opt-in models (resnet18-cl,
  gpt) also have `torch.compile(model)` in its default mode (Inductor's kernels, no CUDA graphs), compiled and
  run the same way. In those rows the loss (cross-entropy) runs eager, outside the compiled model, as in the other
  Python loops; every opt-in model also has a "torch.compile with loss" row, where the compiled function is the
  model followed by its cross-entropy (`torch.compile(lambda x, y: cross_entropy(model(x), y),
  mode="reduce-overhead")`), so that Inductor fuses the loss as well: the fastest torch.compile configuration.
* `torch.backends.cudnn.benchmark` / `setBenchmarkCuDNN(true)` in every worker; TF32 settings left at their
  defaults (the same in C++ and Python).
* Peak memory: the largest over the rounds after the first (the first run of a model in a worker process also
  holds the workspaces of cuDNN's algorithm search, `cudnn.benchmark`, up to ~5 GB on ResNet-18 FP32) of the
  CUDA caching allocator's peak allocated bytes during the row minus the bytes allocated when
  the row started (the data batches), i.e. model, optimizer state, activations and workspaces; each worker is
  its own process. The torch.compile row's model, optimizer state and CUDA graph pools exist from its compile
  phase on, so its figure counts only what the timed run adds.
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument("--build-dir", default="build-four-way")
    parser.add_argument("--no-build", action="store_true", help="use the bench_four_way already built")
    parser.add_argument("--output", default="")
    parser.add_argument("--command", default="", help="the command line to record in the output")
    parser.add_argument("--worker", choices=["python", "compile"], help=argparse.SUPPRESS)
    parser.add_argument("--root", default="", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.worker:
        return worker_main(arguments)

    def interrupted(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    try:
        return driver_main(arguments)
    finally:
        for worker in list(WorkerProcess.running):
            worker.stop(force=True)


if __name__ == "__main__":
    sys.exit(main())
