#!/usr/bin/env bash
# HOCCL_NET=ucx where UCX cannot be loaded (issue 12: libhoccl loads UCX through the plugin libhoccl-ucx.so at run
# time, transports/ucx/ucx_api.h). Two ranks on this host, shared memory off, so that UCX would carry the pair:
#   1. control: the plugin loads; the all-reduce runs and checks its results;
#   2. HOCCL_UCX_PLUGIN names a path with no plugin: dlopen fails;
#   3. the plugin is there, but the libucp.so.0 it needs is not a library (an LD_LIBRARY_PATH entry shadows UCX's):
#      dlopen fails inside the plugin's dependencies, as on a host without UCX installed.
# In 2 and 3 both ranks must fail init within seconds (no hang), exit non-zero, and say which transport could not be
# loaded, from where, and what to install.
# Usage: ucx_unloadable.sh HOCCL_RUN ALL_REDUCE_PERF
set -u
run=$1
perf=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }

allreduce() {  # ENV... : runs a 2-rank all-reduce over UCX; its output in $tmp/out, exit status returned
  timeout 120 env "$@" "$run" -n 2 --timeout 60 --env HOCCL_NET=ucx --env HOCCL_SHM_DISABLE=1 --env UCX_TLS=tcp \
    -- "$perf" -b 64K -e 64K -n 2 -w 1 -c 1 >"$tmp/out" 2>&1
}

expect_refusal() {  # CASE WANTED-TEXT... : the last run failed, in time, with every wanted text in its output
  local case=$1 rc=$2
  shift 2
  if [ "$rc" = 0 ]; then fail "$case: the run succeeded"; return; fi
  if [ "$rc" = 124 ]; then fail "$case: the run hung (timeout)"; return; fi
  for want in "$@"; do
    grep -qF -- "$want" "$tmp/out" || fail "$case: the output lacks '$want'"
  done
  echo "$case: refused (exit $rc): $(grep -m1 -F 'cannot be loaded' "$tmp/out")"
}

allreduce
rc=$?
if [ $rc != 0 ]; then cat "$tmp/out"; fail "control: the all-reduce over UCX failed (exit $rc)"; fi
grep -q 'Out of bounds values : 0 OK' "$tmp/out" || { cat "$tmp/out"; fail "control: no checked result"; }
[ $status = 0 ] && echo "control: the all-reduce over UCX passed"

allreduce HOCCL_UCX_PLUGIN="$tmp/nowhere/libhoccl-ucx.so"
expect_refusal "plugin missing" $? "HOCCL_NET=ucx" "$tmp/nowhere/libhoccl-ucx.so" "cannot be loaded" "libucx0"

mkdir "$tmp/lib"
echo "not a library" >"$tmp/lib/libucp.so.0"
allreduce LD_LIBRARY_PATH="$tmp/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
expect_refusal "libucp unloadable" $? "HOCCL_NET=ucx" "libhoccl-ucx.so" "libucp.so.0" "cannot be loaded" "libucx0"

[ $status != 0 ] && { echo "--- last output:"; cat "$tmp/out"; }
exit $status
