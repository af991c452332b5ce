"""Records what Lightning 2.6.6 does in the cases of tests/trainer/loop_mends_test.cpp (hook order, values logged
in epoch-level hooks, val_check_interval without validation data, the fractions in the limit_train_batches
message). The C++ test holds the printed values; run this to see them again:

    /opt/volt-venv/bin/python tests/oracle/record_loop_mends.py
"""

from __future__ import annotations

import logging
import os
import tempfile
import warnings

warnings.filterwarnings("ignore")
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.loggers import CSVLogger  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

HOOKS = ["on_fit_start", "on_train_start", "on_train_epoch_start", "on_train_batch_start", "on_before_zero_grad",
         "on_before_backward", "on_after_backward", "on_before_optimizer_step", "on_train_batch_end",
         "on_validation_epoch_start", "on_validation_batch_start", "on_validation_batch_end",
         "on_validation_epoch_end", "on_train_epoch_end"]
QUIET = dict(accelerator="cpu", devices=1, enable_progress_bar=False, enable_model_summary=False,
             enable_checkpointing=False, num_sanity_val_steps=0)
calls: list[str] = []


def recorder(prefix: str, hook: str):
    def record(self, *args, **kwargs):
        calls.append(f"{prefix}.{hook}")
    return record


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        calls.append("model.training_step")
        return torch.nn.functional.mse_loss(self.l(batch[0]), batch[1])

    def validation_step(self, batch, batch_idx):
        calls.append("model.validation_step")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Recorder(pl.Callback):
    pass


class HookedModel(Model):
    pass


for name in HOOKS:
    setattr(HookedModel, name, recorder("model", name))
    setattr(Recorder, name, recorder("callback", name))


def data(n: int = 4, batch_size: int = 2) -> DataLoader:
    return DataLoader(TensorDataset(torch.randn(n, 2), torch.randn(n, 1)), batch_size=batch_size)


def outcome(fn) -> str:
    try:
        fn()
        return "no error"
    except Exception as error:  # noqa: BLE001
        return f"{type(error).__name__} {str(error)!r}"


def main() -> None:
    torch.manual_seed(0)
    pl.Trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=1, logger=False, callbacks=[Recorder()],
               **QUIET).fit(HookedModel(), data(), data())
    print("ORDER", calls)

    print("VCI", outcome(lambda: pl.Trainer(max_epochs=1, limit_train_batches=1, val_check_interval=3, logger=False,
                                            **QUIET).fit(Model(), data())))
    print("VCI limit0", outcome(lambda: pl.Trainer(max_epochs=1, limit_train_batches=1, val_check_interval=3,
                                                   limit_val_batches=0, logger=False, **QUIET).fit(Model(), data())))
    for n, fraction in [(3, 0.1), (4, 0.1), (64, 0.01)]:
        print("FRAC", n, fraction, outcome(lambda: pl.Trainer(max_epochs=1, limit_train_batches=fraction, logger=False,
                                                              **QUIET).fit(Model(), data(n, 1))))

    class EpochEndLogger(pl.Callback):
        def on_train_epoch_end(self, trainer, module):
            module.log("cb_train", float(trainer.current_epoch) * 10 + 1)

        def on_validation_epoch_end(self, trainer, module):
            if not trainer.sanity_checking:
                module.log("cb_val", float(trainer.current_epoch) * 10 + 2)

    class EpochEndModel(Model):
        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            self.log("loss", loss)
            return loss

        def on_train_epoch_end(self):
            self.log("model_train", float(self.current_epoch) + 0.5)

        def validation_step(self, batch, batch_idx):
            self.log("v", 1.0)

    folder = tempfile.mkdtemp()
    options = dict(QUIET, num_sanity_val_steps=2)
    pl.Trainer(max_epochs=2, log_every_n_steps=1, logger=CSVLogger(folder, name="", version=""),
               callbacks=[EpochEndLogger()], **options).fit(EpochEndModel(), data(), data())
    print("CSV")
    print(open(os.path.join(folder, "metrics.csv")).read())

    class StepInEpochEnd(pl.Callback):
        def on_train_epoch_end(self, trainer, module):
            module.log("x", 1.0, on_step=True)

    class NoEpochInValidationEnd(pl.Callback):
        def on_validation_epoch_end(self, trainer, module):
            module.log("x", 1.0, on_epoch=False)

    print("BAD", outcome(lambda: pl.Trainer(max_epochs=1, logger=False, callbacks=[StepInEpochEnd()],
                                            **QUIET).fit(Model(), data())))
    print("BAD2", outcome(lambda: pl.Trainer(max_epochs=1, logger=False, callbacks=[NoEpochInValidationEnd()],
                                             **QUIET).fit(Model(), data(), data())))

    class InBatchEnd(pl.Callback):
        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            module.log("b", 3.0)

    folder = tempfile.mkdtemp()
    pl.Trainer(max_epochs=1, log_every_n_steps=1, logger=CSVLogger(folder, name="", version=""),
               callbacks=[InBatchEnd()], **QUIET).fit(Model(), data())
    print("BATCH_END")
    print(open(os.path.join(folder, "metrics.csv")).read())

    from lightning.pytorch.callbacks import GradientAccumulationScheduler

    class StepPositions(Model):
        def __init__(self):
            super().__init__()
            self.steps = []

        def on_before_optimizer_step(self, optimizer):
            self.steps.append((self.current_epoch, self.trainer.fit_loop.epoch_loop.batch_idx))

    model = StepPositions()
    pl.Trainer(max_epochs=3, logger=False, callbacks=[GradientAccumulationScheduler({1: 2, 2: 3})],
               **QUIET).fit(model, data(5, 1))
    print("SCHEDULE", model.steps)
    print("SCHEDULE with accumulate_grad_batches=2",
          outcome(lambda: pl.Trainer(max_epochs=1, accumulate_grad_batches=2, logger=False,
                                     callbacks=[GradientAccumulationScheduler({0: 2})], **QUIET).fit(Model(), data())))
    for schedule in [{}, {-1: 2, 3: 1}, {0: 0, 3: 1}]:
        print("SCHEDULE", schedule, outcome(lambda: GradientAccumulationScheduler(schedule)))


