"""Records Lightning 2.6.6's seed_everything (return values, environment, messages, the first draws after
seed 42) for tests/core/seed_test.cpp:

    /opt/volt-venv/bin/python tests/oracle/record_seed.py
"""
import os, logging, warnings
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
from lightning.pytorch import seed_everything
import torch
for env in [None, "123", " 7 ", "abc", "1.5"]:
    os.environ.pop("PL_GLOBAL_SEED", None)
    if env is not None: os.environ["PL_GLOBAL_SEED"] = env
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try: print("ENV", repr(env), "->", seed_everything(), os.environ["PL_SEED_WORKERS"], [str(x.message) for x in w])
        except Exception as e: print("ENV", repr(env), type(e).__name__, repr(str(e)))
for s in [-1, 4294967296, 4294967295]:
    try: print("S", s, seed_everything(s, workers=True), os.environ["PL_GLOBAL_SEED"], os.environ["PL_SEED_WORKERS"])
    except Exception as e: print("S", s, type(e).__name__, repr(str(e)))
seed_everything(42); print("RAND", torch.rand(3).tolist())
os.environ["LOCAL_RANK"]="1"; seed_everything(5)
