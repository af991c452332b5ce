#!/usr/bin/env bash
# Installs the Python that volt's second LibTorch and its reference tests come from: PyPI's torch (a CUDA
# build whose wheel holds a full LibTorch), Lightning, and the packages the interop tests read volt's files with
# (safetensors, tensorboard, mlflow), pinned, in a virtual environment.
# Idempotent: an environment that already holds the pinned versions is reused without touching the network.
#   tools/install-python.sh            creates or completes $VOLT_VENV, prints nothing else on success
# Environment: VOLT_VENV (default /opt/volt-venv), PIP_CACHE_DIR (default ~/.cache/pip; keep it between runs:
# the wheels are ~4.6 GB), PYTHON (the interpreter that creates the environment, default python3).
set -euo pipefail

venv=${VOLT_VENV:-/opt/volt-venv}
torch_version=2.11.0
lightning_version=2.6.6
safetensors_version=0.8.0
tensorboard_version=2.21.0
mlflow_version=3.17.2
export PIP_CACHE_DIR=${PIP_CACHE_DIR:-$HOME/.cache/pip}

installed() {  # prints the versions of torch, lightning, safetensors, tensorboard, mlflow (or nothing)
  [ -x "$venv/bin/python" ] || return 0
  "$venv/bin/python" - <<'EOF' 2>/dev/null || true
from importlib import metadata
def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "none"
print(version("torch").split("+")[0], version("lightning"), version("safetensors"), version("tensorboard"),
      version("mlflow"))
EOF
}

if [ "$(installed)" = "$torch_version $lightning_version $safetensors_version $tensorboard_version $mlflow_version" ]; then
  exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
  python=${PYTHON:-python3}
  echo "install-python: creating $venv with $($python -V 2>&1)"
  if ! "$python" -m venv "$venv" 2>/dev/null; then
    # Debian's python3 needs python3-venv for ensurepip.
    rm -rf "$venv"
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    "$python" -m venv "$venv"
  fi
fi

echo "install-python: installing torch==$torch_version lightning==$lightning_version" \
     "safetensors==$safetensors_version tensorboard==$tensorboard_version mlflow==$mlflow_version into $venv" \
     "(pip cache: $PIP_CACHE_DIR)"
start=$(date +%s)
"$venv/bin/python" -m pip install --quiet --progress-bar off \
  "torch==$torch_version" "lightning==$lightning_version" "safetensors==$safetensors_version" \
  "tensorboard==$tensorboard_version" "mlflow==$mlflow_version"
echo "install-python: done in $(( $(date +%s) - start )) s: $(installed)"
[ "$(installed)" = "$torch_version $lightning_version $safetensors_version $tensorboard_version $mlflow_version" ] || {
  echo "install-python: $venv holds '$(installed)'," \
       "expected '$torch_version $lightning_version $safetensors_version $tensorboard_version $mlflow_version'" >&2
  exit 1
}
