"""THE table of differences that volt makes on purpose, for every Lightning oracle test in this folder.

A case that does not come out identical in Lightning 2.6.6 and volt is explained only by a row here whose oracle
is the test's, whose `applies` holds for the case and whose `volt_does` holds for volt's outcome (given
Lightning's). Anything else fails the test. `python differences.py` prints the table as Markdown (docs/oracle.md
and the README carry that text).
"""

from __future__ import annotations

from lightning.fabric.utilities.device_parser import _normalize_parse_gpu_string_input

from oracle_common import Difference, markdown_table

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
MAX_DEVICE_IDS = 64  # volt::max_device_ids
MAX_DEVICE_COUNT = 1 << 16  # volt::max_device_count

# Helpers over a device case's spec (devices_oracle.Spec: form, value, python()).


def gpu_count_request(spec):
    """The count `_parse_gpu_ids` would turn into list(range(n)), or None (Lightning's own normalisation)."""
    value = spec.python()
    if isinstance(value, (list, tuple)):
        return None
    try:
        normalized = _normalize_parse_gpu_string_input(value)
    except ValueError:
        return None
    return normalized if isinstance(normalized, int) else None


def numbers_in(spec) -> list[int]:
    """The integers Lightning reads from the spec (none when its int() would fail first)."""
    value = spec.python()
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        try:
            normalized = _normalize_parse_gpu_string_input(value)
        except ValueError:
            return []
        return normalized if isinstance(normalized, list) else [normalized]
    return []


def id_count(spec) -> int:
    value = spec.python()
    if isinstance(value, (list, tuple)):
        return len(value)
    if isinstance(value, str) and "," in value:
        return len(numbers_in(spec))
    return 0


def string_int_fails(spec) -> bool:
    """A string that Lightning's GPU parser would hand to int() and that int() refuses."""
    if spec.form != "str" or spec.value.strip() in ("0", "[]"):
        return False
    try:
        _normalize_parse_gpu_string_input(spec.value)
    except ValueError:
        return True
    return False


def is_err(outcome, cls, *, contains="", starts=""):
    return outcome[0] == "err" and outcome[1] == cls and contains in outcome[2] and outcome[2].startswith(starts)


