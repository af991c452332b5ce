#!/usr/bin/env python3
"""volt's MLFlowLogger against a real MLflow tracking server, read back with MLflow's Python client.

Starts `mlflow server` once on 127.0.0.1 (a free port, a SQLite store and an artifact folder in --workdir),
runs the helper program tests/loggers/interop/mlflow_tool.cpp (CMake target volt_mlflow_tool) against it, and
checks the run through mlflow.MlflowClient; then checks that a server that is down, or answers 500 to
everything, never stops the program and is reported once. With --example (the fashion_mnist example's program), the
same server also takes a short Fashion-MNIST run with --mlflow-uri, checked against the CSV file the run wrote
beside it. Run by ctest as volt.loggers.mlflow_python when
VOLT_PYTHON is set and libcurl was found (exit code 77, a skip, when that Python lacks mlflow), or by hand:

    python3 tests/python/check_mlflow.py --tool build/tests/volt_mlflow_tool --workdir /tmp/volt-mlflow
    python3 tests/python/check_mlflow.py ... --example build/examples/fashion_mnist   # and the example
"""
import argparse
import csv
import glob
import math
import http.server
import os
import re
import shutil
import socket
import subprocess
import sys

from volt_checks import expect
import threading
import time
import urllib.request

try:
    import mlflow
    from mlflow.tracking import MlflowClient
    import yaml
except ImportError as error:
    print(f"SKIP: mlflow is not installed ({error}; tools/install-python.sh installs it)")
    sys.exit(77)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args):
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)} exited {result.returncode}: {result.stderr.strip()}")
    return result


class Always500(http.server.BaseHTTPRequestHandler):
    def _answer(self):
        self.send_response(500)
        self.end_headers()
        self.wfile.write(b'{"error_code": "INTERNAL_ERROR"}')

    do_GET = do_POST = do_PUT = _answer

    def log_message(self, *args):
        pass