def skip_and_frequency() -> None:
    """on_train_batch_start returning -1, and the step-interval schedulers' frequency."""

    class Skipping(Model):
        def __init__(self, skip_at, frequency=1):
            super().__init__()
            self.skip_at, self.frequency, self.events, self.position = skip_at, frequency, [], None

        def on_train_batch_start(self, batch, batch_idx):
            self.position = (self.current_epoch, batch_idx)
            if self.position in self.skip_at:
                return -1

        def training_step(self, batch, batch_idx):
            self.events.append(("train", self.current_epoch, batch_idx))
            return super().training_step(batch, batch_idx)

        def on_train_batch_end(self, outputs, batch, batch_idx):
            self.events.append(("batch_end", self.current_epoch, batch_idx))

        def validation_step(self, batch, batch_idx):
            self.events.append(("val", self.current_epoch, batch_idx))

        def on_train_epoch_end(self):
            self.events.append(("epoch_end", self.current_epoch, self.global_step))

        def configure_optimizers(self):
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: 1.0)
            step = scheduler.step

            def recorded(*args, **kwargs):
                self.events.append(("scheduler", *self.position))
                return step(*args, **kwargs)

            scheduler.step = recorded
            return {"optimizer": optimizer,
                    "lr_scheduler": {"scheduler": scheduler, "interval": "step", "frequency": self.frequency}}

    cases = [("SKIP", dict(skip_at={(0, 3)}), dict(), 6),
             ("SKIP first batch", dict(skip_at={(1, 0)}), dict(), 6),
             ("SKIP accumulate 2", dict(skip_at={(0, 3)}), dict(accumulate_grad_batches=2), 6),
             ("FREQUENCY 3", dict(skip_at=set(), frequency=3), dict(), 10),
             ("FREQUENCY 2 accumulate 2", dict(skip_at=set(), frequency=2), dict(accumulate_grad_batches=2), 10),
             ("FREQUENCY 3 skip", dict(skip_at={(0, 4)}, frequency=3), dict(), 10)]
    for label, model_args, trainer_args, batches in cases:
        model = Skipping(**model_args)
        trainer = pl.Trainer(max_epochs=2, logger=False, **trainer_args, **QUIET)
        trainer.fit(model, data(batches, 1), data(2, 1))
        print(label, "global_step", trainer.global_step)
        print(label, model.events)


if __name__ == "__main__":
    main()
    skip_and_frequency()
