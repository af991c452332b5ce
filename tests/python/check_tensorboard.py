#!/usr/bin/env python3
"""A volt TensorBoard event file read back by Python's tensorboard package (EventAccumulator).

Needs the helper program tests/loggers/interop/tensorboard_tool.cpp (CMake target volt_tensorboard_tool).
Run by ctest as volt.loggers.tensorboard_python when VOLT_PYTHON is set, or by hand (e.g. on the GPU machine):

    python3 tests/python/check_tensorboard.py --tool build/tests/volt_tensorboard_tool --workdir /tmp/volt-tb

Exits 77 (a skip for ctest) when tensorboard is not installed, non-zero with a message on a mismatch.
"""
import argparse
import math
import os
import shutil
import subprocess
import sys

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2
except ImportError as error:
    print(f"SKIP: tensorboard is not installed ({error})")
    sys.exit(77)


def expect(condition, message):
    if not condition:
        sys.exit("FAIL: " + message)
    print("ok:", message)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    result = subprocess.run([args.tool, args.workdir], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAIL: {args.tool} exited {result.returncode}: {result.stderr.strip()}")
    event_file = result.stdout.strip()
    log_dir = os.path.join(args.workdir, "lightning_logs", "version_0")
    expect(os.path.dirname(event_file) == log_dir, f"event file in Lightning's layout: {event_file}")
    name = os.path.basename(event_file).split(".")
    expect(name[:3] == ["events", "out", "tfevents"] and len(name[3]) == 10 and name[-1].isdigit()
           and name[-2] == str(int(name[-2])), "file name events.out.tfevents.<time>.<host>.<pid>.<n>")

    accumulator = EventAccumulator(log_dir, size_guidance={"scalars": 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    expect(set(tags["scalars"]) == {"hp_metric", "train_loss", "val_acc"}, f"scalar tags {tags['scalars']}")
    loss = accumulator.Scalars("train_loss")
    expect([event.step for event in loss] == list(range(10)), "train_loss steps 0..9")
    expect(all(math.isclose(event.value, 1.0 / (event.step + 1), rel_tol=1e-6) for event in loss),
           "train_loss values 1/(step+1) (float32)")
    acc = accumulator.Scalars("val_acc")
    expect([event.step for event in acc] == [0, 2, 4, 6, 8], "val_acc on even steps")
    expect(all(math.isclose(event.value, event.step / 10.0, rel_tol=1e-6, abs_tol=1e-7) for event in acc),
           "val_acc values step/10")
    hp = accumulator.Scalars("hp_metric")
    expect(len(hp) == 1 and hp[0].step == 0 and hp[0].value == -1.0, "hp_metric = -1 at step 0")

    content = accumulator.PluginTagToContent("hparams")
    expect("_hparams_/session_start_info" in content, f"hparams plugin tags {list(content)}")
    data = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    expect(data.WhichOneof("data") == "session_start_info", "HParamsPluginData holds session_start_info")
    hparams = data.session_start_info.hparams
    expect(math.isclose(hparams["lr"].number_value, 0.001), "hparam lr = 0.001 (number)")
    expect(hparams["layers"].number_value == 3, "hparam layers = 3 (number)")
    expect(hparams["optimizer"].string_value == "adam", "hparam optimizer = 'adam' (string)")
    expect(hparams["shuffle"].bool_value is True, "hparam shuffle = true (bool)")
    expect(os.path.exists(os.path.join(log_dir, "hparams.yaml")), "hparams.yaml beside the event file")
    print("check_tensorboard: all checks passed")


if __name__ == "__main__":
    main()
