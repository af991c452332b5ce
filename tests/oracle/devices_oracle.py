"""Lightning 2.6.6's device parsers and accelerators as the oracle for volt's (issue 11, spec section 1).

Every case is (accelerator, faked machine, devices spec). Lightning runs here: `<Accelerator>.parse_devices(spec)`
and `get_parallel_devices` of lightning.pytorch's CPUAccelerator / CUDAAccelerator / MPSAccelerator, with the
machine faked the way Lightning's own tests fake it (tests/tests_pytorch/conftest.py: `num_cuda_devices` patched in
lightning.fabric.accelerators.cuda and lightning.pytorch.accelerators.cuda, `MPSAccelerator.is_available` patched
on the Fabric and the Trainer class, TORCHELASTIC_RUN_ID set for the torchrun cases). volt runs in volt_oracle:
`volt::CPU/CUDA/MPS::parse_devices` and `get_parallel_devices` under a `volt::testing::ScopedMachine`.

Outcomes compared: the id list (None for "no devices") and the parallel devices, or the error class and message.
Lightning's CPU parser returns a process count n; volt's returns the ids 0..n-1 (what trainer.device_ids shows):
the count is compared as range(n).

Inputs: every spec form of spec section 1 (P-rows and the quirks of section 8) except the TypeError forms (None,
bool, float, set, range, lists of non-ints), which are compile errors in volt; plus random specs from a fixed seed:
ints, strings over the characters `0-9 , - space [ ]`, and id lists. Machines: CUDA with 0, 1, 2, 4 and 16
devices x MPS available or not, and three torchrun (TorchElastic) machines.

    python devices_oracle.py --volt-oracle build/tests/volt_oracle

The differences volt makes on purpose are rows D1-D6 of differences.py.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.pop("TORCHELASTIC_RUN_ID", None)
os.environ.pop("DISABLE_MPS", None)

import lightning  # noqa: E402
import lightning.fabric.accelerators.cuda as fabric_cuda  # noqa: E402
import lightning.fabric.accelerators.mps as fabric_mps  # noqa: E402
import lightning.pytorch.accelerators.cuda as trainer_cuda  # noqa: E402
import lightning.pytorch.accelerators.mps as trainer_mps  # noqa: E402
from lightning.pytorch.accelerators import CPUAccelerator, CUDAAccelerator, MPSAccelerator  # noqa: E402

from differences import MAX_DEVICE_COUNT, for_oracle, gpu_count_request  # noqa: E402
from oracle_common import compare, python_error, run_volt, to_hex  # noqa: E402

SEED = 11
INT_MIN, INT_MAX = -(2**31), 2**31 - 1

# (CUDA device count, MPS available, launched by torchrun)
MACHINES = [(cuda, mps, False) for cuda in (0, 1, 2, 4, 16) for mps in (False, True)] + [
    (1, False, True),
    (2, True, True),
    (0, True, True),
]
ACCELERATORS = ("cpu", "cuda", "mps")


class Spec:
    """A devices value: form is "int", "str", "list", "tuple" (sent to volt as a list) or "auto"."""

    def __init__(self, form, value, label=""):
        self.form, self.value, self.label = form, value, label

    def python(self):
        if self.form == "auto":
            return "auto"  # what `_parse_gpu_ids` would see if "auto" reached it (the connector resolves it first)
        if self.form == "tuple":
            return tuple(self.value)
        return self.value

    def volt_fields(self):
        if self.form == "int":
            return "int", str(self.value)
        if self.form == "str":
            return "str", to_hex(self.value)
        if self.form in ("list", "tuple"):
            return "list", ",".join(str(v) for v in self.value)
        return "auto", ""

    def __repr__(self):
        return {"auto": "DeviceSpec{} ('auto')"}.get(self.form, repr(self.python()))


# Spec section 1.2 rows and the quirks of section 8 (TypeError forms left out: they do not compile in volt).
SECTION_1_SPECS = (
    [Spec("int", v) for v in (0, 1, 2, 3, -1, -2, 4, 15, 16, 17, 65536, 65537)]
    + [
        Spec("str", v)
        for v in (
            "0", "1", "2", "3", "-1", " -1", "-1 ", " 0 ", "0,", "2,", ",1", "1, 3", "1,,3", "3,1", "0,0", "1,1",
            "-1,", " 1 , 3 ", "[0]", "[]", "", "1.5", "abc", "auto", "-2", "00", "-0", ",", ",,", " ", "16", "17",
            "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15", "65537", "2147483647", "2147483648", "-2147483649",
        )
    ]
    + [Spec("list", v) for v in ([], [0], [1, 3], [3, 1], [-1], [0, 0], [1, 1], [15], [16], list(range(16)))]
    + [Spec("tuple", (1, 3)), Spec("tuple", ()), Spec("auto", None)]
)


def random_specs(rng: random.Random) -> list[Spec]:
    specs = []
    for _ in range(3000):
        roll = rng.random()
        if roll < 0.75:
            value = rng.randint(-20, 40)
        elif roll < 0.9:
            value = rng.randint(-300, 300)
        else:
            extreme = rng.choice([INT_MAX, INT_MIN, INT_MAX + 1, INT_MIN - 1, 2**40, -(2**40), 2**62])
            value = extreme + rng.randint(-2, 2)
        specs.append(Spec("int", value))
    alphabet = "0123456789,- []"
    for _ in range(6000):
        if rng.random() < 0.5:
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        else:
            pieces = []
            for _ in range(rng.randint(1, 5)):
                roll = rng.random()
                number = (
                    str(rng.randint(-2, 17))
                    if roll < 0.8
                    else "0" * rng.randint(1, 3) + str(rng.randint(0, 5))
                    if roll < 0.9
                    else str(rng.choice([2**31, 2**31 - 1, -(2**31) - 1, 10**12, 70000]))
                )
                pieces.append(" " * rng.randint(0, 1) + number + " " * rng.randint(0, 1))
            text = rng.choice([",", ", ", " ,"]).join(pieces)
            if rng.random() < 0.2:
                text += ","
            if rng.random() < 0.1:
                text = "," + text
            if rng.random() < 0.1:
                text = "[" + text + "]"
            if rng.random() < 0.05:
                position = rng.randint(0, len(text))
                text = text[:position] + rng.choice("-[] ") + text[position:]
        specs.append(Spec("str", text))
    for _ in range(3000):
        length = rng.randint(0, 6) if rng.random() < 0.97 else rng.randint(60, 70)
        specs.append(Spec("list", [rng.randint(-3, 20) for _ in range(length)]))
    return specs


@contextlib.contextmanager
def fake_machine(cuda: int, mps: bool, torchelastic: bool):
    """Lightning's own way of faking devices in its tests (conftest.py mock_cuda_count / mps_count)."""
    environment = {"TORCHELASTIC_RUN_ID": "oracle"} if torchelastic else {}
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(fabric_cuda, "num_cuda_devices", lambda: cuda))
        stack.enter_context(mock.patch.object(trainer_cuda, "num_cuda_devices", lambda: cuda))
        stack.enter_context(mock.patch.object(fabric_mps.MPSAccelerator, "is_available", staticmethod(lambda: mps)))
        stack.enter_context(mock.patch.object(trainer_mps.MPSAccelerator, "is_available", staticmethod(lambda: mps)))
        stack.enter_context(mock.patch.dict(os.environ, environment))
        if not torchelastic:
            os.environ.pop("TORCHELASTIC_RUN_ID", None)
        yield


