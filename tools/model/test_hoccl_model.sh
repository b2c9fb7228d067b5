#!/bin/bash
# hoccl-model: predict (text, JSON, model file, bad input), plan (table, JSON), and under hoccl-run with two ranks
# calibrate (writes a model file that predict reads back) and validate (prints predicted against measured).
set -eu
TOOL=$1
RUN=$(dirname "$TOOL")/../launcher/hoccl-run
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$TOOL" predict --shape 2x2x2 --sizes 1M:4M)
echo "$out" | grep -q "8 ranks, 4 hosts, 2 switches" || fail "predict header: $out"
[ "$(echo "$out" | grep -c ' ho_ring ')" = 3 ] || fail "predict rows: $out"
"$TOOL" predict --shape 4x4x4 --sizes 64M --json >"$TMP/p.json"
python3 - "$TMP/p.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ranks"] == 64, j
algs = {p["algorithm"] for p in j["predictions"]}
assert {"ring", "ho_ring"} <= algs, algs
for p in j["predictions"]:
    assert p["seconds"] > 0 and p["busbw_GBps"] > 0, p
PY
# A model file: a 10x slower spine must slow the ring's 64 MiB all-reduce by several times.
cat >"$TMP/m.json" <<'J'
{"latency_us": {"intra-host": 1}, "bandwidth_GBps": {"inter-switch": 0.12}, "spine_GBps": 0.12}
J
fast=$("$TOOL" predict --shape 2x2x2 --sizes 64M --json | python3 -c 'import json,sys; print([p["seconds"] for p in json.load(sys.stdin)["predictions"] if p["algorithm"]=="ring"][0])')
slow=$("$TOOL" predict --shape 2x2x2 --sizes 64M --model "$TMP/m.json" --json | python3 -c 'import json,sys; print([p["seconds"] for p in json.load(sys.stdin)["predictions"] if p["algorithm"]=="ring"][0])')
python3 -c "import sys; sys.exit(0 if $slow > 5 * $fast else 1)" || fail "model file ignored: $fast -> $slow"
echo '{"latency_us": {"intra-host": -1}}' >"$TMP/bad.json"
"$TOOL" predict --model "$TMP/bad.json" 2>"$TMP/err" && fail "a negative latency was accepted"
grep -q "positive number" "$TMP/err" || fail "bad model message: $(cat "$TMP/err")"
# --png: a valid PNG (signature, IHDR chunk with its CRC, IEND) of the stated size, with more than one colour.
"$TOOL" predict --shape 2x2x2 --sizes 1K:64M --png "$TMP/p.png" >/dev/null
python3 - "$TMP/p.png" <<'PY'
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n", d[:8]
pos, chunks = 8, []
while pos < len(d):
    n, = struct.unpack(">I", d[pos:pos + 4]); kind = d[pos + 4:pos + 8]; body = d[pos + 8:pos + 8 + n]
    crc, = struct.unpack(">I", d[pos + 8 + n:pos + 12 + n])
    assert zlib.crc32(kind + body) == crc, kind
    chunks.append((kind, body)); pos += 12 + n
assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND", [c[0] for c in chunks]
w, h = struct.unpack(">II", chunks[0][1][:8])
assert (w, h) == (900, 560), (w, h)
raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
assert len(set(raw)) > 8, "a blank picture"
PY
"$TOOL" predict --shape 2x2x2 --sizes 1M --png "$TMP/no/such/dir/p.png" >/dev/null 2>"$TMP/err" &&
  fail "--png into a missing folder succeeded"
grep -q "gnuplot failed" "$TMP/err" || fail "--png error: $(cat "$TMP/err")"
"$TOOL" predict --sizes 5X 2>"$TMP/err" && fail "a bad size was accepted"
grep -q "bad size" "$TMP/err" || fail "bad size message: $(cat "$TMP/err")"

