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
import struct
import subprocess
import sys

from volt_checks import expect
import zlib

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2
except ImportError as error:
    print(f"SKIP: tensorboard is not installed ({error})")
    sys.exit(77)


def decode_png(data):
    """(width, height, channels, rows of bytes) of a PNG without interlacing whose rows use filter None."""
    expect(data[:8] == b"\x89PNG\r\n\x1a\n", "PNG signature")
    at, chunks = 8, {}
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        expect(zlib.crc32(kind + body) == crc, f"PNG chunk {kind.decode()} CRC-32")
        chunks[kind] = chunks.get(kind, b"") + body
        at += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    channels = {0: 1, 2: 3, 6: 4}[color]
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = width * channels + 1
    expect(depth == 8 and len(raw) == height * stride and all(raw[y * stride] == 0 for y in range(height)),
           "PNG pixels: 8 bits, one row after another with filter None")
    return width, height, channels, [raw[y * stride + 1:(y + 1) * stride] for y in range(height)]


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

    accumulator = EventAccumulator(log_dir, size_guidance={"scalars": 0, "images": 0, "histograms": 0, "tensors": 0})
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
    # The HPARAMS tab: the experiment names the hyperparameters and the metric columns, the session ended.
    expect({"_hparams_/experiment", "_hparams_/session_end_info"} <= set(content), "experiment and session_end_info")
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    expect(sorted(info.name for info in experiment.hparam_infos) == ["layers", "lr", "optimizer", "shuffle"],
           "experiment hparam_infos")
    types = {info.name: info.type for info in experiment.hparam_infos}
    expect(types == {"layers": 3, "lr": 3, "optimizer": 1, "shuffle": 2}, f"hparam types (float64, string, bool): {types}")
    expect([info.name.tag for info in experiment.metric_infos] == ["hp_metric"], "experiment metric_infos: hp_metric")
    end = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_end_info"]).session_end_info
    expect(end.status == 1, "session_end_info status STATUS_SUCCESS")

    # Images: the PNG TensorBoard serves holds the logged pixels.
    expect(set(tags["images"]) == {"sample", "batch"}, f"image tags {tags['images']}")
    (sample,) = accumulator.Images("sample")
    width, height, channels, rows = decode_png(sample.encoded_image_string)
    expect((sample.step, sample.width, sample.height, width, height, channels) == (2, 5, 4, 5, 4, 3),
           "image 'sample' at step 2, 5 x 4 RGB")
    expect(all(rows[y][x * 3 + c] == 20 * c + 5 * y + x for y in range(4) for x in range(5) for c in range(3)),
           "image 'sample' pixels 20 c + 5 y + x")
    (batch,) = accumulator.Images("batch")
    width, height, channels, rows = decode_png(batch.encoded_image_string)
    expect((batch.step, width, height, channels) == (4, 7, 7, 3), "grid 'batch' at step 4: 2 x 2 cells of 2 x 2, padding 1")
    for k, (gy, gx) in enumerate([(0, 0), (0, 1), (1, 0)]):
        for y in range(2):
            for x in range(2):
                expected = int((k / 4 + 0.1 * (2 * y + x)) * 255)
                pixel = rows[1 + gy * 3 + y][(1 + gx * 3 + x) * 3:(2 + gx * 3 + x) * 3]
                expect(abs(pixel[0] - expected) <= 1 and pixel[0] == pixel[1] == pixel[2],
                       f"grid cell {k} pixel ({y}, {x}) = {pixel[0]} (gray {expected})")
    expect(rows[0] == bytes(21) and rows[4][(1 + 3 + 0) * 3] == 0, "grid padding and the empty fourth cell are 0")

    # Histograms.
    (histogram,) = accumulator.Histograms("weights")
    h = histogram.histogram_value
    expect(histogram.step == 3 and h.min == 0.0 and math.isclose(h.max, 9.9) and h.num == 100,
           "histogram 'weights' at step 3: min 0, max 9.9, 100 values")
    expect(math.isclose(h.sum, 495.0) and math.isclose(h.sum_squares, sum((i / 10) ** 2 for i in range(100))),
           "histogram sum and sum of squares")
    expect(len(h.bucket) == 10 and sum(h.bucket) == 100 and math.isclose(h.bucket_limit[-1], 9.9),
           f"histogram 10 buckets holding 100 values: {list(h.bucket)}")

    # Text.
    (text,) = accumulator.Tensors("notes/text_summary")
    expect(text.step == 1 and text.tensor_proto.string_val[0].decode() == "**bold** and plain", "text 'notes' at step 1")
    expect("notes/text_summary" in accumulator.PluginTagToContent("text"), "text plugin metadata")
    print("check_tensorboard: all checks passed")


if __name__ == "__main__":
    main()
