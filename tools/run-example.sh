#!/usr/bin/env bash
# Builds and runs the Fashion-MNIST example on the accelerator volt picks (MPS, then CUDA, then CPU).
# Installs missing Debian packages first. Extra arguments go to the example (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
dir=${BUILD_DIR:-build/example}
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVOLT_BUILD_TESTS=OFF >/dev/null
cmake --build "$dir" --target fashion_mnist
"$dir/examples/fashion_mnist" "$@"
