#!/bin/sh
# Runs a Python client test of hoccl's libnccl.so.2 with the venv's Python and the shim preloaded.
# Usage: run_client.sh VENV SHIM SCRIPT [ARGS...] (HOCCL_VENV, when set, replaces VENV). Skips (exit 77) when the venv does not exist: tools/install-deps
# creates it (it needs PyPI); the script itself skips when its package is missing from the venv.
set -eu
venv=${HOCCL_VENV:-$1}
shim=$2
script=$3
shift 3
if [ ! -x "$venv/bin/python" ]; then
  echo "skip: no Python venv at $venv; tools/install-deps creates it (numpy, cupy-cuda13x, nccl4py from PyPI)"
  exit 77
fi
LD_PRELOAD="$shim" HOCCL_SHIM_PATH="$shim" exec "$venv/bin/python" "$script" "$@"
