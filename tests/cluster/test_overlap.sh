#!/bin/bash
# The overlapped all-gather and reduce-scatter over real transports between emulated hosts (shm inside a host, tcp
# between): tools/bench/overlap on every rank compares hocclAllGatherOverlap / hocclReduceScatterOverlap (and the
# ring shift) against hocclAllGather / hocclReduceScatter / hocclAllReduce on integer-valued data and prints
# "identical" or "DIFFER" per experiment. Shapes with two levels (2 hosts x 2 ranks; 2 switches x 1 host x 3 ranks),
# each with the two-level schedule and with the flat ring (HOCCL_OVERLAP_TWO_LEVEL=1/0).
# Usage: test_overlap.sh CLUSTER_RUN OVERLAP_BENCH. Exit 77 (skip) when the cluster cannot be built.
set -u
RUN=$1 BENCH=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0 failed=0
for shape in "1 2 2 32" "2 1 3 48"; do
  read -r s h g n <<<"$shape"
  for two in 1 0; do
    label="${s}x${h}x${g} HOCCL_OVERLAP_TWO_LEVEL=$two"
    "$RUN" --timeout 120 -s "$s" -H "$h" -g "$g" --env HOCCL_OVERLAP_TWO_LEVEL=$two -- \
      "$BENCH" --m 16 --k 32 --n "$n" --iters 1 >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ "$rc" = 77 ]; then cat "$TMP/err"; echo "SKIP: the emulated cluster cannot be built here"; exit 77; fi
    same=$(grep -c "results identical" "$TMP/out")
    if [ "$rc" = 0 ] && [ "$same" = 4 ] && ! grep -q DIFFER "$TMP/out"; then
      echo "ok: $label"; passed=$((passed + 1))
    else
      echo "FAIL: $label (exit $rc, $same of 4 experiments identical)"; cat "$TMP/out" "$TMP/err"
      failed=$((failed + 1))
    fi
  done
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