out=$("$TOOL" plan --gpus 16 --shape 1x2x8 --params 1B --hidden 2048 --layers 16 --seq 1024 --batch 16 --top 5)
echo "$out" | grep -q "4D layouts" || fail "plan: $out"
echo "$out" | grep -q "PaRO strategies" || fail "plan PaRO: $out"
"$TOOL" plan --gpus 16 --shape 1x2x8 --params 1B --hidden 2048 --layers 16 --batch 16 --json >"$TMP/plan.json"
python3 - "$TMP/plan.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
ls = j["layouts"]
assert len(ls) == 10 and all(l["gx"] * l["gy"] * l["gz"] * l["gdata"] == 16 for l in ls), ls
t = [l["comm_seconds"] for l in ls]
assert t == sorted(t), t
assert abs(ls[0]["memory_bytes"] - 16e9 / (ls[0]["gx"] * ls[0]["gy"] * ls[0]["gz"])) < 1, ls[0]
assert len(j["paro"]) == 10
PY

if [ -x "$RUN" ]; then
  "$RUN" -n 2 --timeout 60 -- "$TOOL" calibrate --out "$TMP/cal.json" --iterations 50 >"$TMP/cal.out"
  grep -q "intra-host: rank 0 <-> rank 1" "$TMP/cal.out" || fail "calibrate: $(cat "$TMP/cal.out")"
  grep -q "intra-host: steps of 2 flows of 8 B at once: .* us per step" "$TMP/cal.out" ||
    fail "calibrate: no per-step fit: $(cat "$TMP/cal.out")"
  # The cache gain (one host, where hwloc gives cache sizes): fitted so that the predicted HO-Ring / ring ratio is
  # the measured one, or clamped to [1, 3] where no gain in that range matches.
  if grep -q "cache: all-reduce" "$TMP/cal.out"; then
    python3 - "$TMP/cal.out" <<'PY' || fail "calibrate: cache gain: $(grep "cache:" "$TMP/cal.out")"
import re, sys
line = [l for l in open(sys.argv[1]) if "cache: all-reduce" in l][0]
measured, gain, predicted = (float(x) for x in re.search(
    r"ratio ([0-9.]+)\): gain ([0-9.]+), predicted ratio ([0-9.]+)", line).groups())
# Printed to 2 and 4 decimals: a gain just above 1 reads 1.00 with the two ratios equal to the printed digits.
tolerance = 2e-4 + 1e-3 * measured
assert 1 <= gain <= 3, line
if 1 < gain < 3:
    assert abs(predicted - measured) < tolerance, line
elif gain == 1:
    assert measured >= predicted - tolerance, line
else:
    assert measured <= predicted + tolerance, line
PY
  fi
  python3 - "$TMP/cal.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
# A measured, plausible number: 0.4 us in a plain build, but over 1 ms under ASan on a busy machine (CI runs this
# test in the sanitizer build too), so only the order of a broken probe (>= 0.1 s) fails here.
assert 0 < j["latency_us"]["intra-host"] < 100000, j
assert j["bandwidth_GBps"]["intra-host"] > 0.01, j
assert "measured" in j["source"], j
# The per-step cost is fitted (>= 0; the classes without peers keep 0) and said where it came from.
assert 0 <= j["step_us"]["intra-host"] < 1e6 and j["step_us"]["inter-switch"] == 0, j
assert "intra-host steps (2 flows, 8 B)" in j["source"], j
# One host: no spine, so no burst probed.
assert j["spine_burst_bytes"] == 0, j
# One host: the shm shortcuts' hand-off is measured (the small shortcut always runs an 8-byte all-reduce), and the
# cores of the host are recorded; the copy rate where cross-memory attach is allowed (0, derived, otherwise).
assert 0 < j["shm"]["handoff_us"] < 1e6, j
assert "shm small 8 B all-reduce" in j["source"], j
assert j["shm"]["copy_GBps"] >= 0 and j["shm"]["reduce_GBps"] >= 0, j
assert j["cores_per_host"] >= 1, j
# The cache term's sizes and gain go into the file together (hwloc's sizes; none where it found no caches).
c = j["cache"]
assert 1 <= c["gain"] <= 3, j
if c["l2_bytes"] > 0:
    assert c["llc_bytes"] > 0 and "cache:" in j["source"], j
PY
  "$TOOL" predict --shape 1x1x2 --sizes 1M --model "$TMP/cal.json" >/dev/null
  "$RUN" -n 2 --timeout 60 --env HOCCL_ALGO=ring -- "$TOOL" validate --sizes 64K:256K --model "$TMP/cal.json" \
    >"$TMP/val.out"
  [ "$(grep -c ' ring ' "$TMP/val.out")" = 3 ] || fail "validate: $(cat "$TMP/val.out")"
fi
echo "hoccl-model: ok"
