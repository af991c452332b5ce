"""Lightning 2.6.6's `move_data_to_device` as the oracle for `volt::batch_to_device` (issue 11, spec section 4).

Each case is a batch that has the same shape in Python and in C++ (a Python list of tensors is a
`std::vector<torch::Tensor>`, a heterogeneous list or tuple a `std::tuple`, a dict a `std::map`, a namedtuple an
aggregate struct, an object with `.to` a struct with a `to(torch::Device)` member, None `std::nullopt`), moved to a
target device on the CPU machine: `cpu` (nothing moves: identity and dtype semantics) and `meta` (every tensor
moves). Both sides describe the result in one text format (see volt_oracle.cpp): the structure, and per tensor
its device, dtype, shape, whether it is the same tensor object as the input, requires_grad and a checksum of its
values; per pass-through value its value; per module its device and identity; per custom object how often its
`.to` ran. Cases: spec section 4.4 rows that have a C++ counterpart plus random nested batches (fixed seed).

Rows without a C++ counterpart are not run: B20 frozen dataclass (C++ has no runtime "frozen" flag), B22 a `to`
attribute that is not callable (a compile-time concept in volt), B23 numpy arrays, B25 bytes, B26 range.

    python transfer_oracle.py --volt-oracle build/tests/volt_oracle
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lightning  # noqa: E402
import torch  # noqa: E402
from lightning.fabric.utilities.apply_func import move_data_to_device  # noqa: E402

from differences import for_oracle  # noqa: E402
from oracle_common import compare, python_error, run_volt  # noqa: E402

SEED = 11
DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32, torch.bool, torch.uint8, torch.float16,
          torch.bfloat16]
TARGETS = ("cpu", "meta")

Pair = collections.namedtuple("Pair", ["a", "b"])
TwoTensors = collections.namedtuple("TwoTensors", ["a", "b"])


class WithTo:
    """B14: an object with its own `.to`, returning itself."""

    def __init__(self):
        self.calls, self.device = 0, torch.device("cpu")

    def to(self, device, **kwargs):
        self.calls += 1
        self.device = torch.device(device)
        return self


class InPlaceTo(WithTo):
    """B15: a `.to` that changes the object and returns None."""

    def to(self, device, **kwargs):
        super().to(device)
        return None


def make_tensor(dtype_code: int, shape: list[int], requires_grad: bool = False) -> torch.Tensor:
    numel = 1
    for size in shape:
        numel *= size
    tensor = torch.arange(numel, dtype=torch.float64).reshape(shape).to(DTYPES[dtype_code % 8])
    return tensor.requires_grad_(True) if requires_grad else tensor


def tensor_from_code(code: str) -> torch.Tensor:
    parts = code.split("x")
    return make_tensor(int(parts[0]), [int(p) for p in parts[1:]])


def python_batch(name: str, parameters: str):
    t = lambda: make_tensor(0, [2])  # noqa: E731 - one tensor shared by the container cases, as in C++
    if name == "none":
        return None
    if name == "empty_dict":
        return {}
    if name == "empty_list":
        return []
    if name == "float":
        return 1.0
    if name == "int":
        return 3
    if name == "bool":
        return True
    if name == "str":
        return "x"
    if name == "list_none_int":
        return [None, 2]
    if name == "dict_tuple_none":
        return {"x": (1, 2), "y": None}
    if name == "tensor":
        return tensor_from_code(parameters)
    if name == "tensor_grad":
        return make_tensor(0, [2, 3], requires_grad=True)
    if name == "tensor_noncontiguous":
        return make_tensor(0, [3, 4]).t()
    shared = t()
    if name == "list_tt":
        return [shared, shared]
    if name == "nested_list":
        return [[shared, shared]]
    if name == "list_of_dict":
        return [{"a": shared, "b": shared}]
    if name == "tuple_of_lists":
        return ([shared, shared], [{"a": shared, "b": shared}, {"a": shared, "b": shared}])
    if name == "list_of_records":
        return [TwoTensors(shared, shared), TwoTensors(shared, shared)]
    if name == "record_tensor_str":
        return Pair(shared, "s")
    if name == "custom_to":
        return WithTo()
    if name == "custom_to_in_place":
        return InPlaceTo()
    if name == "module":
        return torch.nn.Linear(2, 3)
    if name == "random_list":
        return [tensor_from_code(code) for code in parameters.split(";")] if parameters else []
    if name == "random_dict_of_lists":
        batch = {}
        for entry in parameters.split("|") if parameters else []:
            key, codes = entry.split("=")
            batch[key] = [tensor_from_code(code) for code in codes.split(";")] if codes else []
        return batch
    if name == "random_tuple":
        first, number, last = parameters.split(";")
        return (tensor_from_code(first), int(number), tensor_from_code(last))
    raise ValueError(f"unknown case {name}")


def describe(moved, original) -> str:
    if isinstance(moved, torch.Tensor):
        checksum = "%.17g" % moved.to(torch.float64).sum().item() if moved.device.type == "cpu" else "-"
        dtype = str(moved.dtype).removeprefix("torch.")
        shape = ",".join(str(s) for s in moved.shape)
        same = "same" if moved is original else "new"
        return f"tensor({moved.device},{dtype},[{shape}],{same},{int(moved.requires_grad)},{checksum})"
    if moved is None:
        return "None"
    if isinstance(moved, bool):
        return f"bool({moved})"
    if isinstance(moved, int):
        return f"int({moved})"
    if isinstance(moved, float):
        return "float(%.17g)" % moved
    if isinstance(moved, str):
        return f"str({moved!r})"
    if isinstance(moved, torch.nn.Module):
        return f"module({moved.weight.device},{'same' if moved is original else 'new'})"
    if isinstance(moved, WithTo):
        return f"custom({moved.calls},{moved.device})"
    if isinstance(moved, tuple) and hasattr(moved, "_fields"):
        fields = ",".join(describe(m, o) for m, o in zip(moved, original))
        return f"record({type(moved).__name__},{fields})"
    if isinstance(moved, (list, tuple)):
        return "seq[" + ",".join(describe(m, o) for m, o in zip(moved, original)) + "]"
    if isinstance(moved, dict):
        return "dict{" + ",".join(f"{k!r}:{describe(moved[k], original[k])}" for k in sorted(moved)) + "}"
    raise TypeError(f"no description for {type(moved)}")


def lightning_outcome(name: str, target: str, parameters: str) -> tuple:
    batch = python_batch(name, parameters)
    try:
        moved = move_data_to_device(batch, torch.device(target))
    except Exception as error:  # noqa: BLE001 - an exception is an outcome to compare
        return python_error(error)
    # A `.to` that returned None leaves the original object, whose state is what the description shows.
    return ("ok", describe(moved, batch))


def random_code(rng: random.Random) -> str:
    return "x".join([str(rng.randint(0, 7))] + [str(rng.randint(0, 3)) for _ in range(rng.randint(0, 3))])


def random_cases(rng: random.Random, count: int) -> list[tuple[str, str]]:
    cases = []
    for _ in range(count):
        kind = rng.choice(["random_list", "random_dict_of_lists", "random_tuple", "tensor"])
        if kind == "random_list":
            parameters = ";".join(random_code(rng) for _ in range(rng.randint(0, 4)))
        elif kind == "random_dict_of_lists":
            keys = rng.sample("abcde", rng.randint(0, 3))
            parameters = "|".join(k + "=" + ";".join(random_code(rng) for _ in range(rng.randint(0, 3))) for k in keys)
        elif kind == "random_tuple":
            parameters = f"{random_code(rng)};{rng.randint(-5, 5)};{random_code(rng)}"
        else:
            parameters = random_code(rng)
        cases.append((kind, parameters))
    return cases


SECTION_4_CASES = [
    ("none", ""),                   # B1
    ("empty_dict", ""),             # B2
    ("empty_list", ""),             # B3
    ("float", ""), ("int", ""), ("bool", ""), ("str", ""),  # B4
    ("list_none_int", ""),          # B5
    ("dict_tuple_none", ""),        # B6
    ("tensor", "0x2x3"),            # B7
    ("list_tt", ""),                # B8
    ("nested_list", ""),            # B9
    ("list_of_dict", ""),           # B10
    ("tuple_of_lists", ""),         # B11
    ("list_of_records", ""),        # B12
    ("record_tensor_str", ""),      # B13
    ("custom_to", ""),              # B14
    ("custom_to_in_place", ""),     # B15
    ("module", ""),                 # B24
    ("tensor", "2x3"), ("tensor", "4x2x2"), ("tensor", "3"),  # B27 int / bool tensors, a 0-d tensor
    ("tensor_grad", ""),
    ("tensor_noncontiguous", ""),
]

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--volt-oracle", required=True, help="path of the volt_oracle program")
    arguments = parser.parse_args()

    batches = SECTION_4_CASES + random_cases(random.Random(SEED), 400)
    # LibTorch's C++ Module::to (1.13 and 2.11) cannot move parameters from the CPU to `meta`
    # ("variable.set_data(tensor) ... incompatible tensor type"): a LibTorch limitation volt does not work around,
    # so modules move to `cpu` only.
    cases = [(name, target, parameters) for target in TARGETS for name, parameters in batches
             if not (name == "module" and target == "meta")]
    lightning_outcomes = [lightning_outcome(name, target, parameters) for name, target, parameters in cases]
    volt_outcomes = run_volt(arguments.volt_oracle, "transfer", ["\t".join(case) for case in cases])

    print(f"lightning {lightning.__version__}, torch {torch.__version__}; {len(SECTION_4_CASES)} spec-section-4 "
          f"batches + {len(batches) - len(SECTION_4_CASES)} random batches (seed {SEED}) x targets {TARGETS}")
    ok = compare("batch_to_device", cases, lightning_outcomes, volt_outcomes, for_oracle("transfer"),
                 lambda case: f"case={case[0]} target={case[1]} parameters={case[2]!r}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
