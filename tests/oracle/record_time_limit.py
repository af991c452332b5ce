"""Records Lightning 2.6.6's messages for max_time, Timer and ModelCheckpoint(train_time_interval), held by
tests/trainer/time_limit_test.cpp:

    /opt/volt-venv/bin/python tests/oracle/record_time_limit.py
"""

from __future__ import annotations

import datetime
import logging
import time
import warnings

warnings.filterwarnings("ignore")

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.callbacks import ModelCheckpoint, Timer  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402


def outcome(fn) -> str:
    try:
        fn()
        return "no error"
    except Exception as error:  # noqa: BLE001
        return f"{type(error).__name__} {str(error)!r}"


class Slow(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        time.sleep(0.02)
        return torch.nn.functional.mse_loss(self.l(batch[0]), batch[1])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main() -> None:
    for text in ["1:2:3", "00:1:00:00", "00:00:00:00:00", ""]:
        print("BAD", repr(text), outcome(lambda: Timer(duration=text)))
        print("BAD max_time", repr(text), outcome(lambda: pl.Trainer(max_time=text, logger=False)))
    print("COMBINATION", outcome(lambda: ModelCheckpoint(every_n_train_steps=3,
                                                         train_time_interval=datetime.timedelta(seconds=5))))
    print("COMBINATION", outcome(lambda: ModelCheckpoint(every_n_epochs=1,
                                                         train_time_interval=datetime.timedelta(seconds=1.5))))
    print("COMBINATION", outcome(lambda: ModelCheckpoint(every_n_train_steps=2, every_n_epochs=1)))
    for seconds in [5, 1.5, 86400 + 2 * 3600 + 3 * 60 + 4, 3 * 86400, 0]:
        print("TIMEDELTA", seconds, str(datetime.timedelta(seconds=seconds)))
    # min_steps against max_time; a Timer given beside max_time.
    logging.basicConfig(level=logging.INFO, format="INFO %(message)s")
    data = DataLoader(TensorDataset(torch.randn(5, 2), torch.randn(5, 1)), batch_size=1)
    quiet = dict(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
                 enable_checkpointing=False, max_epochs=-1, max_steps=50)
    trainer = pl.Trainer(min_steps=12, max_time=datetime.timedelta(milliseconds=1), **quiet)
    trainer.fit(Slow(), data)
    print("MIN_STEPS global_step", trainer.global_step)
    trainer = pl.Trainer(max_time=datetime.timedelta(milliseconds=1), callbacks=[Timer(duration="00:01:00:00")],
                         **quiet)
    trainer.fit(Slow(), data)
    print("GIVEN_TIMER global_step", trainer.global_step)
    trainer = pl.Trainer(max_time="00:00:00:01", **quiet)
    trainer.fit(Slow(), data)
    print("STOPPED global_step", trainer.global_step)


if __name__ == "__main__":
    main()
