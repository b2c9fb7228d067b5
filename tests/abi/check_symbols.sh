#!/bin/sh
# Symbol parity between hoccl's libnccl.so.2 ($1) and NVIDIA's ($2): the same defined dynamic symbols with the
# same binding (weak nccl*, strong pnccl*, strong ncclResetDebugInitInternal), each pncclX at the address of its
# ncclX, SONAME libnccl.so.2, and nothing else exported. Skipped (exit 77) when NVIDIA's library is absent.
set -eu
shim=$1
real=$2
if [ ! -f "$real" ]; then
  echo "skip: NVIDIA's $real is not installed, nothing to compare with"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "TYPE NAME" lines; the type letter (W weak, T strong text) is part of the contract.
nm -D --defined-only "$real" | awk 'NF == 3 { print $2, $3 }' | sort > "$tmp/real"
nm -D --defined-only "$shim" | awk 'NF == 3 { print $2, $3 }' | sort > "$tmp/shim"
fail=0
missing=$(comm -23 "$tmp/real" "$tmp/shim")
extra=$(comm -13 "$tmp/real" "$tmp/shim")
if [ -n "$missing" ]; then
  echo "FAILED: exported by NVIDIA's library but not (or with another binding) by the shim:"
  echo "$missing"
  fail=1
fi
if [ -n "$extra" ]; then
  echo "FAILED: exported by the shim but not by NVIDIA's library (hoccl internals must stay local):"
  echo "$extra"
  fail=1
fi

# Each weak nccl* must share its address with pnccl*.
nm -D --defined-only "$shim" | awk 'NF == 3 { addr[$3] = $1 }
  END { for (s in addr) if (s ~ /^nccl/ && ("p" s) in addr && addr[s] != addr["p" s]) { print s; bad = 1 }
        exit bad }' > "$tmp/alias" || { echo "FAILED: nccl* and pnccl* at different addresses:"; cat "$tmp/alias"; fail=1; }

soname=$(readelf -d "$shim" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" != "libnccl.so.2" ]; then
  echo "FAILED: SONAME is '$soname', want libnccl.so.2"
  fail=1
fi
if readelf -V "$shim" | grep -q "Version definition"; then
  echo "FAILED: the shim defines symbol versions; NVIDIA's library has none"
  fail=1
fi

count=$(wc -l < "$tmp/shim")
if [ "$fail" -eq 0 ]; then
  echo "symbol parity: $count symbols, same names and bindings as $real, SONAME $soname"
  echo "1 passed, 0 failed"
else
  echo "0 passed, 1 failed"
fi
exit "$fail"
