#!/bin/sh
# docs/nccl-shim.md's function table (between the function-table markers) must name exactly the nccl* functions
# that the shim ($1) exports, each once, with one of the four statuses. Usage: check_doc_table.sh SHIM DOC
set -eu
shim=$1
doc=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$shim" | awk 'NF == 3 && $3 ~ /^nccl/ && $3 != "ncclResetDebugInitInternal" { print $3 }' \
  | sort > "$tmp/exported"
sed -n '/<!-- function-table begin -->/,/<!-- function-table end -->/p' "$doc" \
  | awk -F'|' 'NF >= 4 && $2 ~ /`nccl/ { gsub(/[ `]/, "", $2); print $2 }' | sort > "$tmp/documented"
sed -n '/<!-- function-table begin -->/,/<!-- function-table end -->/p' "$doc" \
  | awk -F'|' 'NF >= 4 && $2 ~ /`nccl/ { s = $3; gsub(/^ +| +$/, "", s);
      if (s != "implemented" && s != "host-only" && s != "needs a GPU" && s != "not supported") print $2 ": " s }' \
  > "$tmp/badstatus"
fail=0
if ! cmp -s "$tmp/exported" "$tmp/documented"; then
  echo "FAILED: docs/nccl-shim.md's table differs from the exports (< exported only, > documented only):"
  diff "$tmp/exported" "$tmp/documented" | grep '^[<>]' || true
  fail=1
fi
dups=$(uniq -d "$tmp/documented")
if [ -n "$dups" ]; then echo "FAILED: listed twice: $dups"; fail=1; fi
if [ -s "$tmp/badstatus" ]; then echo "FAILED: unknown status:"; cat "$tmp/badstatus"; fail=1; fi
if [ "$fail" -eq 0 ]; then
  echo "$(wc -l < "$tmp/documented") functions documented, the same as exported"
  echo "1 passed, 0 failed"
else
  echo "0 passed, 1 failed"
fi
exit "$fail"
