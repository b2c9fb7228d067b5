#!/bin/bash
# hoccl-paro end to end: 7B on 32 ranks in groups of 8 must print the memory of the formula; bad input must fail
# with a clear message; --json must parse; --rank-all must list 27 strategies; --png must write a PNG (if gnuplot).
set -u
tool="$1"
fail=0
check() { if ! eval "$2"; then echo "FAILED: $1"; fail=1; else echo "ok: $1"; fi; }
tmp=$(mktemp -d /tmp/hoccl-paro-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

out=$("$tool" --ranks 32 --group-size 8 --strategy IIG --params 7B --micro-steps 4 2>&1)
# IIG: 2*7e9/8 + 2*7e9/8 + 12*7e9/32 = 6125000000 bytes
check "IIG memory per rank = 2Psi/8 + 2Psi/8 + 12Psi/32" "grep -q '(6125000000 bytes)' <<<\"\$out\""
check "IIG plan has an inter-group reduce-scatter once per step" \
  "grep -E 'sync grads +ReduceScatter +inter +4 ' <<<\"\$out\" | grep -q '1 per step'"
out=$("$tool" -n 32 -m 8 -s zero3 -p 7B --trainable 0.1 2>&1)
# GGG with 10% trainable: (2*7e9 + 14*7e8)/32 = 743750000
check "GGG memory with 10% trainable" "grep -q '(743750000 bytes)' <<<\"\$out\""
out=$("$tool" -n 32 -m 8 -p 7B -A 4 --memory 80GiB --rank-all 2>&1)
check "--rank-all lists 27 strategies" "[ \$(grep -cE '^ +(-|[0-9]+) +[NIG]{3} ' <<<\"\$out\") -eq 27 ]"
check "--rank-all marks NNN as not fitting 80GiB" "grep -E '^ +- +NNN ' <<<\"\$out\" | grep -q ' no$'"
"$tool" -n 8 -m 4 -s IIG -p 1M --json --rank-all > "$tmp/out.json" 2>&1
check "--json parses" "python3 -c 'import json,sys; d=json.load(open(\"$tmp/out.json\")); assert d[\"strategy\"]==\"IIG\" and len(d[\"ranking\"])==27 and len(d[\"states\"][\"OS\"][\"shards\"])==8' "
echo '{"switches": [{"name": "s0", "hosts": ["a", "b"]}, {"name": "s1", "hosts": ["c", "d"]}]}' > "$tmp/topo.json"
out=$("$tool" --topology "$tmp/topo.json" --ranks-per-host 4 --level switch -s IIG -p 1B 2>&1)
check "--topology with switch groups: 2 groups of 8" "grep -q '2 groups (switches) of 8 ranks' <<<\"\$out\""
out=$("$tool" -n 32 -m 8 -s NXG 2>&1); rc=$?
check "bad strategy fails with a clear message" "[ $rc -ne 0 ] && grep -q \"'NXG' is not valid\" <<<\"\$out\""
out=$("$tool" -n 30 -m 8 -s IIG 2>&1); rc=$?
check "30 ranks in groups of 8 is refused" "[ $rc -ne 0 ] && grep -q 'cannot lay out 30 ranks' <<<\"\$out\""
out=$("$tool" -n 8 -m 4 --bandwidth inter=fast 2>&1); rc=$?
check "bad bandwidth is refused" "[ $rc -ne 0 ]"
if command -v gnuplot >/dev/null; then
  "$tool" -n 8 -m 4 -s IIG -p 1M --png "$tmp/map.png" >/dev/null 2>&1
  check "--png writes a PNG" "head -c 8 '$tmp/map.png' | od -c | grep -q 'P   N   G'"
fi
if [ $fail -eq 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fail
