#!/usr/bin/env python3
"""Fault campaign on the Fashion-MNIST MLP example: SIGKILL at random moments across chains of resumes, and
checkpoints and logs on a full or read-only disk. Python 3 standard library only.

    tests/reliability/fault_campaign.py --example build/examples/fashion_mnist --work-dir /tmp/campaign
    tests/reliability/fault_campaign.py --example ... --work-dir ... --short      # the CI form (CTest)

Every run trains on the CPU with validation, top-k ModelCheckpoint on val_acc (--save-top-k 3), last.ckpt and a
checkpoint every 3 optimizer steps, in a fixed --checkpoint-dir. First an uninterrupted
reference run, then:

  kill chains  a run is killed with SIGKILL, resumed with --ckpt-path <dir>/last.ckpt, killed again, ... and
               finally left to finish (when a kill came before the first last.ckpt, the next run starts afresh
               in an emptied folder). The kills are, in turn, aimed at a checkpoint write or at a random wall
               time (uniform over what is left of the run, from the median length of the latest whole runs).
               An aimed kill polls the folder for new temporary files `.<name>.tmp<N>` and kills the process
               when the n-th one (n random) appears. A kill "landed during a write" when a temporary file that
               run created is in the folder once it is dead.
               For every chain: the final weights (--save-weights) are byte-identical to the reference run's,
               the checkpoint folder holds the same file names, no temporary file is left anywhere under the
               run's folders, and the printed steps and test accuracy are the reference's.
  disk cases   on a tmpfs (mount needs CAP_SYS_ADMIN, as root; skipped with the reason elsewhere):
               ckpt_full      the checkpoint folder on a tmpfs of 2.5 checkpoints: the run must fail naming a file
                              of the folder and "No space left on device", leave no temporary file, and its last
                              checkpoint must resume to the reference run's final weights;
               ckpt_readonly  the checkpoint folder remounted read-only after the first last.ckpt (the process
                              stopped with SIGSTOP meanwhile): fail naming the file and "Read-only file system",
                              the last checkpoint resumes to the reference weights;
               log_full       the root folder (CSVLogger: hparams.yaml, metrics.csv) on a tmpfs filled to one free
                              page (log_full_0: no free page): a non-zero exit naming the log file and "No space left
                              on device", or exit 0 with every row of the reference run's metrics.csv;
               log_readonly   the root folder remounted read-only once hparams.yaml is written: the same check
                              with "Read-only file system".
Prints a summary table; exit status 0 only when every check held (1 otherwise, 77 when the example cannot run:
no Fashion-MNIST data).
"""

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

TEMP_FILE = re.compile(r"^\..+\.tmp\d*$")


def log(message):
    print(message, flush=True)


