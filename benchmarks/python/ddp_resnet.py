"""PyTorch's own DistributedDataParallel on the model and setting of bench_ddp_scaling, for comparison.

    torchrun --standalone --nproc_per_node N benchmarks/python/ddp_resnet.py [--steps 100] [--warmup 20] [--batch 256]

ResNet-18 with a CIFAR stem (the layout of benchmarks/cpp/resnet.hpp), bf16 autocast, SGD(0.1, momentum 0.9,
weight_decay 5e-4), 256 random images per GPU already on the GPU, cudnn.benchmark on. Rank 0 prints
"pytorch devices=N images_per_s=X step_ms=Y".
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


class ResNet18(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        blocks, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.layers(y)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = ResNet18().to(device)
    if world > 1:
        dist.init_process_group("nccl", device_id=device)
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    torch.manual_seed(1 + local_rank)
    batches = [(torch.randn(args.batch, 3, 32, 32, device=device), torch.randint(0, 10, (args.batch,), device=device))
               for _ in range(16)]
    model.train()
    start = None
    for step in range(args.warmup + args.steps):
        x, y = batches[step % len(batches)]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step + 1 == args.warmup:
            torch.cuda.synchronize()
            start = time.perf_counter()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    if local_rank == 0 and int(os.environ.get("RANK", 0)) == 0:
        images = args.steps * args.batch * world
        print(f"pytorch devices={world} images_per_s={images / seconds:.1f} step_ms={1000 * seconds / args.steps:.2f}",
              flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
