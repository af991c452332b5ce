"""Records Lightning 2.6.6's SimpleProfiler report (its layout, action names and file name) and its message for
an unknown `profiler=` string, held by tests/trainer/profiler_test.cpp:

    /opt/volt-venv/bin/python tests/oracle/record_profiler.py

Recorded (2 epochs of 3 training batches, 2 validation batches, no sanity check):
* the report goes to `<dirpath>/fit-<filename>.txt` (opened for appending); with filename unset it is printed;
  with filename set and dirpath unset the dirpath is trainer.log_dir;
* first line "FIT Profiler Report", an empty line, a separator of len(header.expandtabs()) dashes counting the
  leading newline, the header row `|  Action<pad to the longest action>\\t|  Mean duration (s)\\t|  Num calls
  \\t|  Total time (s) \\t|  Percentage %   \\t|` (columns of 15, left-aligned), the separator, the Total row
  (`-` as mean, the calls summed, the time since the profiler was made), the separator, one row per action
  sorted by percentage (descending), the separator;
* numbers formatted as Python's `{x:.5}`; the model's hooks as "[LightningModule]M.<hook>", training_step as
  "[Strategy]SingleDeviceStrategy.training_step", the loops' "run_training_epoch" (once per epoch),
  "run_training_batch" and "[_TrainingEpochLoop].train_dataloader_next" (once per batch);
* unknown string: MisconfigurationException "When passing string value for the `profiler` parameter of
  `Trainer`, it can only be one of ['simple', 'advanced', 'pytorch', 'xla']".
"""

from __future__ import annotations

import os
import re
import tempfile
import warnings

warnings.filterwarnings("ignore")

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.profilers import SimpleProfiler  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402


class Net(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.linear(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.linear(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=1.0)


def main() -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(12, 2), torch.randn(12, 1))
    with tempfile.TemporaryDirectory() as root:
        profiler = SimpleProfiler(dirpath=root, filename="perf")
        trainer = pl.Trainer(max_epochs=2, num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False, default_root_dir=root,
                             profiler=profiler)
        trainer.fit(Net(), DataLoader(data, batch_size=4), DataLoader(data, batch_size=6))
        print("files:", sorted(os.listdir(root)))
        report = open(os.path.join(root, "fit-perf.txt")).read()
        lines = report.split("\n")
        print("first line:", repr(lines[0]), "second:", repr(lines[1]))
        print("separator length:", len(lines[2]))
        print("header:", repr(lines[3]))
        for line in lines[4:]:
            cells = [c.strip() for c in line.split("|")[1:-1]]
            if len(cells) == 5:
                print("row:", cells[0], "calls", cells[2])
        # the layout with every number replaced by N
        print(re.sub(r"\d[\d.e+-]*", "N", report))
    try:
        pl.Trainer(profiler="foo")
    except Exception as error:  # noqa: BLE001
        print(f"{type(error).__name__} {str(error)!r}")


if __name__ == "__main__":
    main()
