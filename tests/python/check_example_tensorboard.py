"""Runs examples/fashion_mnist with --tensorboard for two short epochs and reads its event files back with
TensorBoard's own EventAccumulator: the validation image grids (the first batch once, the misclassified images
after each validation), the histograms of the parameters and gradients, the scalars and the hparams plugin.

Exits 77 (a skip for ctest) when tensorboard is not installed or Fashion-MNIST is missing, non-zero with a
message on a mismatch."""

import argparse
import glob
import os
import shutil
import subprocess
import sys


def fail(message):
    print("check_example_tensorboard: " + message, file=sys.stderr)
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--example", required=True, help="the fashion_mnist binary")
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        print("skip: this Python has no tensorboard")
        sys.exit(77)

    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    run = subprocess.run([args.example, "--accelerator", "cpu", "--max-epochs", "2", "--limit-train-batches", "30",
                          "--limit-val-batches", "3", "--no-progress-bar", "--tensorboard",
                          "--default-root-dir", args.workdir], capture_output=True, text=True)
    if run.returncode != 0:
        if "Fashion-MNIST" in run.stderr and "not found" in run.stderr:
            print("skip: " + run.stderr.strip())
            sys.exit(77)
        fail("the example exited with %d:\n%s%s" % (run.returncode, run.stdout, run.stderr))

    files = sorted(glob.glob(os.path.join(args.workdir, "tensorboard", "version_0", "events.out.tfevents.*")))
    if not files:
        fail("no event file under %s/tensorboard/version_0" % args.workdir)
    images, histograms, scalars, plugins = {}, {}, set(), set()
    for path in files:
        events = EventAccumulator(path, size_guidance={"images": 0, "histograms": 0, "scalars": 0})
        events.Reload()
        tags = events.Tags()
        for tag in tags["images"]:
            images.setdefault(tag, []).extend((e.step, e.width, e.height) for e in events.Images(tag))
        for tag in tags["histograms"]:
            histograms.setdefault(tag, []).extend(e.step for e in events.Histograms(tag))
        scalars.update(tags["scalars"])
        try:
            plugins.update(events.PluginTagToContent("hparams").keys())
        except KeyError:  # no hparams summary in this file
            pass

    # 30 steps per epoch: the validations end at global steps 30 and 60.
    if images.get("val/images") != [(30, 16 * 30 + 2, 8 * 30 + 2)]:
        fail("val/images: expected one 16 x 8 grid of 28 x 28 images (482 x 242) at step 30, got %r" %
             images.get("val/images"))
    steps = [step for step, _, _ in images.get("val/misclassified", [])]
    if steps != [30, 60]:
        fail("val/misclassified: expected grids at steps 30 and 60, got %r" % images.get("val/misclassified"))
    for name in ("parameters/net.1.weight", "gradients/net.1.weight"):
        if histograms.get(name) != [0]:
            fail("%s: expected one histogram at step 0 (every 100 steps), got %r (tags: %s)" %
                 (name, histograms.get(name), sorted(histograms)))
    for name in ("train_loss", "val_acc", "val_loss", "test_acc"):
        if name not in scalars:
            fail("scalar %s missing; scalars: %s" % (name, sorted(scalars)))
    if not plugins:
        fail("no hparams summary")
    print("example tensorboard: images %s, %d histogram tags, scalars %s, hparams %s" %
          ({k: [s for s, _, _ in v] for k, v in images.items()}, len(histograms), sorted(scalars), sorted(plugins)))


if __name__ == "__main__":
    main()