def lightning_outcome(accelerator: str, spec: Spec) -> tuple:
    value = spec.python()
    try:
        if accelerator == "cpu":
            cores = CPUAccelerator.parse_devices(value)
            if cores > MAX_DEVICE_COUNT:
                return ("not_run", f"a list of {cores} CPU devices")
            devices = CPUAccelerator.get_parallel_devices(value)
            return ("ok", ",".join(str(i) for i in range(cores)), ",".join(str(d) for d in devices))
        count = gpu_count_request(spec)
        if count is not None and count > MAX_DEVICE_COUNT:
            return ("not_run", f"list(range({count}))")
        accelerator_class = CUDAAccelerator if accelerator == "cuda" else MPSAccelerator
        ids = accelerator_class.parse_devices(value)
        if ids is None:
            return ("ok", "None")
        # CUDA's get_parallel_devices takes the parsed ids, MPS's parses the spec again (as the connector calls them).
        devices = accelerator_class.get_parallel_devices(ids if accelerator == "cuda" else value)
        return ("ok", ",".join(str(i) for i in ids), ",".join(str(d) for d in devices))
    except Exception as error:  # noqa: BLE001 - every exception is an outcome to compare
        return python_error(error)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--volt-oracle", required=True, help="path of the volt_oracle program")
    arguments = parser.parse_args()

    rng = random.Random(SEED)
    specs = SECTION_1_SPECS + random_specs(rng)
    # The CPU parser reads no machine state: it runs on the first machine only.
    runs = [(accelerator, machine) for machine in MACHINES for accelerator in ACCELERATORS
            if accelerator != "cpu" or machine == MACHINES[0]]
    cases = [(accelerator, machine, spec) for accelerator, machine in runs for spec in specs]

    lightning_outcomes = []
    for accelerator, machine in runs:
        with fake_machine(*machine):
            lightning_outcomes.extend(lightning_outcome(accelerator, spec) for spec in specs)

    lines = []
    for accelerator, (cuda, mps, torchelastic), spec in cases:
        form, value = spec.volt_fields()
        lines.append("\t".join([accelerator, str(cuda), str(int(mps)), str(int(torchelastic)), form, value]))
    volt_outcomes = run_volt(arguments.volt_oracle, "devices", lines)

    def describe(case):
        accelerator, (cuda, mps, torchelastic), spec = case
        return (f"accelerator={accelerator} cuda={cuda} mps={mps} torchelastic={torchelastic} "
                f"devices={spec!r}")

    print(f"lightning {lightning.__version__}; {len(SECTION_1_SPECS)} spec-section-1 forms + "
          f"{len(specs) - len(SECTION_1_SPECS)} random specs (seed {SEED}), each on {len(runs)} accelerator/machine "
          f"pairs (CUDA and MPS on {len(MACHINES)} machines, CPU on one)")
    ok = compare("devices", cases, lightning_outcomes, volt_outcomes, for_oracle("devices"), describe)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
