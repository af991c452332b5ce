"""Lightning 2.6.6's Trainer as the oracle for volt::Trainer's step counting (issue 11, spec section 7).

Each case is a tiny fit on the CPU: a Linear(2, 1) model, SGD, `batches` training batches of one sample and up to
two validation batches, no sanity check, no logger, progress bar, summary or checkpointing, and a grid value of
(batches, accumulate_grad_batches, max_steps, max_epochs, val_check_interval, check_val_every_n_epoch). Both
sides record the same events from callbacks: every optimizer step (`on_before_optimizer_step`: epoch and batch
index) and every validation run (`on_validation_start` outside the sanity check: epoch and the last training
batch before it), then `global_step` and `current_epoch` after fit. Outcomes must be identical; a configuration
that Lightning refuses must be refused by volt.

    python trainer_oracle.py --volt-oracle build/tests/volt_oracle [--cases N]
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import random
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lightning  # noqa: E402
import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402

from differences import for_oracle  # noqa: E402
from oracle_common import compare, python_error, run_volt  # noqa: E402

SEED = 11

# Spec section 7 [E] rows first: 5 batches, k=2 -> steps after batches 1, 3, 4; k=3 -> after 2 and 4.
FIXED_CASES = [
    (5, 2, -1, 1, "1.0", "1"),
    (5, 3, -1, 1, "1.0", "1"),
    (5, 1, 3, None, "1.0", "1"),
    (4, 1, -1, 3, "2", "None"),
    (3, 1, -1, 3, "5", "None"),
    (4, 1, -1, 2, "0.5", "1"),
    (4, 2, -1, 4, "1.0", "2"),
]

GRID = {
    "batches": [1, 2, 3, 5],
    "accumulate": [1, 2, 3],
    "max_steps": [-1, 1, 3, 5],
    "max_epochs": [1, 2, 3, None],
    "val_check_interval": ["1.0", "0.5", "0.3", "1", "2", "3", "7"],
    "check_val_every_n_epoch": ["1", "2", "None"],
}


class TinyModel(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.linear(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        torch.nn.functional.mse_loss(self.linear(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class EventRecorder(pl.Callback):
    def __init__(self):
        self.events, self.current, self.last = [], -1, -1

    def on_train_epoch_start(self, trainer, pl_module):
        self.last = -1

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.current = batch_idx

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.last = batch_idx

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self.events.append(f"S{trainer.current_epoch}:{self.current}")

    def on_validation_start(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self.events.append(f"V{trainer.current_epoch}:{self.last}")


def loaders(batches: int):
    x = torch.tensor([[0.1 * (i + 1)] * 2 for i in range(batches)])
    dataset = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True))
    train = torch.utils.data.DataLoader(dataset, batch_size=1)
    val = torch.utils.data.DataLoader(torch.utils.data.Subset(dataset, range(min(batches, 2))), batch_size=1)
    return train, val


def lightning_outcome(case) -> tuple:
    batches, accumulate, max_steps, max_epochs, interval, every = case
    recorder = EventRecorder()
    try:
        trainer = pl.Trainer(
            accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
            enable_model_summary=False, num_sanity_val_steps=0, callbacks=[recorder],
            accumulate_grad_batches=accumulate, max_steps=max_steps, max_epochs=max_epochs,
            val_check_interval=float(interval) if "." in interval else int(interval),
            check_val_every_n_epoch=None if every == "None" else int(every),
        )
        train, val = loaders(batches)
        trainer.fit(TinyModel(), train, val)
    except Exception as error:  # noqa: BLE001 - an exception is an outcome to compare
        return python_error(error)
    return ("ok", " ".join(recorder.events), f"global_step={trainer.global_step}",
            f"current_epoch={trainer.current_epoch}")


def volt_line(case) -> str:
    batches, accumulate, max_steps, max_epochs, interval, every = case
    return "\t".join([str(batches), str(accumulate), str(max_steps), str(max_epochs), interval, every])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--volt-oracle", required=True, help="path of the volt_oracle program")
    parser.add_argument("--cases", type=int, default=400, help="grid cases drawn (seeded) besides the fixed ones")
    arguments = parser.parse_args()

    grid = [
        case for case in itertools.product(*GRID.values())
        if case[3] is not None or case[2] > 0  # max_epochs=None needs max_steps, else Lightning trains 1000 epochs
    ]
    cases = FIXED_CASES + random.Random(SEED).sample(grid, min(arguments.cases, len(grid)))

    warnings.filterwarnings("ignore")
    for name in ("lightning.pytorch", "lightning.fabric", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)
    torch.set_num_threads(1)
    lightning_outcomes = [lightning_outcome(case) for case in cases]
    volt_outcomes = run_volt(arguments.volt_oracle, "trainer", [volt_line(case) for case in cases])

    print(f"lightning {lightning.__version__}; {len(FIXED_CASES)} fixed + {len(cases) - len(FIXED_CASES)} grid cases "
          f"(seed {SEED}, grid of {len(grid)})")
    ok = compare(
        "trainer step counting", cases, lightning_outcomes, volt_outcomes, for_oracle("trainer"),
        lambda case: "batches={} accumulate_grad_batches={} max_steps={} max_epochs={} val_check_interval={} "
        "check_val_every_n_epoch={}".format(*case),
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
