#!/usr/bin/env python3
"""Exercises every code block and command of volt's user documentation, so that it cannot rot.

Run by CTest as `volt.docs.code_blocks` (tests/docs/extra.cmake). Python 3 standard library only.

The documents: README.md, examples/README.md, docs/troubleshooting.md. From each it extracts every fenced
block, every indented block (four spaces after a blank line), every relative link and, in the
troubleshooting document, every quoted message (`> ...` lines). How each is exercised:

  ```cpp, a complete program     (it has `int main(`) compiled, linked and run; it must exit with 0.
  ```cpp, a fragment             (an HTML comment `<!-- docs-check: fragment -->` just above the block)
                                 compiled inside its own namespace, appended to the first complete
                                 program's translation unit: compiling volt costs a minute or more on CI's
                                 two cores, so all C++ of the documents is one translation unit (each
                                 further complete program would add one). The flags are those of the
                                 README's vendoring line: LibTorch's own flags (the tree's torch_flags.rsp),
                                 -I of the volt headers the tree tests (include/ or single_include/),
                                 -ltorch -ltorch_cpu -lc10; plus -O0 (fastest to compile) and -Wall -Wextra
                                 -Werror for the documents' own code. A ```cpp block that is neither is an
                                 error.
  ```cmake                       not built here: tests/consumption/ builds and runs a consumer each of the
                                 four ways (volt.consume.*). Each command of the block, and each alternative
                                 named in a `# or:` comment, must appear in the consumer's CMakeLists.txt
                                 (tests/consumption/consumer/), with the placeholders of CMAKE_PLACEHOLDERS
                                 standing for the consumer's names and paths. A scratch project would cost a
                                 volt configure per block for what those tests already prove.
  indented commands              each command (a line, or lines joined by a trailing backslash) must match
                                 a row of Checker.command_kinds(), which says how it is exercised: run here
                                 (the examples: the tree's binaries with the documented flags plus a
                                 short-run override appended, which wins because volt::cli keeps the last
                                 occurrence of a flag; on a machine without CUDA or MPS the CUDA and MPS lines
                                 must stop with exit status 2 and the availability message instead), or
                                 checked against the test or CI step that runs the same command. A command
                                 that matches no row fails the check: nothing is skipped silently.
  links                          every relative link must name an existing file (and an existing heading,
                                 for `file.md#anchor`).
  quoted messages                every `> ...` quote of docs/troubleshooting.md must be a message volt
                                 prints: the quote is matched against the string literals of
                                 include/volt/** (adjacent literals joined, a run-time value allowed between
                                 two literals), or appear in Lightning's texts (the spec), or be on the
                                 LIBTORCH_MESSAGES list (LibTorch's and PyTorch's own texts, each with where
                                 it comes from). The same holds for the backticked first column of a table
                                 marked `<!-- docs-check: messages in the first column -->`.
  the benchmark's copy           README.md's first complete program must equal
                                 benchmarks/compile_time/trainer_program.cpp byte for byte (the compile-time
                                 benchmark, benchmarks/compile_time/measure.sh, times that file); also checked
                                 with --static-only.

Exit status 0 when everything passed; 1 with a list of failures otherwise.
"""

import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

DOCUMENTS = ["README.md", "examples/README.md", "docs/troubleshooting.md"]
FRAGMENT_MARKER = "<!-- docs-check: fragment -->"
MESSAGE_TABLE_MARKER = "<!-- docs-check: messages in the first column -->"
# The compile-time benchmark times this copy of the README's first complete program (it must stay equal).
BENCHMARK_COPY = "benchmarks/compile_time/trainer_program.cpp"

# LibTorch's and PyTorch's own messages quoted by the documents (not in volt's headers), with their origin.
LIBTORCH_MESSAGES = {
    "PyTorch is not linked with support for cuda devices":
        "LibTorch (c10's device guard registry) moving a tensor to CUDA in a LibTorch without CUDA; "
        "printed by Debian's LibTorch 1.13",
    "CUDA out of memory. Tried to allocate":
        "LibTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), c10::OutOfMemoryError",
    "MPS backend out of memory":
        "LibTorch's MPS allocator (aten/src/ATen/mps/MPSAllocator.mm)",
    "DefaultCPUAllocator: can't allocate memory: you tried to allocate":
        "LibTorch's CPU allocator (c10/core/impl/alloc_cpu.cpp)",
    "The operator 'aten::_linalg_eigh' is not currently implemented for the MPS device. If you want this op to "
    "be added in priority during the prototype phase of this feature, please comment on":
        "LibTorch's MPS backend for an operator without an MPS kernel (the text volt's "
        "tests/accelerators/fallback_test.cpp uses)",
}

# ```cmake blocks: the names a user writes and what the consumer project calls them.
CMAKE_PLACEHOLDERS = [
    ("my_trainer", "consumer"),                 # the user's target
    ("third_party/volt", "${VOLT_SOURCE_DIR}"),  # where the user keeps volt's sources
    ("<path or URL>", "${VOLT_ARCHIVE}"),       # where FetchContent finds them
]