def check_example(args, client, uri):
    """The fashion_mnist example with --mlflow-uri: two 50-step epochs, each validated, then the test set."""
    root = os.path.join(args.workdir, "example")
    result = subprocess.run(
        [args.example, "--accelerator", "cpu", "--max-steps", "100", "--limit-train-batches", "50",
         "--limit-val-batches", "3", "--no-progress-bar", "--default-root-dir", root,
         "--mlflow-uri", uri, "--mlflow-experiment", "volt-example"],
        capture_output=True, text=True, timeout=240)
    if result.returncode != 0:
        sys.exit(f"FAIL: the example exited {result.returncode}: {result.stdout[-2000:]} {result.stderr[-2000:]}")
    printed = re.search(r"mlflow: run ([0-9a-f]+) in experiment 'volt-example' at " + re.escape(uri), result.stdout)
    expect(printed is not None, "the example prints its MLflow run")
    got = client.get_run(printed.group(1))
    expect(client.get_experiment(got.info.experiment_id).name == "volt-example", "experiment volt-example")
    expect(got.info.status == "FINISHED", f"the example's run is FINISHED ({got.info.status})")
    warned = [line for line in result.stderr.splitlines() if "MLFlowLogger" in line]
    expect(not warned, f"no MLflow warning {warned}")
    hparams = yaml.safe_load(open(glob.glob(os.path.join(root, "lightning_logs", "version_*", "hparams.yaml"))[0]))
    expect(got.data.params == {k: str(v) for k, v in hparams.items()} and "batch_size" in hparams,
           f"the run's params are the hparams.yaml of the CSVLogger: {got.data.params}")

    # Every value the CSVLogger wrote, at the same step, is in the run's metric histories, and nothing else.
    (metrics_csv,) = glob.glob(os.path.join(root, "lightning_logs", "version_*", "metrics.csv"))
    expected = {}
    with open(metrics_csv) as f:
        for row in csv.DictReader(f):
            for key, value in row.items():
                if key != "step" and value != "":
                    expected.setdefault(key, []).append((int(row["step"]), float(value)))
    expect({"train_loss", "val_loss", "val_acc", "test_acc", "epoch"} <= set(expected),
           f"the CSV has train_loss, val_loss, val_acc, test_acc and epoch ({sorted(expected)})")
    expect(set(got.data.metrics) == set(expected), f"the run's metrics are the CSV's: {sorted(got.data.metrics)}")
    for key, values in expected.items():
        history = sorted((m.step, m.value) for m in client.get_metric_history(got.info.run_id, key))
        same = len(history) == len(values) and all(
            s == t and math.isclose(v, w, rel_tol=1e-5, abs_tol=1e-7) for (s, v), (t, w) in zip(history, sorted(values)))
        if not same:
            sys.exit(f"FAIL: metric {key}: MLflow has {history}, the CSV {sorted(values)}")
    expect(len(expected["train_loss"]) == 2, f"train_loss every 50 steps: {expected['train_loss']}")
    test_acc = float(re.search(r"test accuracy: ([0-9.]+)", result.stdout).group(1))
    expect(abs(got.data.metrics["test_acc"] - test_acc) < 6e-5, f"test_acc {got.data.metrics['test_acc']:.4f} is the "
           f"printed {test_acc}")

    # The checkpoint ModelCheckpoint kept (the best val_acc), uploaded when fit ended, byte for byte.
    best = re.search(r"best checkpoint: (\S+) \(val_acc", result.stdout).group(1)
    stem = os.path.splitext(os.path.basename(best))[0]
    names = sorted(a.path for a in client.list_artifacts(got.info.run_id, stem))
    expect(names == [f"{stem}/aliases.txt", f"{stem}/{stem}.ckpt", f"{stem}/metadata.yaml"],
           f"the best checkpoint's artifacts: {names}")
    local = client.download_artifacts(got.info.run_id, f"{stem}/{stem}.ckpt", os.path.join(root, "download"))
    expect(open(local, "rb").read() == open(best, "rb").read(), f"the uploaded {stem}.ckpt is the local file")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--example", help="the fashion_mnist example, run with --mlflow-uri")
    args = parser.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    log = open(os.path.join(args.workdir, "server.log"), "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", "sqlite:///" + os.path.join(args.workdir, "mlflow.db"),
         "--artifacts-destination", os.path.join(args.workdir, "artifacts"), "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, cwd=args.workdir)
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(uri + "/health", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    sys.exit("FAIL: mlflow server did not start; see " + log.name)
                time.sleep(0.5)
        print("mlflow", mlflow.__version__, "server at", uri)

        # 1. A run, read back by MLflow's client.
        artifact = os.path.join(args.workdir, "best.ckpt")
        with open(artifact, "wb") as f:
            f.write(bytes(range(256)) * 4)
        run_id = run(args.tool, "run", uri, artifact).stdout.strip()
        client = MlflowClient(tracking_uri=uri)
        got = client.get_run(run_id)
        experiment = client.get_experiment(got.info.experiment_id)
        expect(experiment.name == "volt-check", f"experiment volt-check (id {experiment.experiment_id})")
        expect(got.info.run_name == "first" and got.data.tags.get("mlflow.runName") == "first", "run name 'first'")
        expect(got.data.tags.get("team") == "ml", "tag team = ml")
        expect(got.data.params == {"lr": "0.001", "optimizer": "adam"}, f"params {got.data.params}")
        history = client.get_metric_history(run_id, "loss")
        expect(sorted((m.step, m.value) for m in history) == [(s, 1.0 / (s + 1)) for s in range(5)],
               "metric loss = 1 / (step + 1) at steps 0..4")
        expect([(m.step, m.value) for m in client.get_metric_history(run_id, "val_acc")] == [(4, 0.5)],
               "metric val_acc = 0.5 at step 4")
        expect(got.info.status == "FINISHED" and got.info.end_time is not None, "status FINISHED with an end time")
        names = [a.path for a in client.list_artifacts(run_id, "checkpoints")]
        expect(names == ["checkpoints/best.ckpt"], f"artifacts {names}")
        local = client.download_artifacts(run_id, "checkpoints/best.ckpt", os.path.join(args.workdir, "download"))
        expect(open(local, "rb").read() == open(artifact, "rb").read(), "the artifact's bytes")

        # 2. log_model: Lightning's layout, <stem>/<file>, metadata.yaml and aliases.txt beside it.
        def uploaded(how):
            folder = os.path.join(args.workdir, "checkpoints-" + how)
            run_id = run(args.tool, "log_model", how, uri, folder).stdout.strip()
            found = {}
            for top in client.list_artifacts(run_id):
                for entry in client.list_artifacts(run_id, top.path):
                    path = client.download_artifacts(run_id, entry.path, os.path.join(args.workdir, "dl-" + how))
                    found[entry.path] = open(path, "rb").read().decode()
            return found

        at_end = uploaded("on")
        expect(sorted(at_end) == ["epoch=1-step=4/aliases.txt", "epoch=1-step=4/epoch=1-step=4.ckpt",
                                  "epoch=1-step=4/metadata.yaml", "last/aliases.txt", "last/last.ckpt",
                                  "last/metadata.yaml"], f"log_model=True uploads the kept checkpoints: {sorted(at_end)}")
        expect(at_end["last/last.ckpt"] == "last after epoch 1", "log_model=True uploads last.ckpt as it ended")
        expect(at_end["epoch=1-step=4/aliases.txt"] == "['latest', 'best']" and
               at_end["last/aliases.txt"] == "['latest']", "aliases")
        metadata = yaml.safe_load(at_end["epoch=1-step=4/metadata.yaml"])
        expect(metadata == {"Checkpoint": {"_every_n_train_steps": 0, "mode": "max", "monitor": "val_acc",
                                           "save_last": True, "save_top_k": 1, "save_weights_only": False},
                            "original_filename": "epoch=1-step=4.ckpt", "score": 0.75}, f"metadata.yaml {metadata}")
        every = uploaded("all")
        expect(sorted({p.split("/")[0] for p in every}) == ["epoch=0-step=2", "epoch=1-step=4", "last"],
               f"log_model='all' uploads each save: {sorted(every)}")
        expect(every["last/last.ckpt"] == "last after epoch 1", "log_model='all' uploads a rewritten last.ckpt again")

        if args.example:
            check_example(args, client, uri)
    finally:
        server.terminate()
        server.wait(timeout=30)

    # 3. Failures never stop the program: nothing listening, then a server answering 500 to everything.
    started = time.time()
    result = run(args.tool, "unreachable", f"http://127.0.0.1:{free_port()}")
    warnings, pending = map(int, result.stdout.split())
    expect(warnings == 2 and pending == 6, f"server down: one warning, one 'lost' at the end ({warnings}), "
           f"6 requests queued ({pending}) in {time.time() - started:.1f} s")
    expect("could not be sent and are lost" in result.stderr, "the loss is reported")
    broken = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Always500)
    threading.Thread(target=broken.serve_forever, daemon=True).start()
    result = run(args.tool, "unreachable", f"http://127.0.0.1:{broken.server_address[1]}")
    warnings, pending = map(int, result.stdout.split())
    expect(warnings == 2 and "HTTP 500" in result.stderr, f"HTTP 500: warned once plus the loss ({warnings})")
    broken.shutdown()
    print("check_mlflow: all checks passed")


if __name__ == "__main__":
    main()
