"""Two builds of bench_four_way (say, this tree and an older commit) timed on the same rows, alternating.

Answers "is this row slower than it was?" on a machine whose speed differs from the one an older result file was
measured on: both programs run here, in turns within each round, so the machine's speed cancels. Prints each
program's steps/s per round and median, and the ratios of the medians.

    python3 benchmarks/python/four_way_ab.py NEW_BINARY OLD_BINARY [--device cpu] [--model mlp] [--rounds 7]
        [--loops volt,libtorch] [--precision fp32] [--threads 1]

Build the older program from a worktree of its commit, e.g. `git worktree add /tmp/old <commit>`, then configure
/tmp/old as benchmarks/four_way.sh does and build the target bench_four_way.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

# Batch, warm-up steps and timed steps per model: benchmarks/four_way.sh's CPU settings.
SETTINGS = {"mlp": (128, 10, 100), "simplecnn": (128, 3, 20), "resnet18": (32, 1, 3)}


class Program:
    def __init__(self, path: str, device: str, threads: int):
        self.path = path
        self.process = subprocess.Popen([path, "--device", device, "--threads", str(threads)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self._answer()
        if not line.startswith("@@ hello"):
            raise RuntimeError(f"{path} did not start: {line!r}")

    def _answer(self) -> str:
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.path} stopped")
            if line.startswith("@@"):
                return line.strip()

    def run(self, request: str) -> float:
        self.process.stdin.write(request + "\n")
        self.process.stdin.flush()
        words = self._answer().split()
        if words[1] != "ok":
            raise RuntimeError(f"{self.path}: {request}: {' '.join(words[1:])}")
        return float(words[2])

    def close(self):
        self.process.stdin.write("quit\n")
        self.process.stdin.flush()
        self.process.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("new")
    parser.add_argument("old")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--model", default="mlp", choices=sorted(SETTINGS))
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--loops", default="volt,libtorch")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    arguments = parser.parse_args()
    loops = [loop for loop in arguments.loops.split(",") if loop]
    batch, warmup, steps = SETTINGS[arguments.model]
    programs = {"new": Program(arguments.new, arguments.device, arguments.threads),
                "old": Program(arguments.old, arguments.device, arguments.threads)}
    results: dict[tuple[str, str], list[float]] = {}
    for _ in range(arguments.rounds):
        for name, program in programs.items():
            for loop in loops:
                request = f"run {loop} {arguments.model} {arguments.precision} {batch} {warmup} {steps}"
                results.setdefault((name, loop), []).append(program.run(request))
    for program in programs.values():
        program.close()
    medians = {key: statistics.median(values) for key, values in results.items()}
    print(f"{arguments.model} {arguments.precision} on {arguments.device}, {arguments.rounds} rounds, steps/s")
    for (name, loop), values in sorted(results.items()):
        print(f"  {name} {loop}: median {medians[(name, loop)]:.1f} ({', '.join(f'{v:.1f}' for v in values)})")
    for loop in loops:
        print(f"  {loop} new / old: {medians[('new', loop)] / medians[('old', loop)]:.3f}")
    if len(loops) > 1:
        for name in programs:
            print(f"  {name}: {loops[0]} / {loops[1]}: {medians[(name, loops[0])] / medians[(name, loops[1])]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
