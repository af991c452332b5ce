#!/usr/bin/env bash
# Installs the Debian packages volt's build, tests and examples need, if any is missing.
# Runs apt-get as root (directly, or through sudo when available).
set -euo pipefail

#   tools/install-deps.sh            what building and running volt's examples needs
#   tools/install-deps.sh --tests    also what the test suite needs: doxygen (the API reference,
#                                    tools/build-docs.sh) and clang 19 with libFuzzer's runtime (the fuzz targets
#                                    that compile C++20 with LibTorch's headers, which Debian's clang 14 cannot),
#                                    libcurl's headers (the optional volt/loggers/mlflow_logger.hpp and its test),
#                                    yaml-cpp (the optional volt/cli/config_file.hpp and its test)
packages=(libtorch-dev doctest-dev libgloo-dev libopenblas0-pthread dataset-fashion-mnist
          cmake ninja-build g++ python3 gzip)
if [ "${1:-}" = "--tests" ]; then
  packages+=(doxygen clang-19 libclang-rt-19-dev libcurl4-openssl-dev libyaml-cpp-dev)
elif [ $# -gt 0 ]; then
  echo "install-deps: unknown argument '$1' (allowed: --tests)" >&2
  exit 2
fi
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
