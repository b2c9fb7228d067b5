#!/bin/bash
# The bandwidth probe (HOCCL_TOPO_PROBE=1) inside the emulated cluster (tools/cluster/run): hoccl-topo runs online on
# every rank with no switch id (HOCCL_SWITCH_ID emptied, no topology file, no Slurm address), and the switches the
# probe finds must be the ones built. Host NICs are shaped at 1gbit so that the measurements do not depend on how
# busy the CPU is; the spine is shaped slower.
#   2x2x1, spine 200mbit      -> 2 switches, hosts s0h* under one, s1h* under the other
#   2x2x2, spine 200mbit      -> the same, with a second rank per host that only waits for the leaders
#   1x3x1                      -> 1 switch (equal links must not be split)
#   2x2x1 with switch ids set  -> the probe is skipped, the ids win (sw0, sw1)
# Usage: test_topo_probe.sh CLUSTER_RUN HOCCL_TOPO. Exit 77 (skip) when the cluster cannot be built.
set -u
RUN=$1 TOPO=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0 failed=0
NOSWITCH=(--env HOCCL_SWITCH_ID= --env SLURM_TOPOLOGY_ADDR= --env HOCCL_TOPO_FILE=)
check() {  # check LABEL S H G WANT_PROBE EXPECTED(JSON: switch name -> host suffixes) [run options...]
  local label=$1 s=$2 h=$3 g=$4 probe=$5 want=$6; shift 6
  local rc t0=$SECONDS
  rm -f "$TMP"/log.*
  "$RUN" --timeout 90 --name probetest -s "$s" -H "$h" -g "$g" --host-rate 1gbit --env HOCCL_TOPO_PROBE=1 \
    --env HOCCL_DEBUG=INFO --env HOCCL_DEBUG_SUBSYS=TOPO --env "HOCCL_DEBUG_FILE=$TMP/log.%p" "$@" \
    -- "$TOPO" --json >"$TMP/out.json" 2>"$TMP/err"
  rc=$?
  if [ "$rc" = 77 ]; then cat "$TMP/err"; echo "SKIP: the emulated cluster cannot be built here"; exit 77; fi
  cat "$TMP"/log.* >"$TMP/log" 2>/dev/null
  if [ "$rc" = 0 ] && python3 - "$TMP/out.json" "$TMP/log" "$probe" "$want" "$s" "$h" "$g" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
probe = sys.argv[3] == "1"
want = json.loads(sys.argv[4])
s, h, g = map(int, sys.argv[5:])
assert j["nranks"] == s * h * g and j["nhosts"] == s * h, (j["nranks"], j["nhosts"])
got = {sw["name"]: sorted(x["name"].removeprefix("probetest-") for x in sw["hosts"]) for sw in j["switches"]}
assert got == {k: sorted(v) for k, v in want.items()}, ("switches", got, "expected", want)
assert j["nswitches"] == len(want), j["nswitches"]
# The probe logs its matrix and verdict once (rank 0), and only when it ran.
assert log.count("bandwidth probe found") == (1 if probe else 0), log
if probe:
    assert f"bandwidth probe found {len(want)} switch(es)" in log, log
PY
  then passed=$((passed + 1)); echo "ok   $label ($((SECONDS - t0)) s)"
  else failed=$((failed + 1)); echo "FAIL $label (exit $rc)"; cat "$TMP/err" "$TMP/out.json" | tail -n 40
  fi
  # Show what was measured (INFO lines of the probe and the matrix under them).
  grep -A6 "bandwidth probe of" "$TMP/log" 2>/dev/null | sed 's/^/     /'
}
check "2x2x1 spine 200mbit, probe" 2 2 1 1 '{"probe0": ["s0h0", "s0h1"], "probe1": ["s1h0", "s1h1"]}' \
  --rate 200mbit "${NOSWITCH[@]}"
check "2x2x2 spine 200mbit, probe (leaders measure, the others wait)" 2 2 2 1 \
  '{"probe0": ["s0h0", "s0h1"], "probe1": ["s1h0", "s1h1"]}' --rate 200mbit "${NOSWITCH[@]}"
check "1x3x1, probe (one switch)" 1 3 1 1 '{"probe0": ["s0h0", "s0h1", "s0h2"]}' "${NOSWITCH[@]}"
check "2x2x1 with HOCCL_SWITCH_ID set: no probe" 2 2 1 0 '{"sw0": ["s0h0", "s0h1"], "sw1": ["s1h0", "s1h1"]}' \
  --rate 200mbit
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
