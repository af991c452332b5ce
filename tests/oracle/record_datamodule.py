"""Records what Lightning 2.6.6 does in the cases of tests/trainer/datamodule_test.cpp: the order in which the
Trainer calls a LightningDataModule's hooks and dataloader functions, its messages for data given twice or
missing, where the datamodule's state goes in a checkpoint, how its hyperparameters merge with the model's,
overfit_batches (limits, the batches seen, the shuffling warning) and how often reload_dataloaders_every_n_epochs
calls the dataloader functions. The C++ test holds the printed values; run this to see them again:

    /opt/volt-venv/bin/python tests/oracle/record_datamodule.py
"""

from __future__ import annotations

import logging
import os
import tempfile
import warnings

for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
    logging.getLogger(name).setLevel(logging.ERROR)

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

QUIET = dict(accelerator="cpu", devices=1, enable_progress_bar=False, enable_model_summary=False,
             enable_checkpointing=False, logger=False)
calls: list[str] = []


def dataset(n: int, offset: float = 0.0) -> TensorDataset:
    # sample i has x = [offset + i, 0]: the batches' first values name the samples they hold
    x = torch.zeros(n, 2)
    x[:, 0] = torch.arange(n, dtype=torch.float32) + offset
    return TensorDataset(x, torch.zeros(n, 1))


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(2, 1)
        self.train_seen: list[list[int]] = []
        self.val_seen: list[list[int]] = []

    def training_step(self, batch, batch_idx):
        self.train_seen.append([int(v) for v in batch[0][:, 0]])
        return torch.nn.functional.mse_loss(self.l(batch[0]), batch[1])

    def validation_step(self, batch, batch_idx):
        self.val_seen.append([int(v) for v in batch[0][:, 0]])

    def test_step(self, batch, batch_idx):
        calls.append("model.test_step")

    def predict_step(self, batch, batch_idx):
        calls.append("model.predict_step")
        return batch[0]

    def configure_optimizers(self):
        calls.append("model.configure_optimizers")
        return torch.optim.SGD(self.parameters(), lr=0.01)


class HookedModel(Model):
    def setup(self, stage):
        calls.append(f"model.setup({stage})")

    def teardown(self, stage):
        calls.append(f"model.teardown({stage})")

    def on_fit_start(self):
        calls.append("model.on_fit_start")

    def on_fit_end(self):
        calls.append("model.on_fit_end")

    def on_train_start(self):
        calls.append("model.on_train_start")

    def on_train_epoch_start(self):
        calls.append(f"model.on_train_epoch_start({self.current_epoch})")

    def on_validation_start(self):
        calls.append("model.on_validation_start")


class Recorder(pl.Callback):
    def setup(self, trainer, pl_module, stage):
        calls.append(f"callback.setup({stage})")

    def teardown(self, trainer, pl_module, stage):
        calls.append(f"callback.teardown({stage})")

    def on_sanity_check_start(self, trainer, pl_module):
        calls.append("callback.on_sanity_check_start")

    def on_exception(self, trainer, pl_module, exception):
        calls.append("callback.on_exception")


class DM(pl.LightningDataModule):
    def __init__(self, n_train=8, n_val=4, batch_size=2, shuffle=False):
        super().__init__()
        self.n_train, self.n_val, self.batch_size, self.shuffle = n_train, n_val, batch_size, shuffle
        self.loaded = 0

    def prepare_data(self):
        calls.append("dm.prepare_data")

    def setup(self, stage):
        calls.append(f"dm.setup({stage})")

    def train_dataloader(self):
        calls.append(f"dm.train_dataloader({self.trainer.current_epoch})")
        return DataLoader(dataset(self.n_train), batch_size=self.batch_size, shuffle=self.shuffle)

    def val_dataloader(self):
        calls.append(f"dm.val_dataloader({self.trainer.current_epoch})")
        return DataLoader(dataset(self.n_val, 100), batch_size=self.batch_size, shuffle=self.shuffle)

    def test_dataloader(self):
        calls.append("dm.test_dataloader")
        return DataLoader(dataset(4, 200), batch_size=2)

    def predict_dataloader(self):
        calls.append("dm.predict_dataloader")
        return DataLoader(dataset(4, 300), batch_size=2)

    def teardown(self, stage):
        calls.append(f"dm.teardown({stage})")

    def state_dict(self):
        calls.append("dm.state_dict")
        return {"loaded": self.loaded + 5}

    def load_state_dict(self, state):
        calls.append(f"dm.load_state_dict({state['loaded']})")
        self.loaded = state["loaded"]

    def on_exception(self, exception):
        calls.append("dm.on_exception")


