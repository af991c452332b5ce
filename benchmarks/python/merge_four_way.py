"""One Markdown file from several four-way runs (benchmarks/four_way.sh outputs).

One run of the four-way benchmark has to fit the time a GPU machine is lent for (the default models and each
opt-in model's rows take minutes each), so a table of every model is made of several runs. This script puts them
in one file: a table of the runs (command, date, GPU), one "volt's best against the fastest peer" table with a row
per run, model and precision, then each run's own file with its headings one level down. Every ratio compares
loops of the same run, on the same machine; nothing is compared across runs.

    python3 benchmarks/python/merge_four_way.py OUTPUT.md RUN.md [RUN.md ...]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

BEST_TITLE = "## Summary: volt's faster configuration against the fastest peer (median steps/s)"


def field(text: str, pattern: str, default: str = "?") -> str:
    match = re.search(pattern, text, re.MULTILINE)
    return match.group(1).strip() if match else default


def table_rows(text: str, title: str) -> list[list[str]]:
    """The body rows of the Markdown table under the heading `title`, as lists of cells."""
    start = text.find(title)
    if start < 0:
        return []
    rows = []
    for line in text[start:].splitlines()[1:]:
        if not line.strip():
            if rows:
                break
            continue
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if all(set(cell) <= set("-: ") for cell in cells):
            continue
        rows.append(cells)
    return rows[1:]  # the header row left out


class Run:
    def __init__(self, path: Path, number: int):
        self.path, self.number = path, number
        self.text = path.read_text()
        if not self.text.startswith("# Four-way training benchmark"):
            raise ValueError(f"{path}: not a four-way benchmark output (its first line is not the benchmark's title)")
        self.command = field(self.text, r"^    (.*four_way\.sh.*)$")
        self.date = field(self.text, r"^Date: ([^.]*UTC)")
        self.gpu = field(self.text, r"GPU (NVIDIA [^(]*?) \(", field(self.text, r"Machine: ([^;.]*)"))
        self.best = table_rows(self.text, BEST_TITLE)
        if not self.best:
            raise ValueError(f"{path}: no table under {BEST_TITLE!r}")
        self.models = sorted({row[0] for row in self.best})

    def body(self) -> str:
        """The run's file without its title, every heading one level down."""
        lines = self.text.splitlines()[1:]
        return "\n".join("#" + line if line.startswith("#") else line for line in lines).strip() + "\n"


def merge(paths: list[Path]) -> str:
    runs = [Run(path, number) for number, path in enumerate(paths, 1)]
    out = [f"# Four-way training benchmark: CUDA, {len(runs)} runs", ""]
    out += ["Made with `python3 benchmarks/python/merge_four_way.py` from the runs below, each one "
            "`benchmarks/four_way.sh` command on one GPU machine (a run must fit the time a machine is lent for). "
            "Every ratio compares loops of the same run; figures of different runs are not compared.", ""]
    out += ["| run | models | GPU | date | command |", "|---|---|---|---|---|"]
    for run in runs:
        out.append(f"| {run.number} ({run.path.name}) | {', '.join(run.models)} | {run.gpu} | {run.date} | "
                   f"`{run.command}` |")
    out += ["", "## volt's faster configuration against the fastest peer, every run (median steps/s)", ""]
    out += ["| run | model | precision | volt's best | steps/s | fastest peer | steps/s | ratio | volt % of peak |",
            "|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        for row in run.best:
            out.append("| " + " | ".join([str(run.number)] + row) + " |")
    out.append("")
    for run in runs:
        out += [f"## Run {run.number}: {', '.join(run.models)} ({run.gpu}, {run.date})", "", run.body()]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    output, inputs = Path(argv[1]), [Path(arg) for arg in argv[2:]]
    missing = [str(path) for path in inputs if not path.is_file()]
    if missing:
        print(f"merge_four_way.py: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        text = merge(inputs)
    except ValueError as error:
        print(f"merge_four_way.py: {error}", file=sys.stderr)
        return 2
    output.write_text(text)
    print(f"wrote {output} ({len(inputs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
