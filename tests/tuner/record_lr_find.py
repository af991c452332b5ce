"""Records Lightning 2.6's Tuner.lr_find on a small regression model (SGD with momentum): the learning rates,
the smoothed losses, the raw training losses, the suggestion and its index, for an exponential sweep with
Lightning's defaults and a linear sweep that stops early. Writes the C++ header on stdout:
    /opt/volt-venv/bin/python tests/tuner/record_lr_find.py > tests/tuner/lr_find_recorded.hpp
"""
import tempfile, torch, lightning.pytorch as pl, logging, sys
from torch.utils.data import TensorDataset, DataLoader
logging.getLogger("lightning").setLevel(logging.ERROR)
class M(pl.LightningModule):
    def __init__(self):
        super().__init__(); torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)); self.lr = 1e-3
    def training_step(self, b, i):
        x, y = b; loss = torch.nn.functional.mse_loss(self.net(x), y); RAW.append(loss.item()); return loss
    def configure_optimizers(self): return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)
RAW = []
def run(mode, **kw):
    RAW.clear()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(640, 8, generator=g); y = x.sum(1, keepdim=True) * 0.5 + 0.1 * torch.randn(640, 1, generator=g)
    dl = DataLoader(TensorDataset(x, y), batch_size=16)
    t = pl.Trainer(max_epochs=1000, logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, default_root_dir=tempfile.mkdtemp())
    from lightning.pytorch.tuner import Tuner
    f = Tuner(t).lr_find(M(), train_dataloaders=dl, mode=mode, **kw)
    s = f.suggestion(); return f.results["lr"], f.results["loss"], s, f._optimal_idx, list(RAW)
def arr(v): return "{" + ", ".join(repr(float(a)) for a in v) + "}"
out = ["// Recorded from Lightning 2.6.6 (tests/tuner/record_lr_find.py); do not edit.", "#pragma once", "#include <vector>", "namespace lr_find_recorded {"]
for name, mode, kw in [("exponential", "exponential", {}), ("linear", "linear", dict(min_lr=1e-4, max_lr=0.5, num_training=60))]:
    lrs, losses, s, idx, raw = run(mode, **kw)
    print(name, len(lrs), s, idx, file=sys.stderr)
    out += [f"inline const std::vector<double> {name}_lrs{arr(lrs)};", f"inline const std::vector<double> {name}_losses{arr(losses)};",
            f"inline const std::vector<double> {name}_raw_losses{arr(raw)};", f"inline constexpr double {name}_suggestion = {s!r};", f"inline constexpr int {name}_index = {idx};"]
out.append("}  // namespace lr_find_recorded")
print("\n".join(out))
