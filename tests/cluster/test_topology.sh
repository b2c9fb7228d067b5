#!/bin/bash
# The topology detected inside the emulated cluster matches the shape built: hoccl-topo runs online on every rank
# (rank 0 prints JSON). Shapes: 2x2x2, 1x3x1, 3x1x2; then HOCCL_TOPO_FILE overrides the switches (all hosts under
# one switch) and the detected topology follows the file.
# Usage: test_topology.sh CLUSTER_RUN HOCCL_TOPO. Exit 77 (skip) when the cluster cannot be built.
set -u
RUN=$1 TOPO=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0 failed=0
check() {  # check LABEL S H G EXPECTED_SWITCHES [run options...]
  local label=$1 s=$2 h=$3 g=$4 sw=$5; shift 5
  local rc
  "$RUN" --timeout 120 -s "$s" -H "$h" -g "$g" "$@" -- "$TOPO" --json >"$TMP/out.json" 2>"$TMP/err"
  rc=$?
  if [ "$rc" = 77 ]; then cat "$TMP/err"; echo "SKIP: the emulated cluster cannot be built here"; exit 77; fi
  if [ "$rc" = 0 ] && python3 - "$TMP/out.json" "$s" "$h" "$g" "$sw" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
s, h, g, sw = map(int, sys.argv[2:])
assert j["nranks"] == s * h * g, j["nranks"]
assert j["nhosts"] == s * h, j["nhosts"]
assert j["nswitches"] == sw, j["nswitches"]
for sw_ in j["switches"]:
    for host in sw_["hosts"]:
        assert len(host["ranks"]) == g, host
        # ranks are numbered host by host, switch by switch by the cluster script
        assert host["ranks"] == list(range(host["ranks"][0], host["ranks"][0] + g)), host
if sw == s:
    names = sorted(x["name"] for x in j["switches"])
    assert names == sorted(f"sw{i}" for i in range(s)), names
want = [x for x in (g, h if sw == s else h * s, s if sw == s else 1) if x > 1]
assert [l["size"] for l in j["levels"]] == want, (j["levels"], want)
PY
  then passed=$((passed + 1)); echo "ok   $label"
  else failed=$((failed + 1)); echo "FAIL $label (exit $rc)"; cat "$TMP/err" "$TMP/out.json" | tail -n 40
  fi
}
check "2x2x2" 2 2 2 2
check "1x3x1" 1 3 1 1
check "3x1x2" 3 1 2 3
cat >"$TMP/topo.json" <<'JSON'
{"switches": {"onebig": ["topotest-s0h[0-1]", "topotest-s1h[0-1]"]}}
JSON
check "2x2x2 with HOCCL_TOPO_FILE (one switch)" 2 2 2 1 --name topotest --env "HOCCL_TOPO_FILE=$TMP/topo.json"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