class TrainOnlyDM(pl.LightningDataModule):
    def train_dataloader(self):
        return DataLoader(dataset(4), batch_size=2)


def outcome(fn) -> str:
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn()
        relevant = [str(w.message) for w in caught if "val" in str(w.message) or "overfit" in str(w.message)
                    or "shuffl" in str(w.message)]
        return "no error" + "".join(f"\n  warning: {m!r}" for m in relevant)
    except Exception as error:  # noqa: BLE001
        return f"{type(error).__name__} {str(error)!r}"


def show(tag: str, value) -> None:
    print(f"{tag}: {value}")


def main() -> None:
    torch.manual_seed(0)
    root = tempfile.mkdtemp()

    # ORDER: fit with a datamodule, 2 epochs, sanity check 2, then validate, test, predict.
    calls.clear()
    trainer = pl.Trainer(max_epochs=2, limit_train_batches=2, limit_val_batches=1, num_sanity_val_steps=2,
                         callbacks=[Recorder()], default_root_dir=root, **QUIET)
    dm = DM()
    trainer.fit(HookedModel(), datamodule=dm)
    show("ORDER fit", calls)
    calls.clear()
    trainer.validate(HookedModel(), datamodule=dm, verbose=False)
    show("ORDER validate", calls)
    calls.clear()
    trainer.test(HookedModel(), datamodule=dm, verbose=False)
    show("ORDER test", calls)
    calls.clear()
    trainer.predict(HookedModel(), datamodule=dm)
    show("ORDER predict", calls)

    # ORDER0: no sanity check.
    calls.clear()
    trainer = pl.Trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=1, num_sanity_val_steps=0,
                         callbacks=[Recorder()], default_root_dir=root, **QUIET)
    trainer.fit(HookedModel(), DM())
    show("ORDER0 fit", calls)

    # CKPT: the datamodule's state in a checkpoint, and its restore on resume.
    calls.clear()
    trainer = pl.Trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=0, default_root_dir=root, **QUIET)
    trainer.fit(HookedModel(), DM())
    path = os.path.join(root, "dm.ckpt")
    trainer.save_checkpoint(path)
    checkpoint = torch.load(path, weights_only=False)
    show("CKPT keys", sorted(k for k in checkpoint if k[0].isupper()))
    show("CKPT value", checkpoint["DM"])
    calls.clear()
    trainer = pl.Trainer(max_epochs=2, limit_train_batches=1, limit_val_batches=0, default_root_dir=root, **QUIET)
    trainer.fit(HookedModel(), DM(), ckpt_path=path)
    show("CKPT resume", calls)

    # ERROR: a failing training step: on_exception order, no teardown.
    class Failing(HookedModel):
        def training_step(self, batch, batch_idx):
            raise RuntimeError("boom")

    calls.clear()
    trainer = pl.Trainer(max_epochs=1, limit_train_batches=1, num_sanity_val_steps=0, callbacks=[Recorder()],
                         default_root_dir=root, **QUIET)
    outcome(lambda: trainer.fit(Failing(), DM()))
    show("ERROR fit", calls)

    # MSG: messages.
    trainer = pl.Trainer(max_epochs=1, default_root_dir=root, **QUIET)
    loader = DataLoader(dataset(4), batch_size=2)
    show("MSG fit both", outcome(lambda: trainer.fit(Model(), loader, datamodule=DM())))
    show("MSG fit val and dm", outcome(lambda: trainer.fit(Model(), val_dataloaders=loader, datamodule=DM())))
    show("MSG validate both", outcome(lambda: trainer.validate(Model(), loader, datamodule=DM(), verbose=False)))
    show("MSG test both", outcome(lambda: trainer.test(Model(), loader, datamodule=DM(), verbose=False)))
    show("MSG predict both", outcome(lambda: trainer.predict(Model(), loader, datamodule=DM())))
    show("MSG validate no val", outcome(lambda: trainer.validate(Model(), TrainOnlyDM(), verbose=False)))
    show("MSG test no test", outcome(lambda: trainer.test(Model(), TrainOnlyDM(), verbose=False)))
    show("MSG predict no predict", outcome(lambda: trainer.predict(Model(), TrainOnlyDM())))
    show("MSG fit no train", outcome(lambda: trainer.fit(Model(), pl.LightningDataModule())))
    trainer = pl.Trainer(max_epochs=1, limit_train_batches=1, default_root_dir=root, **QUIET)
    show("MSG fit train only", outcome(lambda: trainer.fit(Model(), TrainOnlyDM())))

    class NoValStep(Model):
        validation_step = None

    trainer = pl.Trainer(max_epochs=1, limit_train_batches=1, default_root_dir=root, **QUIET)
    show("MSG fit no validation_step", outcome(lambda: trainer.fit(NoValStep(), DM())))

    # HPARAMS: the model's and the datamodule's hyperparameters, merged for the loggers.
    class HModel(Model):
        def __init__(self, lr=0.1, batch_size=2):
            super().__init__()
            self.save_hyperparameters()

    class HDM(DM):
        def __init__(self, batch_size=2, workers=0):
            super().__init__(batch_size=batch_size)
            self.save_hyperparameters()

    class Capture(pl.loggers.CSVLogger):
        seen = []

        def log_hyperparams(self, params, *args, **kwargs):
            Capture.seen.append(dict(params))

    def fit_h(model, dm):
        trainer = pl.Trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=0, accelerator="cpu",
                             devices=1, enable_progress_bar=False, enable_model_summary=False,
                             enable_checkpointing=False, logger=Capture(root), default_root_dir=root)
        trainer.fit(model, dm)

    Capture.seen.clear()
    fit_h(HModel(), HDM(workers=3))
    show("HPARAMS merged", sorted(Capture.seen[0].items()))
    show("HPARAMS conflict", outcome(lambda: fit_h(HModel(batch_size=4), HDM(batch_size=2))))

    # OVERFIT: limits, batches, shuffling.
    def overfit(tag, shuffle=False, **kwargs):
        model = Model()
        args = dict(max_epochs=2, num_sanity_val_steps=0, default_root_dir=root, **QUIET)
        args.update(kwargs)
        trainer = pl.Trainer(**args)
        result = outcome(lambda: trainer.fit(model, DM(n_train=10, n_val=6, shuffle=shuffle)))
        show(f"OVERFIT {tag}", f"{result}\n  limits: train={trainer.limit_train_batches!r} "
                               f"val={trainer.limit_val_batches!r} test={trainer.limit_test_batches!r} "
                               f"predict={trainer.limit_predict_batches!r} sanity={trainer.num_sanity_val_steps!r}"
                               f"\n  train: {model.train_seen}\n  val: {model.val_seen}")

    overfit("count", overfit_batches=2)
    overfit("fraction", overfit_batches=0.5)
    overfit("with limits", overfit_batches=2, limit_train_batches=4, limit_val_batches=3, limit_test_batches=1)
    overfit("shuffled", shuffle=True, overfit_batches=2)
    overfit("fast_dev_run", overfit_batches=3, fast_dev_run=2)
    overfit("sanity", overfit_batches=1, num_sanity_val_steps=2)
    show("OVERFIT bad", outcome(lambda: pl.Trainer(overfit_batches=1.5, **QUIET)))
    show("OVERFIT negative", outcome(lambda: pl.Trainer(overfit_batches=-1, **QUIET)))

    # RELOAD: the dataloader calls per epoch (the epoch each call saw).
    def reload(n, every=1, sanity=0, epochs=5, limit_val=1.0):
        calls.clear()
        trainer = pl.Trainer(max_epochs=epochs, limit_train_batches=2, limit_val_batches=limit_val,
                             num_sanity_val_steps=sanity, check_val_every_n_epoch=every,
                             reload_dataloaders_every_n_epochs=n, default_root_dir=root, **QUIET)
        trainer.fit(Model(), DM())
        train = [c.split("(")[1][:-1] for c in calls if c.startswith("dm.train_dataloader")]
        val = [c.split("(")[1][:-1] for c in calls if c.startswith("dm.val_dataloader")]
        show(f"RELOAD n={n} every={every} sanity={sanity} limit_val={limit_val}",
             f"train at epochs {train}, val at epochs {val}")

    for n in (0, 1, 2, 3):
        for every in (1, 2):
            for sanity in (0, 2):
                reload(n, every, sanity)
    reload(1, 1, 2, limit_val=0)
    show("RELOAD bad", outcome(lambda: pl.Trainer(reload_dataloaders_every_n_epochs=-1, **QUIET)))


if __name__ == "__main__":
    main()
