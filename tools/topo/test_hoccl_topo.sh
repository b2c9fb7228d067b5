#!/bin/bash
# hoccl-topo offline modes: text, JSON (checked with python3's json module when present), DOT, PNG (when Graphviz
# is installed), uneven shapes, topology files, and clear errors for bad input.
set -u
TOPO=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$("$TOPO" --shape 2x2x2) || fail "text mode"
grep -q "8 ranks, 4 hosts, 2 switches" <<<"$out" || fail "text summary: $out"
grep -q "level 2 'spine': 4 rings of 2 ranks" <<<"$out" || fail "spine level: $out"

"$TOPO" --shape 2x2x2 --json >"$TMP/t.json" || fail "json mode"
if command -v python3 >/dev/null; then
  python3 - "$TMP/t.json" <<'PY' || fail "json content"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["nranks"] == 8 and j["nswitches"] == 2, j
assert [l["size"] for l in j["levels"]] == [2, 2, 2], j["levels"]
assert sorted(sum((h["ranks"] for s in j["switches"] for h in s["hosts"]), [])) == list(range(8))
PY
fi

"$TOPO" --hosts "3,1;2" --dot >"$TMP/t.dot" || fail "dot mode"
grep -q "digraph" "$TMP/t.dot" || fail "dot output"
if command -v dot >/dev/null; then
  "$TOPO" --shape 2x2x2 --png "$TMP/t.png" >/dev/null 2>&1 || fail "png mode"
  [ -s "$TMP/t.png" ] || fail "png file empty"
fi

printf 'SwitchName=s1 Nodes=n[1-2]\nSwitchName=s2 Nodes=n[3-4]\n' >"$TMP/topology.conf"
out=$("$TOPO" --topology "$TMP/topology.conf" --ranks-per-host 2) || fail "topology file"
grep -q "switch 1 's2': 2 hosts" <<<"$out" || fail "topology file content: $out"

out=$("$TOPO" --shape 2x2x2 --predict allreduce:16M) || fail "predict"
grep -q "ho_ring" <<<"$out" || fail "predict output: $out"

"$TOPO" --shape 2x0x2 2>/dev/null && fail "bad shape accepted"
"$TOPO" --topology /nonexistent 2>"$TMP/err" && fail "missing file accepted"
grep -q "cannot read topology file" "$TMP/err" || fail "missing file message: $(cat "$TMP/err")"
# A recorded GPU topology (4+4 GPUs on two sockets over PCIe): the ring crosses the sockets twice, each GPU gets its
# socket's NIC; the JSON form parses back to the same answer; a broken file names the problem.
GPUS="$(dirname "$0")/gpus-two-socket-pcie.json"
out=$("$TOPO" --gpus "$GPUS") || fail "gpus mode"
grep -q "hops: 2 NODE, 4 PIX, 2 SYS" <<<"$out" || fail "gpu ring: $out"
grep -q "GPU3 mlx5_0 (NODE) GPU4 mlx5_1 (PIX)" <<<"$out" || fail "gpu nics: $out"
"$TOPO" --gpus "$GPUS" --json >"$TMP/g.json" || fail "gpus json"
[ "$("$TOPO" --gpus "$TMP/g.json" | tail -2)" = "$(tail -2 <<<"$out")" ] || fail "gpus json does not parse back"
echo '{"gpus": [{}, {}], "links": [["X", "NV2"], ["NV1", "X"]]}' >"$TMP/bad.json"
"$TOPO" --gpus "$TMP/bad.json" 2>"$TMP/err" && fail "asymmetric gpu links accepted"
grep -q 'GPU0 to GPU1 is "NV2" but GPU1 to GPU0 is "NV1"' "$TMP/err" || fail "gpu file message: $(cat "$TMP/err")"
echo "hoccl-topo: all checks passed"