DIFFERENCES = [
    Difference(
        key="D1",
        oracle="devices",
        inputs="any number outside C++ `int` (-2147483648..2147483647) in the spec",
        lightning="Python ints are unbounded: a count builds `list(range(n))`, an id fails the availability check",
        volt="`std::invalid_argument`: \"volt: the number '...' in a device spec does not fit in an int\" "
        "(strings) or \"volt: the device count N does not fit in an int\" (integers)",
        why="device ids and counts are C++ `int`s; the error is raised when the DeviceSpec is made",
        applies=lambda case: any(not INT_MIN <= n <= INT_MAX for n in numbers_in(case[2])),
        volt_does=lambda outcome, _lightning: is_err(
            outcome, "invalid_argument", contains="does not fit in an int"
        ),
    ),
    Difference(
        key="D2",
        oracle="devices",
        inputs=f"a count above {MAX_DEVICE_COUNT} (`volt::max_device_count`)",
        lightning="builds a list of n ids (GPU: `list(range(n))`, CPU: `[device('cpu')] * n`): with n in the "
        "billions it runs out of memory. Not run by the oracle",
        volt="`std::invalid_argument`: \"volt: devices=N asks for more devices than volt supports (65536)\"",
        why="no machine has that many devices; volt refuses instead of allocating",
        applies=lambda case: (gpu_count_request(case[2]) or 0) > MAX_DEVICE_COUNT,
        volt_does=lambda outcome, _lightning: is_err(
            outcome, "invalid_argument", contains="asks for more devices than volt"
        ),
    ),
    Difference(
        key="D3",
        oracle="devices",
        inputs=f"a list (or comma string) of more than {MAX_DEVICE_IDS} ids",
        lightning="checks the ids like any other list",
        volt="`std::invalid_argument`: \"volt: a device spec holds at most 64 device ids, got N\"",
        why="a DeviceSpec is a fixed-capacity literal type (constexpr, usable as a template argument)",
        applies=lambda case: id_count(case[2]) > MAX_DEVICE_IDS,
        volt_does=lambda outcome, _lightning: is_err(
            outcome, "invalid_argument", starts="volt: a device spec holds at most"
        ),
    ),
    Difference(
        key="D4",
        oracle="devices",
        inputs="a string that Python's `int()` refuses (`'1.5'`, `'[0]'`, `''`, `'1 2'`, `'auto'` given to a parser)",
        lightning="ValueError \"invalid literal for int() with base 10: '...'\"",
        volt="`std::invalid_argument` with the same text, followed by \" (volt: ...)\" naming the accepted grammar",
        why="the error names what volt accepts; the Python text comes first so searches still find it",
        applies=lambda case: True,
        volt_does=lambda outcome, lightning_outcome: (
            lightning_outcome[:2] == ("err", "invalid_argument")
            and lightning_outcome[2].startswith("invalid literal for int() with base 10: ")
            and is_err(outcome, "invalid_argument", starts=lightning_outcome[2] + " (volt: ")
            and outcome[2].endswith(")")
        ),
    ),
    Difference(
        key="D5",
        oracle="devices",
        inputs="CPU accelerator, a string that Python's `int()` refuses (`'1.5'`, `'-'`, `'1 2'`)",
        lightning="TypeError \"`devices` selected with `CPUAccelerator` should be an int > 0.\"",
        volt="`std::invalid_argument` from the DeviceSpec constructor: \"invalid literal for int() with base 10: "
        "'...' (volt: ...)\"",
        why="volt parses a spec string once, when the DeviceSpec is made and before any accelerator sees it "
        "(a compile error for a constant); the exception class is the same",
        applies=lambda case: case[0] == "cpu" and string_int_fails(case[2]),
        volt_does=lambda outcome, _lightning: is_err(
            outcome, "invalid_argument", starts="invalid literal for int() with base 10: "
        ),
    ),
    Difference(
        key="D6",
        oracle="devices",
        inputs="the empty tuple `()`",
        lightning="`()` escapes the \"no GPUs\" short-circuit (its str is '()'): MisconfigurationException "
        "\"GPUs requested but none are available.\"; CPU: TypeError",
        volt="C++ has one id-list form: `volt::devices({})` behaves like `[]` (no devices: nullopt; CPU: the "
        "CPU parser's error)",
        why="a tuple and a list are the same thing in C++",
        applies=lambda case: case[2].form == "tuple" and len(case[2].value) == 0,
        volt_does=lambda outcome, lightning_outcome: outcome == ("ok", "None")
        or is_err(outcome, "invalid_argument", starts="`devices` selected with `CPUAccelerator`"),
    ),
    Difference(
        key="T1",
        oracle="trainer",
        inputs="a float `val_check_interval` with `check_val_every_n_epoch=None`",
        lightning="MisconfigurationException \"`val_check_interval` should be an integer or a time-based duration "
        "(str 'DD:HH:MM:SS', datetime.timedelta, or dict kwargs for timedelta) when `check_val_every_n_epoch=None`.\"",
        volt="`volt::MisconfigurationError` \"`val_check_interval` should be an integer when "
        "`check_val_every_n_epoch=None`.\"",
        why="volt has no time-based `val_check_interval`, so the message names only what it accepts",
        applies=lambda case: "." in case[4] and case[5] == "None",
        volt_does=lambda outcome, lightning_outcome: outcome
        == ("err", "MisconfigurationError", "`val_check_interval` should be an integer when "
            "`check_val_every_n_epoch=None`."),
    ),
]


def for_oracle(name: str) -> list[Difference]:
    return [row for row in DIFFERENCES if row.oracle == name]


if __name__ == "__main__":
    print(markdown_table(DIFFERENCES))
