"""Shared pieces of volt's Lightning oracle tests: running volt_oracle, Python-to-C++ error translation, the
comparison loop with its table of deliberate differences, and the report.

Each oracle builds a list of cases, runs Lightning on them in this process and volt on them through the
volt_oracle program, and compares outcome by outcome. An outcome is a tuple:
    ("ok", <result fields...>)              what came back, normalised to text both sides produce
    ("err", <class>, <message>)             the exception (Python classes translated to volt's C++ classes)
    ("not_run", <reason>)                   Lightning was not run on the case (see the difference that covers it)
A mismatch is explained only by a row of the oracle's DIFFERENCES table whose `applies` holds for the case and
whose `volt_does` holds for volt's outcome; anything else is an unexplained difference and fails the test.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any, Callable, Sequence

# How a Python exception class reads in C++ (the spec's translation rules, "How to read this file for volt"):
# MisconfigurationException -> volt::MisconfigurationError, ValueError -> std::invalid_argument. Lightning's
# TypeErrors for a value whose type C++ knows at compile time (bool, float, None) are compile errors in volt and
# are not among the cases; the TypeErrors left are about the value (the CPU parser's "should be an int > 0"),
# which volt raises as std::invalid_argument.
PYTHON_TO_CPP_ERROR = {
    "MisconfigurationException": "MisconfigurationError",
    "ValueError": "invalid_argument",
    "TypeError": "invalid_argument",
    "RuntimeError": "runtime_error",
}


def python_error(error: BaseException) -> tuple:
    name = type(error).__name__
    return ("err", PYTHON_TO_CPP_ERROR.get(name, "python:" + name), str(error))


def to_hex(text: str) -> str:
    return text.encode("utf-8").hex()


def from_hex(text: str) -> str:
    return bytes.fromhex(text).decode("utf-8", errors="replace")


def run_volt(binary: str, mode: str, lines: Sequence[str]) -> list[tuple]:
    """Runs `volt_oracle <mode>` on the case lines; returns one outcome tuple per case."""
    completed = subprocess.run(
        [binary, mode], input="".join(line + "\n" for line in lines), capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        sys.stderr.write(completed.stderr)
        raise SystemExit(f"volt_oracle {mode} exited with {completed.returncode}")
    out = completed.stdout.split("\n")
    if out and out[-1] == "":
        out.pop()
    if len(out) != len(lines):
        sys.stderr.write(completed.stderr)
        raise SystemExit(f"volt_oracle {mode}: {len(lines)} cases sent, {len(out)} results received")
    outcomes = []
    for line in out:
        fields = line.split("\t")
        if fields[0] == "err":
            outcomes.append(("err", fields[1], from_hex(fields[2])))
        else:
            outcomes.append(tuple(fields))
    return outcomes


@dataclasses.dataclass
class Difference:
    """A difference volt makes on purpose: when it applies, what Lightning does, what volt does, and why."""

    key: str
    oracle: str  # which test: "devices", "transfer" or "trainer"
    inputs: str
    lightning: str
    volt: str
    why: str
    applies: Callable[[Any], bool]
    # (volt's outcome, Lightning's outcome) -> whether volt did what the row says
    volt_does: Callable[[tuple, tuple], bool]
    count: int = 0


def markdown_table(differences: Sequence[Difference]) -> str:
    rows = ["| # | test | inputs | Lightning 2.6.6 | volt | why |", "|---|---|---|---|---|---|"]
    for d in differences:
        rows.append(f"| {d.key} | {d.oracle} | {d.inputs} | {d.lightning} | {d.volt} | {d.why} |")
    return "\n".join(rows)


def compare(
    title: str,
    cases: Sequence[Any],
    lightning: Sequence[tuple],
    volt: Sequence[tuple],
    differences: Sequence[Difference],
    describe: Callable[[Any], str],
    show: int = 25,
) -> bool:
    """Compares outcome by outcome, prints the counts; returns True when every difference is explained."""
    same = 0
    unexplained = []
    for case, expected, actual in zip(cases, lightning, volt):
        if expected == actual:
            same += 1
            continue
        for difference in differences:
            if difference.applies(case) and difference.volt_does(actual, expected):
                difference.count += 1
                break
        else:
            unexplained.append((case, expected, actual))
    print(f"{title}: {len(cases)} inputs compared with Lightning: {same} identical, "
          f"{len(cases) - same - len(unexplained)} explained by the differences table, "
          f"{len(unexplained)} unexplained")
    for difference in differences:
        print(f"  difference {difference.key}: {difference.count} inputs")
    def shorten(outcome: tuple) -> str:
        text = repr(outcome)
        return text if len(text) <= 400 else text[:400] + f"... ({len(text)} characters)"

    for case, expected, actual in unexplained[:show]:
        print(f"UNEXPLAINED {describe(case)[:400]}\n  Lightning: {shorten(expected)}\n  volt:      {shorten(actual)}")
    if len(unexplained) > show:
        print(f"... and {len(unexplained) - show} more")
    return not unexplained
