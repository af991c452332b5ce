#!/usr/bin/env bash
# Prepares .gpu/ (ignored by git) with what tools/gpu-check.sh needs on a GPU machine that cannot install
# anything: a copy of Debian's doctest (headers and CMake package, made relocatable), gloo's headers (for DDP
# on CPUs) and the Fashion-MNIST archives. Run it here, then run tools/gpu-check.sh there with .gpu carried along.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
rm -rf .gpu/doctest .gpu/fashion-mnist .gpu/gloo
mkdir -p .gpu/doctest/include .gpu/doctest/lib/cmake .gpu/fashion-mnist .gpu/gloo/include
# gloo's headers: c10d's ProcessGroupGloo.hpp includes them and PyPI's torch wheel does not ship them.
cp -r /usr/include/gloo .gpu/gloo/include/
cp -r /usr/include/doctest .gpu/doctest/include/
cp -r /usr/lib/cmake/doctest .gpu/doctest/lib/cmake/
sed -i 's|set(_IMPORT_PREFIX "/usr")|get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)|' \
  .gpu/doctest/lib/cmake/doctest/doctestTargets.cmake
cp /usr/share/datasets/fashion-mnist/*.gz .gpu/fashion-mnist/
du -sh .gpu