# The examples' short-run overrides, appended after the documented flags (the last occurrence of a flag wins).
SHORT_RUN = {
    "fashion_mnist": ["--max-steps", "3", "--limit-val-batches", "2", "--no-progress-bar"],
    "fashion_mnist_cnn": ["--max-steps", "3", "--limit-val-batches", "2", "--no-progress-bar"],
    "fashion_mnist_gan": ["--max-steps", "4", "--limit-train-batches", "2", "--no-progress-bar"],
    "checkpoint_roundtrip": ["--max-steps", "3"],
    "batch_size_finder": ["--max-steps", "3", "--simulated-memory-mb", "16"],
    "matmul_benchmark": ["--repeats", "1"],
    "doctor": [],
}
# Programs that write files take the scratch folder as their root directory.
WRITES_FILES = {"fashion_mnist", "fashion_mnist_cnn", "fashion_mnist_gan", "checkpoint_roundtrip"}
# What a successful short run prints.
SUCCESS = {
    "fashion_mnist": r"test accuracy: [01]\.[0-9]+",
    "fashion_mnist_cnn": r"test accuracy: [01]\.[0-9]+",
    "fashion_mnist_gan": r"samples: .*epoch_0\.png",
    "checkpoint_roundtrip": r"1\. trained on .*2\. resumed on cpu .*3\. exported weights",
    "batch_size_finder": r"largest batch size that fits on .*\ntrained [0-9]+ steps with batch size",
    "matmul_benchmark": r"n +cpu ms +accel ms +speedup",
    "doctor": r"volt::Auto picks: (cpu|cuda|mps)",
}
# What a program built on volt::cli prints for an accelerator this machine lacks (exit status 2).
UNAVAILABLE = {
    "cuda": r"error: argument --accelerator cuda: `CUDAAccelerator` can not run on your system since the "
            r"accelerator is not available\.",
    "mps": r"error: argument --accelerator mps: `MPSAccelerator` can not run on your system since the "
           r"accelerator is not available\..* MPS is not available: ",
    "gpu": r"error: argument --accelerator gpu: No supported gpu backend found!",
}


# What a run-time value in a message looks like: words without spaces, or a list of them ("['cuda', 'cpu']").
VALUE = re.compile(r"[^\s]+(?:, [^\s]+)*")


class Failure(Exception):
    pass


def failing(message):
    """A check that fails with `message` (for what cannot be exercised at all)."""
    def check():
        raise Failure(message)
    return check


