"""What the check_*.py scripts share: running a helper program and checking a condition, each failure ending the
script with a message that says what was run or expected."""
import subprocess
import sys


def run(tool, *args):
    """Runs `tool` with `args` and returns what it printed; a non-zero exit ends the script with its stderr."""
    result = subprocess.run([tool, *args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join([tool, *args])} exited {result.returncode}: {result.stderr.strip()}")
    return result.stdout


def expect(condition, message):
    """Ends the script with FAIL: `message` unless `condition` holds; prints ok: `message` otherwise."""
    if not condition:
        sys.exit("FAIL: " + message)
    print("ok:", message)
