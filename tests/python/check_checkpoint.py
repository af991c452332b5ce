#!/usr/bin/env python3
"""volt checkpoints read by Python's torch, and Lightning checkpoints read by volt.

Needs torch (lightning for the second half) and the helper program
tests/serialization/interop/checkpoint_tool.cpp (CMake target volt_checkpoint_tool). Run by ctest as
volt.serialization.checkpoint_python when the CMake cache variable VOLT_PYTHON is set, or by hand:

    python3 tests/python/check_checkpoint.py --tool build/tests/volt_checkpoint_tool --workdir /tmp/volt-ckpt

Checks:
  * every .ckpt file a volt fit wrote opens with torch.load(path, weights_only=True) and has Lightning's
    top-level entries (epoch, global_step, state_dict, optimizer_states, lr_schedulers, callbacks, loops);
  * its state_dict loads strictly into the same model written in PyTorch, which then computes what volt's model
    computed; the optimizer's learning rate is in param_groups and the resume point in loops;
  * a fit resumed from it by volt continues (the checkpoint volt wrote is the one volt reads);
  * a Lightning 2.x checkpoint (with hyperparameters) gives its state_dict to volt::load_weights, and volt's
    model then computes what the LightningModule computes; resuming a volt fit from it is refused with a
    message naming it a Lightning checkpoint.
Exits non-zero with a message on the first mismatch.
"""
import argparse
import glob
import os
import shutil
import sys

from volt_checks import expect, run

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 2))

    def forward(self, x):
        return self.net(x)


def reference_input():
    return torch.arange(20, dtype=torch.float32).reshape(5, 4) / 10.0 - 1.0


def check_volt_checkpoints(tool, workdir):
    folder = os.path.join(workdir, "volt")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    run(tool, "fit", folder)
    files = sorted(glob.glob(os.path.join(folder, "ckpt", "*.ckpt")))
    expect(len(files) == 3, f"the fit kept last.ckpt and two top-k checkpoints: {[os.path.basename(f) for f in files]}")
    final = torch.load(os.path.join(folder, "final.pt"), weights_only=True)
    for path in files:
        name = os.path.basename(path)
        checkpoint = torch.load(path, weights_only=True)
        for key in ("epoch", "global_step", "volt_version", "state_dict", "optimizer_states", "lr_schedulers",
                    "callbacks", "loops", "volt"):
            expect(key in checkpoint, f"{name} has the entry {key!r}")
        expect(isinstance(checkpoint["global_step"], int) and checkpoint["global_step"] > 0,
               f"{name}: global_step {checkpoint['global_step']}")
        expect(checkpoint["volt"]["format"] == 2, f"{name}: volt format 2")
        expect(checkpoint.get("hyper_parameters") == {"hidden": "3", "lr": "0.01"},
               f"{name}: hyper_parameters are the model's hparams() ({checkpoint.get('hyper_parameters')})")
        model = Net()
        result = model.load_state_dict(checkpoint["state_dict"], strict=True)
        expect(not result.missing_keys and not result.unexpected_keys, f"{name}: state_dict loads strictly into Net")
        expect(any(k.startswith("volt::ModelCheckpoint/") for k in checkpoint["callbacks"]),
               f"{name}: callbacks hold ModelCheckpoint's state: {list(checkpoint['callbacks'])}")
    last = torch.load(os.path.join(folder, "ckpt", "last.ckpt"), weights_only=True)
    expect(last["global_step"] == 12, f"last.ckpt: global_step 12 after 2 epochs of 6 batches ({last['global_step']})")
    expect(list(last["state_dict"].keys()) == list(final.keys()), "last.ckpt: state_dict keys in PyTorch's order")
    for key, value in final.items():
        expect(torch.equal(last["state_dict"][key], value), f"last.ckpt: {key} equals the final weights")
    # The checkpoint of the last epoch is written before that epoch's scheduler step (as in Lightning), after
    # one StepLR step, and LibTorch's StepLR first changes the rate at its second step (PyTorch's constructor
    # takes a step, LibTorch's does not): the rate is still the initial one, and one step is recorded.
    lr = last["optimizer_states"][0]["param_groups"][0]["lr"]
    expect(lr == 0.01 and last["lr_schedulers"][0]["steps"] == 1,
           f"last.ckpt: the learning rate {lr} and one scheduler step in lr_schedulers")
    expect(last["loops"]["at_epoch_end"] is True and last["loops"]["batches_done"] == 6,
           f"last.ckpt: the resume point {last['loops']}")
    # 12 training batches over both epochs; nothing of the last batch's end pending (2) at an epoch's end.
    expect(last["loops"].get("total_batches") == 12 and last["loops"].get("batch_end_pending") == 2,
           f"last.ckpt: the batch count and the batch end in the resume point {last['loops']}")
    model = Net()
    model.load_state_dict(last["state_dict"], strict=True)
    model.eval()
    with torch.no_grad():
        output = model(reference_input())
    volt_output = torch.load(os.path.join(folder, "output.pt"), weights_only=True)["output"]
    expect(torch.allclose(output, volt_output, rtol=0, atol=1e-6),
           f"PyTorch's Net with the checkpoint's state_dict computes volt's output (max diff "
           f"{(output - volt_output).abs().max().item():.2e})")
    run(tool, "resume", folder)
    resumed = torch.load(os.path.join(folder, "resumed.pt"), weights_only=True)
    changed = any(not torch.equal(resumed[k], final[k]) for k in final if final[k].is_floating_point())
    expect(changed, "volt resumed the fit from last.ckpt and trained a third epoch")
    after = torch.load(os.path.join(folder, "ckpt", "last.ckpt"), weights_only=True)
    expect(after["global_step"] == 18, f"the resumed fit's last.ckpt: global_step 18 ({after['global_step']})")


def check_lightning_checkpoint(tool, workdir):
    try:
        import lightning.pytorch as pl
    except ImportError:
        print("skip: lightning is not installed; the Lightning checkpoint part did not run")
        return
    folder = os.path.join(workdir, "lightning")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)

    class Module(pl.LightningModule):
        def __init__(self, lr=0.05, name="reference"):
            super().__init__()
            self.save_hyperparameters()
            self.net = Net().net

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.cross_entropy(self(x), y)

        def configure_optimizers(self):
            optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
            return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.5)]

    torch.manual_seed(3)
    data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    module = Module()
    trainer = pl.Trainer(max_steps=3, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=8))
    path = os.path.join(folder, "lightning.ckpt")
    trainer.save_checkpoint(path)
    checkpoint = torch.load(path, weights_only=False)
    expect("hyper_parameters" in checkpoint and "pytorch-lightning_version" in checkpoint,
           "the Lightning checkpoint has hyperparameters and its version entry")
    out = os.path.join(folder, "output.pt")
    run(tool, "lightning", path, out)
    module.eval()
    with torch.no_grad():
        expected = module(reference_input())
    volt_output = torch.load(out, weights_only=True)["output"]
    expect(torch.allclose(expected, volt_output, rtol=0, atol=1e-6),
           f"volt's Net with the Lightning checkpoint's state_dict computes the LightningModule's output (max diff "
           f"{(expected - volt_output).abs().max().item():.2e})")
    message = run(tool, "resume-error", path)
    expect("is a Lightning checkpoint" in message and "volt::load_weights" in message,
           f"resuming a volt fit from it is refused: {message.strip()}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    check_volt_checkpoints(args.tool, args.workdir)
    check_lightning_checkpoint(args.tool, args.workdir)
    print("all checks passed")


if __name__ == "__main__":
    main()
