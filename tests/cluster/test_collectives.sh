#!/bin/bash
# Every collective on a 2x2x2 emulated cluster (tools/cluster/run), with the flat ring and with HO-Ring forced
# (HOCCL_ALGO; HO-Ring covers all-reduce, reduce-scatter and all-gather, the others fall back to their default),
# and with the tuner's default choice. Each perf tool checks its output against an independent double-precision
# reference (-c 1) on odd sizes, in- and out-of-place, and exits non-zero on any wrong value.
# With --net ucx (issue 12): every peer that shared memory does not reach goes over UCX (HOCCL_NET=ucx, UCX_TLS=tcp on
# the namespaces' NIC hve0), so the ring and HO-Ring cross hosts and switches through UCX.
# Usage: test_collectives.sh [--net ucx] CLUSTER_RUN coll=PATH...   Exit 77 (skip) when the cluster cannot be built.
set -u
NET_ENV=()
if [ "${1:-}" = "--net" ]; then
  [ "$2" = ucx ] || { echo "test_collectives.sh: --net knows only ucx" >&2; exit 2; }
  NET_ENV=(--env HOCCL_NET=ucx --env UCX_TLS=tcp --env UCX_NET_DEVICES=hve0)
  shift 2
fi
RUN=$1; shift
declare -A EXE
for kv in "$@"; do EXE[${kv%%=*}]=${kv#*=}; done
SIZES=(-b 1000 -e 400000 -f 20 -n 1 -w 0 -c 1 -T 200)
passed=0 failed=0
run() {  # run LABEL ALGO TOOL [extra perf args]
  local label=$1 algo=$2 tool=$3; shift 3
  local out rc
  out=$("$RUN" --timeout 240 --rate 1gbit ${algo:+--env HOCCL_ALGO=$algo} "${NET_ENV[@]}" -- "${EXE[$tool]}" \
    "${SIZES[@]}" "$@" 2>&1)
  rc=$?
  if [ "$rc" = 77 ]; then echo "$out"; echo "SKIP: the emulated cluster cannot be built here"; exit 77; fi
  if [ "$rc" = 0 ] && grep -q "Out of bounds values : 0 OK" <<<"$out"; then
    passed=$((passed + 1)); echo "ok   $label"
  else
    failed=$((failed + 1)); echo "FAIL $label (exit $rc)"; echo "$out" | tail -n 40
  fi
}
for tool in all_reduce reduce_scatter all_gather broadcast reduce alltoall gather scatter sendrecv; do
  [ -n "${EXE[$tool]:-}" ] || { echo "FAIL $tool: no executable given"; failed=$((failed + 1)); continue; }
  run "$tool ring" ring "$tool"
done
for tool in all_reduce reduce_scatter all_gather; do
  run "$tool ho_ring" ho_ring "$tool"
  run "$tool ho_ring max/int32" ho_ring "$tool" -d int32 -o max
  run "$tool default" "" "$tool"
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