class Checker:
    def __init__(self, args):
        self.args = args
        self.root = Path(args.source_dir).resolve()
        self.build = Path(args.build_dir).resolve() if args.build_dir else None
        self.work = Path(args.work_dir).resolve()
        self.results = []  # (where, what, how, ok, detail)
        self.machine = None
        self.skipped = 0

    # ---- bookkeeping -------------------------------------------------------------------------------------
    def record(self, where, what, how, check):
        if self.args.only and not re.search(self.args.only, f"{where}: {what}"):
            self.skipped += 1
            return
        start = time.monotonic()
        try:
            detail = check() or ""
            ok = True
        except Failure as error:
            detail, ok = str(error), False
        except (OSError, subprocess.SubprocessError) as error:
            detail, ok = f"{type(error).__name__}: {error}", False
        seconds = time.monotonic() - start
        self.results.append((where, what, how, ok, detail))
        status = "ok  " if ok else "FAIL"
        short = what if len(what) <= 100 else what[:97] + "..."
        print(f"{status} {where}: {short}\n       {how} ({seconds:.1f} s){': ' + detail if detail else ''}",
              flush=True)

    # ---- extraction --------------------------------------------------------------------------------------
    def extract(self, relative):
        """Fenced blocks, indented blocks and quotes of one document, with their line numbers."""
        lines = (self.root / relative).read_text().split("\n")
        fenced, indented, quotes, message_tables = [], [], [], []
        i = 0
        while i < len(lines):
            line = lines[i]
            fence = re.match(r"^(\s*)```(\S*)\s*$", line)
            if fence:
                language, start = fence.group(2), i + 1
                body = []
                i += 1
                while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
                    body.append(lines[i])
                    i += 1
                if i == len(lines):
                    raise Failure(f"{relative}:{start}: a fenced block is not closed")
                before = [text.strip() for text in lines[max(0, start - 4):start - 1] if text.strip()]
                fenced.append({"language": language, "line": start + 1, "text": "\n".join(body) + "\n",
                               "fragment": bool(before) and before[-1] == FRAGMENT_MARKER})
                i += 1
                continue
            if line.startswith("    ") and (i == 0 or lines[i - 1].strip() == ""):
                start, body = i, []
                while i < len(lines) and (lines[i].startswith("    ") or
                                          (lines[i].strip() == "" and i + 1 < len(lines) and
                                           lines[i + 1].startswith("    "))):
                    body.append(lines[i][4:])
                    i += 1
                indented.append({"line": start + 1, "lines": body})
                continue
            quote = re.match(r"^\s*> ?(.*)$", line)
            if quote:
                start, body = i, []
                while i < len(lines) and re.match(r"^\s*>", lines[i]):
                    body.append(re.match(r"^\s*> ?(.*)$", lines[i]).group(1))
                    i += 1
                quotes.append({"line": start + 1, "text": "\n".join(body).replace("\\`", "`")})
                continue
            if line.strip() == MESSAGE_TABLE_MARKER:
                j = i + 1
                while j < len(lines) and not lines[j].startswith("|"):
                    j += 1
                j += 2  # header and separator
                while j < len(lines) and lines[j].startswith("|"):
                    first = lines[j].split("|")[1]
                    for code in re.findall(r"`([^`]+)`", first):
                        message_tables.append({"line": j + 1, "text": code})
                    j += 1
            i += 1
        return lines, fenced, indented, quotes, message_tables

    # ---- links ---------------------------------------------------------------------------------------------
    @staticmethod
    def slug(heading):
        text = re.sub(r"[`*_\[\]()]", "", heading.strip().lower())
        text = re.sub(r"[^\w\- ]", "", text)
        return text.replace(" ", "-")

    def check_links(self, relative, lines):
        in_fence = False
        for number, line in enumerate(lines, 1):
            if re.match(r"^\s*```", line):
                in_fence = not in_fence
            if in_fence or line.startswith("    "):
                continue
            for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")

                def check(path=path, anchor=anchor):
                    file = (self.root / relative).parent / path if path else self.root / relative
                    if not file.exists():
                        raise Failure(f"{file.relative_to(self.root) if file.is_relative_to(self.root) else file} "
                                      "does not exist")
                    if anchor:
                        headings = [self.slug(h) for h in re.findall(r"^#+ (.*)$", file.read_text(), re.M)]
                        if anchor not in headings:
                            raise Failure(f"no heading #{anchor} in {path or relative}")
                self.record(f"{relative}:{number}", f"link {target}", "the file (and heading) exists", check)

    # ---- quoted messages -------------------------------------------------------------------------------
    def literal_corpus(self):
        if hasattr(self, "_corpus"):
            return self._corpus
        token = re.compile(r'//[^\n]*|/\*.*?\*/|\'(?:[^\'\\\n]|\\.)*\'|"((?:[^"\\\n]|\\.)*)"', re.S)
        escapes = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'"}
        corpus = []
        volt_dir = self.root / "include" / "volt"
        for header in sorted([*volt_dir.rglob("*.hpp"), *volt_dir.rglob("*.ipp")]):  # declarations and bodies
            text = header.read_text()
            joined, last_end = None, None
            for match in token.finditer(text):
                if match.group(1) is None:  # a comment or a character literal
                    if joined is not None:
                        corpus.append(joined)
                    joined = None
                    continue
                value = re.sub(r"\\(.)", lambda m: escapes.get(m.group(1), m.group(1)), match.group(1))
                if joined is not None and text[last_end:match.start()].strip() == "":
                    joined += value
                else:
                    if joined is not None:
                        corpus.append(joined)
                    joined = value
                last_end = match.end()
            if joined is not None:
                corpus.append(joined)
        self._corpus = [literal for literal in corpus if literal]
        return self._corpus

    def printed_by_volt(self, quote):
        """Whether `quote` is volt's string literals in a row, with run-time values of at most 40 characters
        (no spaces but after commas) before, between or after them, never two in a row. The reading with the
        fewest values counts: at most one per 25 characters of the quote (at least 2 allowed), and at least
        70% of the quote literal text. The first literal may be entered in its middle (at least 8 characters
        of it), the last one left early. A changed word inside a literal breaks it into many values: refused."""
        corpus = self.literal_corpus()
        if any(quote in literal for literal in corpus):
            return True
        n, max_gap = len(quote), 40
        inside = [literal for literal in corpus if literal in quote]
        # matches[j]: the ends of whole literals that start at position j of the quote.
        matches = [[] for _ in range(n + 1)]
        for literal in inside:
            start = quote.find(literal)
            while start != -1:
                matches[start].append(start + len(literal))
                start = quote.find(literal, start + 1)
        # best[i]: the reading of quote[:i] that ends with a literal (or i == 0) with the fewest run-time values,
        # then the most literal characters, as (values, -characters).
        best = {0: (0, 0)}
        for literal in corpus:
            for k in range(1, len(literal) - 7):
                if quote.startswith(literal[k:]):
                    best[len(literal) - k] = min(best.get(len(literal) - k, (0, 0)), (0, -(len(literal) - k)))
                    break

        def better(position, candidate, table):
            if position not in table or candidate < table[position]:
                table[position] = candidate

        final = {}
        for i in range(n + 1):
            if i not in best:
                continue
            values, characters = best[i]
            if i == n:
                better(n, (values, characters), final)
                continue
            for j in range(i, min(n, i + max_gap) + 1):
                gap = 1 if j > i else 0
                if gap and not VALUE.fullmatch(quote[i:j]):
                    continue
                if j == n:  # a value at the very end
                    better(n, (values + 1, characters), final)
                    break
                for end in matches[j]:
                    better(end, (values + gap, characters - (end - j)), best)
                tail = quote[j:]
                if any(literal.startswith(tail) for literal in corpus):  # the quote stops inside a literal
                    better(n, (values + gap, characters - (n - j)), final)
        if n not in final:
            return False
        values, characters = final[n]
        return values <= max(2, n // 25) and -characters >= 0.7 * n

    def check_message(self, relative, quote):
        text = quote["text"]

        def check():
            if text in LIBTORCH_MESSAGES:
                return f"LibTorch's own message: {LIBTORCH_MESSAGES[text]}"
            if self.printed_by_volt(text):
                return "printed by volt (include/volt/)"
            spec = Path(self.args.spec) if self.args.spec else None
            if spec and spec.exists() and text in spec.read_text():
                return f"Lightning's text ({spec.name})"
            raise Failure("not a message volt prints (include/volt/), not in Lightning's texts and not on the "
                          "LIBTORCH_MESSAGES list")
        self.record(f"{relative}:{quote['line']}", f"message: {text}", "quoted message is real", check)

    # ---- ```cmake ----------------------------------------------------------------------------------------
    def check_cmake_block(self, relative, block):
        consumer = (self.root / "tests/consumption/consumer/CMakeLists.txt").read_text()
        consumer_lines = [re.sub(r"\s+", " ", line.split("#")[0]).strip() for line in consumer.split("\n")]
        commands = []
        for line in block["text"].split("\n"):
            code, _, comment = line.partition("#")
            if code.strip():
                commands.append(code.strip())
            alternative = re.match(r"\s*or:\s*(.*)$", comment)
            if alternative:
                commands.extend(part.strip() for part in alternative.group(1).split(" + "))
        for command in commands:
            def check(command=command):
                pattern = re.escape(re.sub(r"\s+", " ", command))
                for doc_name, consumer_name in CMAKE_PLACEHOLDERS:
                    pattern = pattern.replace(re.escape(doc_name), re.escape(consumer_name) + r"(?: \S+)?")
                pattern = re.sub(r"\\\)$", r"(?: [^)]*)?\\)", pattern)  # the consumer may pass more arguments
                for line in consumer_lines:
                    if re.fullmatch(pattern, line):
                        return f"tests/consumption/consumer/CMakeLists.txt: {line}"
                raise Failure("not what tests/consumption/consumer/CMakeLists.txt does (volt.consume.*)")
            self.record(f"{relative}:{block['line']}", command, "same as the consumption tests' consumer", check)

    # ---- C++ ------------------------------------------------------------------------------------------------
    def compile_flags(self):
        implicit = set()
        for directory in filter(None, self.args.implicit_includes.split(";")):
            implicit.add(os.path.realpath(directory))
        flags = []
        for line in Path(self.args.torch_flags).read_text().split("\n"):
            line = line.strip()
            if not line:
                continue
            if line.startswith("-isystem") and os.path.realpath(line[len("-isystem"):]) in implicit:
                continue
            if line not in flags:
                flags.append(line)
        return flags

    def link_flags(self):
        lib = self.args.torch_lib_dir
        return [f"-L{lib}", f"-Wl,-rpath,{lib}", "-ltorch", "-ltorch_cpu", "-lc10"]

    def check_cpp(self, blocks):
        programs = [b for b in blocks if re.search(r"\bint main\s*\(", b["text"])]
        fragments = [b for b in blocks if b["fragment"]]
        for block in blocks:
            if block not in programs and block not in fragments:
                self.record(f"{block['file']}:{block['line']}", "```cpp block", "classified",
                            failing(f"neither a complete program (int main) nor marked {FRAGMENT_MARKER}"))
        if fragments and not programs:
            programs = [None]
        for index, program in enumerate(programs):
            parts = []
            if program is not None:
                parts.append(f'#line {program["line"]} "{program["file"]}"\n{program["text"]}')
            else:
                parts.append("#include <volt/volt.hpp>\nint main() { return 0; }\n")
            attached = fragments if index == 0 else []
            for number, fragment in enumerate(attached):
                parts.append(f"namespace docs_fragment_{number} {{\n"
                             f'#line {fragment["line"]} "{fragment["file"]}"\n{fragment["text"]}}}\n')
            source = "\n".join(parts)
            where = f"{program['file']}:{program['line']}" if program else "fragments"
            what = ("complete program" if program else "no complete program") + \
                   (f" + {len(attached)} fragments ({', '.join(f['file'] + ':' + str(f['line']) for f in attached)})"
                    if attached else "")
            self.record(where, what, "compiled and linked as one translation unit",
                        lambda source=source, index=index: self.compile(source, index))
            if program is not None:
                self.record(where, "complete program", "run; exit status 0",
                            lambda index=index: self.run_program(index))

    def compile(self, source, index):
        folder = self.work / f"cpp{index}"
        folder.mkdir(parents=True, exist_ok=True)
        command = [self.args.compiler, *self.compile_flags(), f"-I{self.args.volt_include}", "-O0", "-Wall",
                   "-Wextra", "-Werror", "docs.cpp", "-o", "docs", *self.link_flags()]
        digest = hashlib.sha256((source + "\0".join(command)).encode()).hexdigest()
        stamp = folder / "docs.sha256"
        if (folder / "docs").exists() and stamp.exists() and stamp.read_text() == digest:
            return "unchanged since the last successful compile in this folder: binary reused"
        stamp.unlink(missing_ok=True)
        (folder / "docs.cpp").write_text(source)
        result = subprocess.run(command, cwd=folder, capture_output=True, text=True)
        if result.returncode != 0:
            raise Failure(f"compile failed ({shlex.join(command)}):\n{result.stdout}{result.stderr[-6000:]}")
        stamp.write_text(digest)
        return None

    def run_program(self, index):
        folder = self.work / f"cpp{index}"
        if not (folder / "docs").exists():
            raise Failure("not compiled")
        run_dir = folder / "run"
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir()
        result = subprocess.run([str(folder / "docs")], cwd=run_dir, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise Failure(f"exit status {result.returncode}:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
        return result.stdout.strip().split("\n")[-1][:120]

    # ---- shell commands --------------------------------------------------------------------------------
    @staticmethod
    def commands_of(block):
        """The commands of an indented block: backslash continuations joined, trailing comments removed."""
        commands, current, first = [], "", None
        for offset, line in enumerate(block["lines"]):
            if not line.strip():
                continue
            if first is None:
                first = block["line"] + offset
            current += line.rstrip()
            if current.endswith("\\"):
                current = current[:-1] + " "
                continue
            lexer = shlex.shlex(current, posix=True, punctuation_chars=False)
            lexer.whitespace_split = True
            lexer.commenters = "#"
            try:
                tokens = list(lexer)
            except ValueError as error:
                raise Failure(f"line {first}: cannot split `{current}`: {error}")
            commands.append({"line": first, "text": re.sub(r"\s+#.*$", "", current).strip(), "tokens": tokens})
            current, first = "", None
        return commands

    def tree_binary(self, name):
        binary = self.build / "examples" / name
        if not binary.exists():
            raise Failure(f"{binary} is not built (build the example targets of the tree first)")
        return binary

    def detect_machine(self):
        if self.machine is None:
            result = subprocess.run([str(self.tree_binary("doctor"))], capture_output=True, text=True, timeout=120)
            cuda = re.search(r"visible CUDA devices: ([0-9]+)", result.stdout)
            mps = re.search(r"MPS available: (yes|no)", result.stdout)
            if result.returncode != 0 or not cuda or not mps:
                raise Failure(f"doctor's report is not as expected:\n{result.stdout}{result.stderr}")
            self.machine = {"cuda": int(cuda.group(1)) > 0, "mps": mps.group(1) == "yes"}
            self.machine["gpu"] = self.machine["cuda"] or self.machine["mps"]
        return self.machine

    def run_example(self, name, arguments, environment, label):
        """Runs the tree's example `name` with the documented arguments and the short-run override."""
        machine = self.detect_machine()
        accelerator = "auto"
        for i, token in enumerate(arguments):
            if token == "--accelerator" and i + 1 < len(arguments):
                accelerator = arguments[i + 1]
            elif token.startswith("--accelerator="):
                accelerator = token.split("=", 1)[1]
        run_dir = self.work / "runs" / label
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        extra = list(SHORT_RUN[name])
        if name in WRITES_FILES:
            extra += ["--default-root-dir", str(run_dir)]
        command = [str(self.tree_binary(name)), *arguments, *extra]
        env = dict(os.environ, **environment)
        result = subprocess.run(command, cwd=run_dir, capture_output=True, text=True, env=env, timeout=900)
        output = result.stdout + result.stderr
        shown = shlex.join([name, *arguments, *extra])
        if accelerator in UNAVAILABLE and not machine[accelerator]:
            if result.returncode != 2 or not re.search(UNAVAILABLE[accelerator], output, re.S):
                raise Failure(f"`{shown}` on a machine without {accelerator}: expected exit status 2 and the "
                              f"availability message, got {result.returncode}:\n{output[-3000:]}")
            return f"no {accelerator} here: exit status 2 with the availability message ({shown})"
        if result.returncode != 0 or not re.search(SUCCESS[name], output, re.S):
            raise Failure(f"`{shown}`: exit status {result.returncode}, expected 0 and /{SUCCESS[name]}/:\n"
                          f"{output[-3000:]}")
        return f"ran `{shown}`"

    def cache_value(self, key):
        cache = (self.build / "CMakeCache.txt").read_text()
        match = re.search(rf"^{re.escape(key)}:[A-Z]+=(.*)$", cache, re.M)
        return match.group(1) if match else ""

    def python_with_torch(self):
        for candidate in filter(None, [self.args.python, shutil.which("python3")]):
            probe = subprocess.run([candidate, "-c", "import torch"], capture_output=True)
            if probe.returncode == 0:
                return candidate
        raise Failure("no Python that imports torch to evaluate the command with (pass --python, e.g. "
                      "-DVOLT_PYTHON=... for the CTest test)")

    # Each kind of command: (name, pattern on the command text, how it is exercised, check).
    def command_kinds(self):
        return [
            ("run-tests", r"tools/run-tests\.sh", "CI's command: .ci/run runs tools/run-tests.sh, which runs "
             "this check", self.kind_run_tests),
            ("run-example", r"tools/run-example\.sh( .*)?", "the script builds and runs the tree's "
             "fashion_mnist with the given arguments: its last line is checked, then the tree's binary is run "
             "(short run)", self.kind_run_example),
            ("install", r"cmake -S \S+ -B (\S+) -DCMAKE_INSTALL_PREFIX=\S+ && cmake --install \1",
             "the consumption test volt.consume.install_find_package configures, installs and consumes volt "
             "the same way", self.kind_install),
            ("vendored compile", r"g\+\+ .*main\.cpp .*", "the consumption test volt.consume.vendored_single_header "
             "compiles with the same flags and libraries, and so does this check's own C++",
             self.kind_vendored),
            ("python variable", r"T=\$\(python3 -c '[^']*'\)", "defines T for the next command, which uses it",
             self.kind_variable),
            ("configure", r"cmake -S \. -B build( -G \S+)?( -D\S+)*", "compared with the tree under test (its "
             "CMakeCache.txt); a CMAKE_PREFIX_PATH from Python is evaluated and must hold Torch's CMake package",
             self.kind_configure),
            ("build targets", r"cmake --build build --target( [a-z_]+)+", "run against the tree under test "
             "(a no-op when the targets are built)", self.kind_build),
            ("example", r"([A-Z_]+=\S+ )*\./build/examples/[a-z_]+( .*)?", "run: the tree's binary with these "
             "flags plus a short-run override", self.kind_example),
            ("flags synopsis", r"--[a-z].*", "each flag and each {choice,list} appears in the examples' --help",
             self.kind_synopsis),
        ]

    def kind_run_tests(self, command, context):
        ci = (self.root / ".ci/run").read_text()
        if not re.search(r"^tools/run-tests\.sh\s*$", ci, re.M):
            raise Failure(".ci/run does not run tools/run-tests.sh")
        return "CI runs it (.ci/run)"

    def kind_run_example(self, command, context):
        script = (self.root / "tools/run-example.sh").read_text()
        if not re.search(r'cmake --build "\$dir" --target fashion_mnist\n"\$dir/examples/fashion_mnist" "\$@"\s*$',
                         script):
            raise Failure("tools/run-example.sh no longer ends by building and running examples/fashion_mnist "
                          "with its arguments: update this check")
        return self.run_example("fashion_mnist", command["tokens"][1:], {}, f"{context}-run-example")

    def kind_install(self, command, context):
        run = (self.root / "tests/consumption/run.cmake").read_text()
        tests = (self.root / "tests/CMakeLists.txt").read_text()
        for needle in ["-DCMAKE_INSTALL_PREFIX=", "${CMAKE_COMMAND} --install", 'MODE STREQUAL "install_find_package"']:
            if needle not in run:
                raise Failure(f"tests/consumption/run.cmake no longer has `{needle}`")
        if "install_find_package" not in tests:
            raise Failure("tests/CMakeLists.txt no longer runs the install_find_package consumption test")
        return "volt.consume.install_find_package"

    def kind_vendored(self, command, context):
        tokens = command["tokens"]
        run = (self.root / "tests/consumption/run.cmake").read_text()
        compile_line = re.search(r"run\(\$\{COMPILER\} \$\{flags\} -I\$\{WORK_DIR\}/vendor main\.cpp -o consumer\s+"
                                 r"-L\$\{TORCH_LIB_DIR\} -Wl,-rpath,\$\{TORCH_LIB_DIR\}((?: -l\S+)+)\)", run)
        if not compile_line:
            raise Failure("tests/consumption/run.cmake's vendored compile line is not the expected one: update "
                          "this check")
        test_libraries = compile_line.group(1).split()
        documented_libraries = [t for t in tokens if t.startswith("-l")]
        if documented_libraries != test_libraries or test_libraries != self.link_flags()[2:]:
            raise Failure(f"libraries {documented_libraries} differ from the test's {test_libraries}")
        if "-I" not in tokens or tokens[tokens.index("-I") + 1] != "vendor":
            raise Failure("the command must compile with `-I vendor` (single_include/volt/volt.hpp copied "
                          "to vendor/volt/)")
        flags = self.compile_flags()
        if "-std=c++20" not in tokens or "-std=c++20" not in flags:
            raise Failure("-std=c++20 is not in both the command and LibTorch's flags")
        for i, token in enumerate(tokens):
            if token == "-isystem":
                path = tokens[i + 1]
                suffix = "torch/csrc/api/include"
                if not path.endswith(suffix) or not any(f.endswith(suffix) for f in flags):
                    raise Failure(f"-isystem {path}: LibTorch's flags have no {suffix}")
        return "volt.consume.vendored_single_header (same libraries, include folders and standard)"

    def kind_variable(self, command, context):
        return "evaluated with the next command"

    def kind_configure(self, command, context):
        tokens = command["tokens"]
        generator = tokens[tokens.index("-G") + 1] if "-G" in tokens else None
        if generator and generator != self.cache_value("CMAKE_GENERATOR"):
            raise Failure(f"the tree under test was not configured with -G {generator}")
        notes = []
        for token in tokens:
            define = re.match(r"-D([A-Z_]+)=(.*)$", token)
            if not define:
                continue
            key, value = define.groups()
            if key == "CMAKE_BUILD_TYPE":
                if value != self.cache_value("CMAKE_BUILD_TYPE"):
                    raise Failure(f"the tree under test is not a {value} build")
            elif key == "CMAKE_PREFIX_PATH":
                assignment = self.pending.pop("T", None)
                if assignment is None or "$T" not in value:
                    raise Failure("CMAKE_PREFIX_PATH must come from the T=... line just above")
                python = self.python_with_torch()
                script = assignment.replace("python3", shlex.quote(python), 1) + f'; printf %s "{value}"'
                result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
                prefix = result.stdout
                if result.returncode != 0 or not prefix:
                    raise Failure(f"evaluating it failed: {result.stderr}")
                found = [p for p in prefix.split(";") if (Path(p) / "Torch" / "TorchConfig.cmake").exists()]
                if not found:
                    raise Failure(f"CMAKE_PREFIX_PATH={prefix} holds no Torch/TorchConfig.cmake")
                torch_dir = os.path.realpath(self.cache_value("Torch_DIR"))
                if torch_dir.startswith(os.path.realpath(prefix.split(";")[-1])):
                    # The tree may list more folders (e.g. where doctest is); the documented ones must be
                    # there, in the documented order.
                    tree = [os.path.realpath(p) for p in self.cache_value("CMAKE_PREFIX_PATH").split(";") if p]
                    wanted = [os.path.realpath(p) for p in prefix.split(";") if p]
                    positions = [tree.index(p) if p in tree else -1 for p in wanted]
                    if -1 in positions or positions != sorted(positions):
                        raise Failure(f"the tree under test uses this LibTorch with CMAKE_PREFIX_PATH="
                                      f"{self.cache_value('CMAKE_PREFIX_PATH')}, which does not list {prefix} "
                                      "in this order")
                    notes.append("the tree under test was configured with these CMAKE_PREFIX_PATH folders")
                else:
                    notes.append(f"evaluates to {prefix} (Torch's CMake package found there)")
            else:
                raise Failure(f"-D{key}: this check does not know how to verify it")
        return "; ".join(notes) or "the tree under test matches"

    def kind_build(self, command, context):
        targets = command["tokens"][command["tokens"].index("--target") + 1:]
        result = subprocess.run(["cmake", "--build", str(self.build), "--target", *targets],
                                capture_output=True, text=True, timeout=1800)
        if result.returncode != 0:
            raise Failure(f"build failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
        missing = [t for t in targets if not (self.build / "examples" / t).exists()]
        if missing:
            raise Failure(f"not built: {missing}")
        return f"built in the tree under test: {', '.join(targets)}"

    def kind_example(self, command, context):
        tokens = command["tokens"]
        environment = {}
        while re.match(r"^[A-Z_]+=", tokens[0]):
            key, value = tokens[0].split("=", 1)
            environment[key] = value
            tokens = tokens[1:]
        name = tokens[0].rsplit("/", 1)[1]
        if name not in SHORT_RUN:
            raise Failure(f"no short-run override for the example {name}: add it to SHORT_RUN")
        return self.run_example(name, tokens[1:], environment, context)

    def kind_synopsis(self, command, context):
        help_text = subprocess.run([str(self.tree_binary("fashion_mnist")), "--help"], capture_output=True,
                                   text=True, timeout=60).stdout
        text = re.sub(r"\(aliases [^)]*\)", "", command["text"])
        missing = [flag for flag in re.findall(r"--[a-z][a-z-]*", text) if flag not in help_text]
        missing += [choices for choices in re.findall(r"\{[^}]*\}", text) if choices not in help_text]
        aliases = re.search(r"\(aliases ([^)]*)\)", command["text"])
        if aliases:
            for alias in aliases.group(1).split(", "):
                if not re.search(rf"\b{re.escape(alias)}\b", help_text.split("--precision", 1)[1].split("\n  --", 1)[0]):
                    missing.append(f"alias {alias}")
        if missing:
            raise Failure(f"not in `fashion_mnist --help`: {missing}")
        return "in `fashion_mnist --help`"

    def check_commands(self, relative, block, block_index):
        self.pending = {}
        try:
            commands = self.commands_of(block)
        except Failure as error:
            self.record(f"{relative}:{block['line']}", "indented block", "split into commands", failing(str(error)))
            return
        for number, command in enumerate(commands):
            context = f"{relative}-{block['line']}-{number}".replace("/", "-").replace(".md", "")
            for name, pattern, how, check in self.command_kinds():
                if re.fullmatch(pattern, command["text"]):
                    if check == self.kind_variable:  # also when --only leaves this line out
                        self.pending["T"] = command["text"]
                    self.record(f"{relative}:{command['line']}", command["text"], f"[{name}] {how}",
                                lambda check=check, command=command, context=context: check(command, context))
                    break
            else:
                self.record(f"{relative}:{command['line']}", command["text"], "classified",
                            failing("matches no kind of command in command_kinds(): add a kind that exercises it"))
        if self.pending:
            self.record(f"{relative}:{block['line']}", "T=... line", "used by the next command",
                        failing("no command used the variable"))

    # ---- the compile-time benchmark's copy of the README program ----------------------------------------
    def check_benchmark_copy(self, fenced):
        """benchmarks/compile_time/trainer_program.cpp must be the README's first complete program, verbatim."""
        programs = [b for b in fenced if b["language"] == "cpp" and re.search(r"\bint main\s*\(", b["text"])]
        copy = self.root / BENCHMARK_COPY

        def check():
            if not programs:
                raise Failure("README.md has no complete ```cpp program")
            if not copy.exists():
                raise Failure(f"{BENCHMARK_COPY} is missing")
            if copy.read_text() != programs[0]["text"]:
                raise Failure(f"{BENCHMARK_COPY} differs from the block: copy the block into it")
            return None
        where = f"README.md:{programs[0]['line']}" if programs else "README.md"
        self.record(where, "complete program", f"equal to {BENCHMARK_COPY}", check)

    # ---- everything --------------------------------------------------------------------------------------
    def main(self):
        self.work.mkdir(parents=True, exist_ok=True)
        documents = {}
        for relative in DOCUMENTS:
            try:
                documents[relative] = self.extract(relative)
            except Failure as error:
                self.record(relative, "document", "parsed", failing(str(error)))
        cpp_blocks = []
        if "README.md" in documents:
            self.check_benchmark_copy(documents["README.md"][1])
        for relative, (lines, fenced, indented, quotes, message_tables) in documents.items():
            self.check_links(relative, lines)
            for quote in quotes + message_tables:
                self.check_message(relative, quote)
            for block in fenced:
                block["file"] = relative
                if block["language"] == "cpp":
                    cpp_blocks.append(block)
                elif block["language"] == "cmake":
                    self.check_cmake_block(relative, block)
                else:
                    self.record(f"{relative}:{block['line']}", f"```{block['language']} block", "classified",
                                failing("no rule for this language of block"))
        if self.args.static_only:
            print("(--static-only: C++ blocks and commands not exercised)")
        else:
            self.check_cpp(cpp_blocks)
            for relative, (lines, fenced, indented, quotes, message_tables) in documents.items():
                for index, block in enumerate(indented):
                    self.check_commands(relative, block, index)
        failures = [r for r in self.results if not r[3]]
        print(f"\n{len(self.results)} checks, {len(failures)} failed"
              + (f", {self.skipped} not selected by --only" if self.skipped else ""))
        for where, what, how, _, detail in failures:
            print(f"FAILED {where}: {what}\n  {how}\n  {detail}")
        return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source-dir", default=str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--build-dir", help="the CMake tree whose examples are run")
    parser.add_argument("--work-dir", required=True, help="scratch folder")
    parser.add_argument("--compiler", default="c++")
    parser.add_argument("--torch-flags", help="the tree's tests/torch_flags.rsp (LibTorch's compile flags)")
    parser.add_argument("--implicit-includes", default="", help="the compiler's own include folders, ;-separated")
    parser.add_argument("--volt-include", help="volt's headers: include/ or single_include/")
    parser.add_argument("--torch-lib-dir", help="the folder of libtorch.so")
    parser.add_argument("--python", default="", help="a Python that imports torch")
    parser.add_argument("--spec", default="", help="Lightning's texts that volt follows (optional)")
    parser.add_argument("--only", default="", help="exercise only the checks whose 'file:line: text' matches "
                        "this regular expression (to try one block; the CTest test checks everything)")
    parser.add_argument("--static-only", action="store_true",
                        help="links, messages and cmake blocks only (no compiling, no running)")
    args = parser.parse_args()
    if not args.static_only and not all([args.build_dir, args.torch_flags, args.volt_include, args.torch_lib_dir]):
        parser.error("--build-dir, --torch-flags, --volt-include and --torch-lib-dir are needed unless --static-only")
    return Checker(args).main()


if __name__ == "__main__":
    sys.exit(main())
