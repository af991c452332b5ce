"""Records what Lightning 2.6.6 does with StochasticWeightAveraging and EMAWeightAveraging on the tiny regression
of tests/trainer/weight_averaging_test.cpp ("... as Lightning 2.6.6"): the learning rate of every batch and
the final weights; and the checkpoint EMAWeightAveraging(decay=0.9) writes after step 3 ("a checkpoint's model
entry holds the averaged weights"): its state_dict, current_model_state and averaging_state. The C++ tests hold
the printed values; run this to see them again:

    /opt/volt-venv/bin/python tests/oracle/record_weight_averaging.py
"""

from __future__ import annotations

import logging
import tempfile
import warnings

warnings.filterwarnings("ignore")
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.callbacks import EMAWeightAveraging, StochasticWeightAveraging  # noqa: E402


def batches(count: int):
    """volt_test::make_batches: 4 samples of 2 features, target half their sum minus 1."""
    out = []
    for i in range(count):
        x = torch.arange(8, dtype=torch.float32).reshape(4, 2) * 0.1 + i
        out.append((x, x.sum(1, keepdim=True) * 0.5 - 1.0))
    return out


class Linear2(pl.LightningModule):
    def __init__(self, step_lr: bool):
        super().__init__()
        self.linear = torch.nn.Linear(2, 1)
        self.step_lr = step_lr
        self.lrs: list[float] = []
        with torch.no_grad():
            self.linear.weight.copy_(torch.tensor([[0.3, -0.2]]))
            self.linear.bias.fill_(0.1)

    def training_step(self, batch, batch_idx):
        self.lrs.append(self.trainer.optimizers[0].param_groups[0]["lr"])
        return torch.nn.functional.mse_loss(self.linear(batch[0]), batch[1])

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        if not self.step_lr:
            return optimizer
        # Python's StepLR(step_size=2) halves where LibTorch's StepLR(step_size=1) does (after epoch 1).
        return {"optimizer": optimizer, "lr_scheduler": torch.optim.lr_scheduler.StepLR(optimizer, 2, 0.5)}


def run(callback, epochs: int, batch_count: int, step_lr: bool):
    model = Linear2(step_lr)
    with tempfile.TemporaryDirectory() as root:
        trainer = pl.Trainer(accelerator="cpu", devices=1, max_epochs=epochs, enable_progress_bar=False,
                             enable_model_summary=False, enable_checkpointing=False, logger=False,
                             default_root_dir=root, callbacks=[callback])
        trainer.fit(model, torch.utils.data.DataLoader(batches(batch_count), batch_size=None))
    weights = torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()
    return model.lrs, weights, trainer.global_step, trainer.current_epoch


print(f"lightning {pl.__version__}, torch {torch.__version__}")
cases = {
    "swa": (StochasticWeightAveraging(swa_lrs=0.02, swa_epoch_start=2, annealing_epochs=2), 5, 2, True),
    "swa_linear": (StochasticWeightAveraging(swa_lrs=0.03, swa_epoch_start=0.5, annealing_epochs=3,
                                             annealing_strategy="linear"), 6, 1, False),
    "ema": (EMAWeightAveraging(decay=0.9, update_every_n_steps=2), 2, 3, False),
}
for name, (callback, epochs, batch_count, step_lr) in cases.items():
    lrs, weights, step, epoch = run(callback, epochs, batch_count, step_lr)
    print(f"// {name}: global_step {step}, current_epoch {epoch}")
    print("lrs = {" + ", ".join(repr(v) for v in lrs) + "};")
    print("weights = {" + ", ".join(repr(v) for v in weights) + "};")


class SaveAtStep(pl.Callback):
    """Writes a checkpoint after optimizer step `step` (after the averaging callback's update)."""

    def __init__(self, step: int, path: str):
        self.step, self.path = step, path

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            trainer.save_checkpoint(self.path)


def flat_state(state) -> list:
    return torch.cat([state["linear.weight"].flatten(), state["linear.bias"].flatten()]).tolist()


with tempfile.TemporaryDirectory() as root:
    path = f"{root}/step3.ckpt"
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_epochs=2, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False, logger=False, default_root_dir=root,
                         callbacks=[EMAWeightAveraging(decay=0.9), SaveAtStep(3, path)])
    trainer.fit(Linear2(False), torch.utils.data.DataLoader(batches(3), batch_size=None))
    checkpoint = torch.load(path, weights_only=False)
print("// checkpoint after step 3 of EMAWeightAveraging(decay=0.9), 2 epochs of 3 batches")
print("state_dict = {" + ", ".join(repr(v) for v in flat_state(checkpoint["state_dict"])) + "};")
print("current_model_state = {" + ", ".join(repr(v) for v in flat_state(checkpoint["current_model_state"])) + "};")
print(f"averaging_state n_averaged = {int(checkpoint['averaging_state']['n_averaged'])}")
