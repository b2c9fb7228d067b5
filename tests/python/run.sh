#!/bin/sh
# Runs a test of the Python package hoccl with the venv's Python (HOCCL_VENV, when set, replaces VENV), from the
# source tree: PYTHONPATH and HOCCL_BUILD_DIR come from meson (tests/python/meson.build). With NP > 0 the script runs
# as NP ranks under hoccl-run; with NP = 0 it runs once (it starts its own ranks).
# Usage: run.sh VENV HOCCL_RUN NP SCRIPT [ARGS...]
# Skips (exit 77) when the venv or numpy is missing: tools/install-deps creates the venv (it needs PyPI).
set -eu
venv=${HOCCL_VENV:-$1}
hoccl_run=$2
np=$3
script=$4
shift 4
python="$venv/bin/python"
if [ ! -x "$python" ]; then
  echo "skip: no Python venv at $venv; tools/install-deps creates it (numpy from PyPI)"
  exit 77
fi
if ! "$python" -c "import numpy" 2>/dev/null; then
  echo "skip: numpy is not installed in $venv; tools/install-deps installs it"
  exit 77
fi
if [ "$np" -gt 0 ]; then
  exec "$hoccl_run" -n "$np" --prefix --timeout 240 -- "$python" "$script" "$@"
fi
exec "$python" "$script" "$@"
