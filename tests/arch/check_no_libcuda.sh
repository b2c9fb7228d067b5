#!/bin/sh
# The libraries load on a machine without the NVIDIA driver: none of them has a link dependency on libcuda (the CUDA
# device loads it at run time). Usage: check_no_libcuda.sh LIBRARY...
status=0
for lib in "$@"; do
  deps=$(ldd "$lib") || { echo "ldd failed on $lib"; exit 1; }
  if echo "$deps" | grep -q 'libcuda\.so'; then
    echo "FAIL: $lib links libcuda:"; echo "$deps" | grep 'libcuda'; status=1
  else
    echo "ok: $lib does not link libcuda"
  fi
done
exit $status
