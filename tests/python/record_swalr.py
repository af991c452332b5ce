"""Records torch.optim.swa_utils.SWALR's learning rates for tests/trainer/weight_averaging_test.cpp.

Run: /opt/volt-venv/bin/python tests/python/record_swalr.py
Prints, for each configuration, the rate after construction and after each of 8 step() calls, as C++
initializers (repr precision). Two param groups with base rates 0.1 and 0.02, swa_lrs 0.05 and 0.01.
"""
import warnings

import torch
from torch.optim.swa_utils import SWALR

warnings.simplefilter("ignore")
print(torch.__version__)
for strategy, anneal_epochs in (("cos", 3), ("linear", 3), ("cos", 0), ("linear", 1)):
    p1 = torch.nn.Parameter(torch.zeros(1))
    p2 = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([{"params": [p1], "lr": 0.1}, {"params": [p2], "lr": 0.02}], lr=0.1)
    scheduler = SWALR(optimizer, swa_lr=[0.05, 0.01], anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    rows = [[g["lr"] for g in optimizer.param_groups]]
    for _ in range(8):
        optimizer.step()
        scheduler.step()
        rows.append([g["lr"] for g in optimizer.param_groups])
    print(f'// {strategy}, anneal_epochs={anneal_epochs}')
    print("{" + ", ".join("{" + ", ".join(repr(v) for v in row) + "}" for row in rows) + "}")
