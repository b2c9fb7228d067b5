#!/bin/sh
# The libraries load on a machine without UCX: none of them needs libucp, libucs, libuct or libucm, nor leaves a UCX
# symbol for the loader to find (UCX's functions come from the plugin libhoccl-ucx.so, dlopened when HOCCL_NET=ucx
# needs it: transports/ucx/ucx_api.h). Usage: check_no_libucx.sh LIBRARY...
status=0
for lib in "$@"; do
  needed=$(readelf -d "$lib") || { echo "readelf failed on $lib"; exit 1; }
  undefined=$(nm -D --undefined-only "$lib") || { echo "nm failed on $lib"; exit 1; }
  if echo "$needed" | grep -E 'NEEDED.*lib(ucp|ucs|uct|ucm)\.so'; then
    echo "FAIL: $lib needs UCX's libraries (above)"; status=1
  elif echo "$undefined" | grep -E ' (ucp|ucs|uct|ucm)_'; then
    echo "FAIL: $lib leaves UCX symbols undefined (above)"; status=1
  else
    echo "ok: $lib needs no UCX library"
  fi
done
exit $status