class Campaign:
    def __init__(self, args):
        self.args = args
        self.example = os.path.abspath(args.example)
        self.work = os.path.abspath(args.work_dir)
        self.rng = random.Random(args.seed)
        self.failures = []
        self.kills = 0
        self.kills_in_write = 0
        self.kills_aimed = 0
        self.kills_timed = 0
        self.kills_missed = 0
        self.kill_attempts = 0
        self.runs = 0
        self.chains = []  # (name, kills, in_write, resumes, problems)
        self.disk = []  # (case, status, detail)
        self.mounts = []

    # ---- running the example ---------------------------------------------------------------------------------

    def base_command(self, root, ckpt_dir, weights=None, ckpt_path=None):
        a = self.args
        command = [self.example, "--accelerator", "cpu", "--seed", str(a.train_seed), "--max-epochs", str(a.epochs),
                   "--limit-train-batches", str(a.train_batches), "--limit-val-batches", str(a.val_batches),
                   "--every-n-train-steps", str(a.every_n_steps), "--save-top-k", str(a.top_k), "--save-last",
                   "--no-progress-bar", "--default-root-dir", root, "--checkpoint-dir", ckpt_dir]
        if a.data_dir:
            command += ["--data-dir", a.data_dir]
        if weights:
            command += ["--save-weights", weights]
        if ckpt_path:
            command += ["--ckpt-path", ckpt_path]
        return command

    def start(self, command, output):
        self.runs += 1
        out = open(output, "wb")
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        out.close()
        return process

    def run(self, command, output, timeout=600):
        process = self.start(command, output)
        try:
            status = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            status = process.wait()
        return status, read_text(output)

    # ---- the reference run -----------------------------------------------------------------------------------

    def reference(self):
        folder = os.path.join(self.work, "reference")
        os.makedirs(folder)
        self.ref_ckpt = os.path.join(folder, "ckpt")
        self.ref_weights = os.path.join(folder, "weights.pt")
        command = self.base_command(os.path.join(folder, "root"), self.ref_ckpt, self.ref_weights)
        log("reference run: " + " ".join(command))
        start = time.monotonic()
        output = os.path.join(folder, "output.txt")
        process = self.start(command, output)
        # the temporary files of its checkpoint writes that polling sees: the aimed kills pick one of them
        seen = set()
        self.ref_first_write = None
        while process.poll() is None:
            if os.path.isdir(self.ref_ckpt):
                seen.update(n for n in os.listdir(self.ref_ckpt) if TEMP_FILE.match(n))
                if seen and self.ref_first_write is None:
                    self.ref_first_write = time.monotonic() - start
            time.sleep(0.0005)
        status = process.returncode
        text = read_text(output)
        self.ref_seconds = time.monotonic() - start
        self.durations = [self.ref_seconds]
        self.ref_writes = max(1, len(seen))
        if self.ref_first_write is None:
            self.ref_first_write = self.ref_seconds / 2
        if status != 0 or "test accuracy" not in text:
            if "Fashion-MNIST was not found" in text or "must hold the uncompressed IDX files" in text:
                log("skipped: the example finds no Fashion-MNIST data (install dataset-fashion-mnist or pass "
                    "--data-dir):\n" + text)
                sys.exit(77)
            log(text)
            sys.exit("error: the uninterrupted reference run failed (exit status %d)" % status)
        self.ref_summary = summary_lines(text)
        self.ref_files = sorted(os.listdir(self.ref_ckpt))
        self.ref_temp = temp_files(folder)
        if self.ref_temp:
            self.failures.append("reference run: temporary files left: %s" % self.ref_temp)
        self.ref_metrics = metrics_rows(os.path.join(folder, "root"))
        self.ckpt_size = os.path.getsize(os.path.join(self.ref_ckpt, "last.ckpt"))
        self.total_steps = checkpoint_step(os.path.join(self.ref_ckpt, "last.ckpt")) or 0
        log("reference: %.1f s, %d checkpoint writes seen, checkpoint folder %s, last.ckpt %d bytes, %s"
            % (self.ref_seconds, self.ref_writes, self.ref_files, self.ckpt_size, "; ".join(self.ref_summary)))

    # ---- kill chains -----------------------------------------------------------------------------------------

    def kill_once(self, process, folder, mode, start_step):
        """Kills `process` as `mode` says; returns (killed, in_write, moment) where moment describes the aim.
        The moments are drawn over what is left of the run: from `start_step` (a resume) to the end."""
        before = set(n for n in os.listdir(folder) if TEMP_FILE.match(n)) if os.path.isdir(folder) else set()
        left = 1.0
        if start_step is not None and self.total_steps > 0:
            left = max(0.05, (self.total_steps - start_step) / self.total_steps)
        if mode == "timed":
            # the run's length: the median of the latest whole runs from the start (the machine's load changes)
            recent = sorted(self.durations[-5:])
            seconds = recent[len(recent) // 2]
            first_write = self.ref_first_write * seconds / self.ref_seconds
            delay = self.rng.uniform(0.05, 0.9 * (first_write + (seconds - first_write) * left))
            moment = "at %.2f s" % delay
            try:
                process.wait(timeout=delay)
                return False, False, moment + " (the run had ended)"
            except subprocess.TimeoutExpired:
                pass
        else:
            target = self.rng.randint(1, max(1, round(self.ref_writes * left)))
            moment = "at temporary file #%d" % target
            seen = set()
            deadline = time.monotonic() + 3 * self.ref_seconds + 30
            while True:
                if process.poll() is not None:
                    return False, False, moment + " (the run had ended after %d)" % len(seen)
                try:
                    names = os.listdir(folder)
                except FileNotFoundError:
                    names = []
                for name in names:
                    if TEMP_FILE.match(name) and name not in before:
                        seen.add(name)
                if len(seen) >= target or time.monotonic() > deadline:
                    break
                time.sleep(0.0005)
        process.send_signal(signal.SIGKILL)
        status = process.wait()
        if status != -signal.SIGKILL:
            return False, False, moment + " (the run had ended with status %d)" % status
        # a temporary file this run created (one left by an earlier kill does not count)
        written = [n for n in os.listdir(folder) if TEMP_FILE.match(n) and n not in before] \
            if os.path.isdir(folder) else []
        return True, written, moment

    def chain(self, index, planned_kills):
        name = "chain-%02d" % index
        folder = os.path.join(self.work, name)
        os.makedirs(folder)
        ckpt_dir = os.path.join(folder, "ckpt")
        root = os.path.join(folder, "root")
        weights = os.path.join(folder, "weights.pt")
        last = os.path.join(ckpt_dir, "last.ckpt")
        kills = in_write = resumes = 0
        steps = []  # the global step of each last.ckpt resumed from
        problems = []
        attempt = 0
        while True:
            attempt += 1
            resume = os.path.exists(last)
            resumed_from = ""
            if resume:
                steps.append(checkpoint_step(last))
                resumed_from = " (resumed from step %s)" % steps[-1]
            if not resume and os.path.isdir(ckpt_dir):
                # killed before the first last.ckpt: nothing to resume; a fresh run starts in an empty folder
                shutil.rmtree(ckpt_dir)
            command = self.base_command(root, ckpt_dir, weights, last if resume else None)
            resumes += 1 if resume else 0
            output = os.path.join(folder, "run-%02d.txt" % attempt)
            if kills < planned_kills and attempt < planned_kills * 3 + 3:
                # the two kinds of kill in turn, so that even the short form has both
                mode = "aimed" if self.kill_attempts % 2 == 0 else "timed"
                self.kill_attempts += 1
                started = time.monotonic()
                process = self.start(command, output)
                killed, landed, moment = self.kill_once(process, ckpt_dir, mode, steps[-1] if resume else None)
                if killed:
                    kills += 1
                    self.kills += 1
                    in_write += 1 if landed else 0
                    self.kills_in_write += 1 if landed else 0
                    if mode == "timed":
                        self.kills_timed += 1
                    else:
                        self.kills_aimed += 1
                    log("  %s run %d%s: SIGKILL %s %s%s" % (name, attempt, resumed_from, mode, moment,
                                                           ", during a write: " + ", ".join(sorted(landed))
                                                           if landed else ""))
                    continue
                self.kills_missed += 1
                if not resume and process.returncode == 0:
                    self.durations.append(time.monotonic() - started)
                log("  %s run %d%s: no kill %s %s" % (name, attempt, resumed_from, mode, moment))
                status = process.returncode
                text = read_text(output)
            else:
                status, text = self.run(command, output)
                log("  %s run %d%s: ran to the end (status %d)" % (name, attempt, resumed_from,
                                                                   status))
            break
        # the checks of a finished chain
        if status != 0:
            problems.append("the last run exited with status %d: %s" % (status, tail(text)))
        if not same_bytes(weights, self.ref_weights):
            problems.append("final weights differ from the uninterrupted run's")
        files = sorted(os.listdir(ckpt_dir)) if os.path.isdir(ckpt_dir) else []
        if files != self.ref_files:
            problems.append("checkpoint files %s, uninterrupted run: %s" % (files, self.ref_files))
        left = temp_files(folder)
        if left:
            problems.append("temporary files left: %s" % left)
        summary = summary_lines(text)
        if summary != self.ref_summary:
            problems.append("printed %s, uninterrupted run: %s" % (summary, self.ref_summary))
        self.chains.append((name, kills, in_write, resumes, problems, len(left)))
        for problem in problems:
            self.failures.append("%s: %s" % (name, problem))
        log("  %s: %d kills (%d during a write), %d resumes (from steps %s): %s"
            % (name, kills, in_write, resumes, steps, "; ".join(problems) or "identical"))

    def kill_campaign(self):
        index = 0
        while self.kills < self.args.kills or index < self.args.chains:
            index += 1
            remaining = self.args.kills - self.kills
            if index < self.args.chains:  # about an even share of the kills left, give or take one
                share = -(-remaining // (self.args.chains - index + 1))
                planned = self.rng.randint(max(1, share - 1), share + 1)
            else:  # the last planned chain, and more chains while kills missed (the run was over first)
                planned = remaining
            self.chain(index, max(1, min(self.args.max_kills_per_chain, planned)))
            if index > self.args.chains + 20:
                self.failures.append("could not perform %d kills" % self.args.kills)
                break

    # ---- disk cases --------------------------------------------------------------------------------------------

    def mount(self, path, size):
        os.makedirs(path, exist_ok=True)
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % size, "tmpfs", path],
                                capture_output=True, text=True)
        if result.returncode != 0:
            text = (result.stderr or result.stdout).strip()
            return text.splitlines()[0] if text else "mount exited with %d" % result.returncode
        self.mounts.append(path)
        return None

    def unmount_all(self):
        for path in reversed(self.mounts):
            if subprocess.run(["umount", path], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", path], capture_output=True)
        self.mounts = []

    def can_mount(self):
        probe = os.path.join(self.work, "mount-probe")
        reason = self.mount(probe, 64 * 1024)
        self.unmount_all()
        return reason

    def resumes_to_reference(self, ckpt_dir, folder, label):
        """Copies the checkpoint folder to the normal disk and resumes from its last.ckpt (or newest .ckpt) to
        the end; returns a problem or None."""
        copy = os.path.join(folder, "resume-ckpt")
        shutil.copytree(ckpt_dir, copy)
        checkpoints = sorted((f for f in os.listdir(copy) if f.endswith(".ckpt")),
                             key=lambda f: os.path.getmtime(os.path.join(copy, f)))
        if not checkpoints:
            return "no checkpoint was kept"
        chosen = "last.ckpt" if "last.ckpt" in checkpoints else checkpoints[-1]
        weights = os.path.join(folder, "resumed-weights.pt")
        status, text = self.run(self.base_command(os.path.join(folder, "resume-root"), copy, weights,
                                                  os.path.join(copy, chosen)),
                                os.path.join(folder, "resume.txt"))
        if status != 0:
            return "resuming from the kept %s failed (status %d): %s" % (chosen, status, tail(text))
        if not same_bytes(weights, self.ref_weights):
            return "resuming from the kept %s did not reach the reference weights" % chosen
        log("  %s: resumed from the kept %s to the reference run's final weights" % (label, chosen))
        return None

    def wait_for(self, process, predicate, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return False
            if predicate():
                return True
            time.sleep(0.002)
        return False

    def stop_and_remount(self, process, watched, path):
        """SIGSTOPs `process` when `watched` holds no temporary file (no write in progress), remounts `path`
        read-only, SIGCONTs. Returns a problem or None."""
        for _ in range(500):
            if process.poll() is not None:
                return "the run ended before the folder could be made read-only"
            process.send_signal(signal.SIGSTOP)
            wait_stopped(process.pid)
            if not temp_files(watched) and self.remount_readonly_once(path):
                process.send_signal(signal.SIGCONT)
                return None
            process.send_signal(signal.SIGCONT)
            time.sleep(0.005)
        return "could not remount %s read-only" % path

    def remount_readonly_once(self, path):
        return subprocess.run(["mount", "-o", "remount,ro", path], capture_output=True).returncode == 0

    def disk_case(self, case):
        folder = os.path.join(self.work, case)
        os.makedirs(folder)
        disk = os.path.join(folder, "disk")
        problems = []
        try:
            if case.startswith("ckpt"):
                size = int(self.ckpt_size * 2.5) if case == "ckpt_full" else 64 * 1024 * 1024
                reason = self.mount(disk, size)
                if reason:
                    return self.disk.append((case, "SKIP", "mount refused: " + reason))
                ckpt_dir = os.path.join(disk, "ckpt")
                root = os.path.join(folder, "root")
                command = self.base_command(root, ckpt_dir, os.path.join(folder, "weights.pt"))
                output = os.path.join(folder, "output.txt")
                process = self.start(command, output)
                expected = "No space left on device"
                if case == "ckpt_readonly":
                    expected = "Read-only file system"
                    last = os.path.join(ckpt_dir, "last.ckpt")
                    if not self.wait_for(process, lambda: os.path.exists(last), 120):
                        problems.append("no last.ckpt was written")
                    else:
                        problem = self.stop_and_remount(process, ckpt_dir, disk)
                        if problem:
                            problems.append(problem)
                status = process.wait(timeout=600)
                text = read_text(output)
                named = re.search(r"could not write the checkpoint " + re.escape(ckpt_dir) + r"/[^ :]+: .*" +
                                  re.escape(expected), text)
                if status == 0:
                    problems.append("the run exited 0")
                if not named:
                    problems.append("no message naming the checkpoint file and '%s': %s" % (expected, tail(text)))
                left = temp_files(disk)
                if left:
                    problems.append("temporary files left: %s" % left)
                if not problems:
                    problem = self.resumes_to_reference(ckpt_dir, folder, case)
                    if problem:
                        problems.append(problem)
                detail = named.group(0) if named else ""
            else:
                size = 512 * 1024 if case.startswith("log_full") else 8 * 1024 * 1024
                reason = self.mount(disk, size)
                if reason:
                    return self.disk.append((case, "SKIP", "mount refused: " + reason))
                if case.startswith("log_full"):
                    fill(disk, free_pages=0 if case == "log_full_0" else 1)
                    expected = "No space left on device"
                else:
                    expected = "Read-only file system"
                ckpt_dir = os.path.join(folder, "ckpt")
                command = self.base_command(disk, ckpt_dir, os.path.join(folder, "weights.pt"))
                output = os.path.join(folder, "output.txt")
                process = self.start(command, output)
                if case == "log_readonly":
                    hparams = os.path.join(disk, "lightning_logs", "version_0", "hparams.yaml")
                    if not self.wait_for(process, lambda: os.path.exists(hparams), 120):
                        problems.append("no hparams.yaml was written")
                    else:
                        problem = self.stop_and_remount(process, disk, disk)
                        if problem:
                            problems.append(problem)
                status = process.wait(timeout=600)
                text = read_text(output)
                named = re.search(r"could not write the log file " + re.escape(disk) + r"/[^ :]+: .*" +
                                  re.escape(expected), text)
                rows = metrics_rows(disk)
                if status == 0:
                    if rows != self.ref_metrics:
                        problems.append("the run exited 0 but metrics.csv holds %d of the reference's %d rows "
                                        "(logs silently lost)" % (len(rows), len(self.ref_metrics)))
                    detail = "exit 0 with all %d rows" % len(rows)
                else:
                    if not named:
                        problems.append("exit status %d without a message naming the log file and '%s': %s"
                                        % (status, expected, tail(text)))
                    detail = named.group(0) if named else ""
                left = temp_files(disk)
                if left:
                    problems.append("temporary files left: %s" % left)
        finally:
            self.unmount_all()
        for problem in problems:
            self.failures.append("%s: %s" % (case, problem))
        self.disk.append((case, "FAIL" if problems else "pass", "; ".join(problems) or detail))
        log("  %s: %s" % (case, "; ".join(problems) or "pass: " + detail))

    # ---- the whole campaign ----------------------------------------------------------------------------------

    def go(self):
        if os.path.exists(self.work):
            unmount_under(self.work)
            shutil.rmtree(self.work)
        os.makedirs(self.work)
        self.env = dict(os.environ)
        self.env.setdefault("CUDA_VISIBLE_DEVICES", "")
        started = time.monotonic()
        self.reference()
        log("kill campaign: at least %d kills over at least %d chains (seed %d)"
            % (self.args.kills, self.args.chains, self.args.seed))
        self.kill_campaign()
        cases = self.args.disk_cases
        if cases:
            reason = self.can_mount()
            if reason:
                log("skipped: the disk cases need to mount a tmpfs (root with CAP_SYS_ADMIN): " + reason)
                for case in cases:
                    self.disk.append((case, "SKIP", "mount refused: " + reason))
            else:
                log("disk cases:")
                for case in cases:
                    self.disk_case(case)
        self.seconds = time.monotonic() - started
        self.report()
        if self.failures:
            log("the runs' folders and outputs are kept in " + self.work)
            return 1
        if not self.args.keep:
            unmount_under(self.work)
            shutil.rmtree(self.work, ignore_errors=True)  # 3.3 MB a checkpoint: ~100 MB for the short form
        return 0

    def report(self):
        chains_ok = sum(1 for c in self.chains if not c[4])
        mismatches = sum(1 for c in self.chains
                         if any(p.startswith(("final weights", "checkpoint files", "printed")) for p in c[4]))
        left = sum(c[5] for c in self.chains)
        rows = [
            ("kills performed (SIGKILL)", str(self.kills)),
            ("  aimed at a checkpoint write", str(self.kills_aimed)),
            ("  at a random wall time", str(self.kills_timed)),
            ("kills that landed during a write (a temporary file of that run left)", str(self.kills_in_write)),
            ("planned kills that missed (run already over)", str(self.kills_missed)),
            ("chains (kill, resume from last.ckpt, ..., finish)", str(len(self.chains))),
            ("  of them with at least one kill", str(sum(1 for c in self.chains if c[1] > 0))),
            ("resumes", str(sum(c[3] for c in self.chains))),
            ("chains identical to the uninterrupted run", "%d of %d" % (chains_ok, len(self.chains))),
            ("mismatches (weights, checkpoint names or printed steps/accuracy)", str(mismatches)),
            ("temporary files left after the chains", str(left)),
            ("example runs", str(self.runs)),
            ("campaign wall time", "%.0f s" % self.seconds),
        ]
        for case, status, detail in self.disk:
            rows.append(("disk case " + case, status))
        width = max(len(r[0]) for r in rows)
        log("\n== fault campaign summary (seed %d%s)" % (self.args.seed, ", short form" if self.args.short else ""))
        log("| %s | %s |" % ("what".ljust(width), "result"))
        log("|%s|%s|" % ("-" * (width + 2), "-" * 8))
        for what, value in rows:
            log("| %s | %s |" % (what.ljust(width), value))
        if self.disk:
            log("\ndisk cases:")
            for case, status, detail in self.disk:
                log("  %-14s %-4s %s" % (case, status, detail))
        if self.failures:
            log("\nFAILED (%d):" % len(self.failures))
            for failure in self.failures:
                log("  " + failure)
        else:
            log("\nall checks held")


# ---- helpers ------------------------------------------------------------------------------------------------


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def tail(text, lines=4):
    return " | ".join(text.strip().splitlines()[-lines:])


def summary_lines(text):
    """The run's printed result without its timings: epochs, steps, best checkpoint's name and score, accuracy."""
    out = []
    for line in text.splitlines():
        m = re.search(r"epochs: (\d+) \| steps: (\d+)", line)
        if m:
            out.append("epochs %s steps %s" % m.groups())
        m = re.match(r"best checkpoint: .*/([^/]+) \((val_acc [0-9.]+)\)", line)
        if m:
            out.append("best %s %s" % m.groups())
        if line.startswith("test accuracy:"):
            out.append(line)
    return out


def checkpoint_step(path):
    """The global step a volt checkpoint holds (the top-level 'global_step' of its data.pkl, Lightning's
    layout), None when it cannot be read. Only used to aim the kills at what is left of a resumed run."""
    import pickletools
    import zipfile
    try:
        with zipfile.ZipFile(path) as archive:
            data = archive.read(next(n for n in archive.namelist() if n.endswith("/data.pkl")))
        found = False
        for opcode, arg, _ in pickletools.genops(data):
            if found and opcode.name in ("BININT", "BININT1", "BININT2", "LONG1"):
                return int(arg)
            if opcode.name in ("BINUNICODE", "SHORT_BINUNICODE"):
                found = arg == "global_step"
    except Exception:
        return None
    return None


def wait_stopped(pid):
    """Waits (up to a second) until the process is in the stopped state."""
    for _ in range(1000):
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("T", "t", "Z", "X"):
                    return
        except (FileNotFoundError, IndexError):
            return
        time.sleep(0.001)


def temp_files(folder):
    found = []
    for directory, _, files in os.walk(folder):
        found += [os.path.relpath(os.path.join(directory, f), folder) for f in files if TEMP_FILE.match(f)]
    return sorted(found)


def metrics_rows(root):
    path = os.path.join(root, "lightning_logs", "version_0", "metrics.csv")
    if not os.path.exists(path):
        return []
    return read_text(path).splitlines()


def same_bytes(a, b):
    if not (os.path.exists(a) and os.path.exists(b)):
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def fill(folder, free_pages):
    """Fills the tmpfs at `folder` so that `free_pages` pages of 4 KiB stay free."""
    descriptor = os.open(os.path.join(folder, "filler"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    block = b"x" * 4096
    try:
        while os.write(descriptor, block) > 0:
            pass
    except OSError:
        pass
    finally:
        os.close(descriptor)
    if free_pages:
        size = os.path.getsize(os.path.join(folder, "filler"))
        os.truncate(os.path.join(folder, "filler"), max(0, size - free_pages * 4096))


def unmount_under(folder):
    with open("/proc/mounts") as f:
        points = [line.split()[1] for line in f]
    for point in sorted(points, reverse=True):
        if point.startswith(folder.rstrip("/") + "/"):
            subprocess.run(["umount", "-l", point], capture_output=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--example", required=True, help="the fashion_mnist example binary")
    parser.add_argument("--work-dir", required=True, help="scratch folder (emptied first)")
    parser.add_argument("--short", action="store_true", help="the CI form: 6 kills over 2 chains, one run of each "
                                                           "disk case")
    parser.add_argument("--kills", type=int, help="kills to perform at least (default 50; 6 with --short)")
    parser.add_argument("--chains", type=int, help="chains at least (default 12; 2 with --short)")
    parser.add_argument("--max-kills-per-chain", type=int, default=8)
    parser.add_argument("--seed", type=int, default=20261202, help="seed of the kill moments")
    parser.add_argument("--train-seed", type=int, default=42, help="the example's --seed")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--train-batches", type=int, help="the example's --limit-train-batches (default 10)")
    parser.add_argument("--val-batches", type=int, default=3)
    parser.add_argument("--every-n-steps", type=int, help="the example's --every-n-train-steps (default 3)")
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--data-dir", help="the example's --data-dir")
    parser.add_argument("--keep", action="store_true", help="keep the work folder when every check held (it is "
                                                             "always kept after a failure)")
    parser.add_argument("--disk", default=None,
                        help="comma-separated disk cases (ckpt_full, ckpt_readonly, log_full, log_full_0, "
                             "log_readonly; 'none' for none); default: all")
    args = parser.parse_args()
    if args.kills is None:
        args.kills = 6 if args.short else 50
    if args.chains is None:
        args.chains = 2 if args.short else 12
    # 10 batches an epoch and a save every 3 steps put a save on an epoch's last batch (step 30), before that
    # epoch's validation: a resume from there must still run it (benchmarks/results/fault-campaign.md).
    if args.train_batches is None:
        args.train_batches = 10
    if args.every_n_steps is None:
        args.every_n_steps = 3
    all_cases = ["ckpt_full", "ckpt_readonly", "log_full", "log_full_0", "log_readonly"]
    if args.disk is None:
        args.disk_cases = ["ckpt_full", "ckpt_readonly", "log_full", "log_readonly"] if args.short else all_cases
    elif args.disk == "none":
        args.disk_cases = []
    else:
        args.disk_cases = args.disk.split(",")
        unknown = [c for c in args.disk_cases if c not in all_cases]
        if unknown:
            parser.error("unknown disk cases: %s" % unknown)
    campaign = Campaign(args)
    try:
        return campaign.go()
    finally:
        campaign.unmount_all()


if __name__ == "__main__":
    sys.exit(main())
