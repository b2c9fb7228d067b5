#!/bin/bash
# Tests of hoccl-run with tiny shell ranks: environment, prefixes, failure propagation, signals, timeout.
# Usage: test_launcher.sh PATH/TO/hoccl-run. Every case is bounded (ranks sleep at most 30 s, hoccl-run must end
# them much sooner); prints one line per case and "N passed, N failed" at the end.
set -u
RUN=${1:?usage: test_launcher.sh PATH/TO/hoccl-run}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }

# 1. all ranks succeed -> 0
"$RUN" -n 3 -- sh -c 'exit 0'; rc=$?
[ $rc = 0 ] && ok "all succeed" || bad "all succeed" "rc=$rc"

# 2. the launcher environment
"$RUN" -n 3 --env FOO=bar -- sh -c 'echo "$HOCCL_RANK $HOCCL_WORLD_SIZE $HOCCL_LOCAL_RANK $HOCCL_LOCAL_SIZE $HOCCL_COMM_ID $HOCCL_AUTH_TOKEN $FOO" > '"$TMP"'/env.$HOCCL_RANK'
for r in 0 1 2; do
  read -r rank size lrank lsize commid token foo < "$TMP/env.$r" || true
  if [ "$rank" = $r ] && [ "$size" = 3 ] && [ "$lrank" = $r ] && [ "$lsize" = 3 ] && [ "$foo" = bar ] &&
     [[ $commid =~ ^127\.0\.0\.1:[0-9]+$ ]] && [[ $token =~ ^[0-9a-f]{32}$ ]]; then
    ok "environment of rank $r"
  else
    bad "environment of rank $r" "$(cat "$TMP/env.$r")"
  fi
done
[ "$(cut -d' ' -f5,6 "$TMP"/env.* | sort -u | wc -l)" = 1 ] && ok "same comm id and token" || bad "same comm id and token" "differ"
"$RUN" -n 2 --hostid-per-rank -- sh -c 'echo "$HOCCL_HOSTID $HOCCL_LOCAL_RANK $HOCCL_LOCAL_SIZE" > '"$TMP"'/host.$HOCCL_RANK'
[ "$(cat "$TMP/host.1")" = "hoccl-run-host1 0 1" ] && ok "hostid per rank" || bad "hostid per rank" "$(cat "$TMP/host.1")"

# 3. prefixed output, lines kept whole, stdout and stderr apart
"$RUN" -n 2 -p -- sh -c 'printf "hello "; sleep 0.2; echo "from $HOCCL_RANK"; echo "err $HOCCL_RANK" >&2; printf tail' \
  > "$TMP/out" 2> "$TMP/err"
if grep -qx '\[0\] hello from 0' "$TMP/out" && grep -qx '\[1\] hello from 1' "$TMP/out" &&
   grep -qx '\[1\] err 1' "$TMP/err" && grep -qx '\[0\] tail' "$TMP/out"; then
  ok "prefixed output"
else
  bad "prefixed output" "$(cat "$TMP/out" "$TMP/err")"
fi

# 4. a rank that exits 3 -> 3, the others stopped quickly, the failing rank named
start=$(date +%s)
"$RUN" -n 4 -- sh -c 'if [ "$HOCCL_RANK" = 2 ]; then sleep 0.3; exit 3; fi; sleep 30' 2> "$TMP/err4"; rc=$?
took=$(( $(date +%s) - start ))
if [ $rc = 3 ] && [ $took -lt 10 ] && grep -q 'rank 2 .*exited with code 3' "$TMP/err4"; then
  ok "exit 3 propagates (${took}s)"
else
  bad "exit 3 propagates" "rc=$rc took=${took}s $(cat "$TMP/err4")"
fi

# 5. a rank killed by a signal -> 128+signal, named
"$RUN" -n 2 -- sh -c 'if [ "$HOCCL_RANK" = 0 ]; then kill -SEGV $$; fi; sleep 30' 2> "$TMP/err5"; rc=$?
[ $rc = 139 ] && grep -q 'rank 0 .*SIGSEGV' "$TMP/err5" && ok "signal death -> 139" || bad "signal death" "rc=$rc $(cat "$TMP/err5")"
# ... and with the core size limit at 0 it says that no core was kept and how to keep one; with a limit, it does not.
(ulimit -c 0; "$RUN" -n 1 -- sh -c 'kill -SEGV $$') 2> "$TMP/err5b"
grep -q 'rank 0 .*SIGSEGV.* (no core was written: the core size limit is 0; run `ulimit -c unlimited`' "$TMP/err5b" &&
  ok "signal death: no core, how to keep one" || bad "signal death, no core" "$(cat "$TMP/err5b")"
"$RUN" -n 2 -- sh -c 'if [ "$HOCCL_RANK" = 0 ]; then kill -TERM $$; fi; sleep 30' 2> "$TMP/err5c"
grep 'rank 0 .*SIGTERM' "$TMP/err5c" | grep -qv core && ok "signal death by SIGTERM: no core note" ||
  bad "signal death by SIGTERM" "$(cat "$TMP/err5c")"

# 6. ranks that ignore SIGTERM get SIGKILL after the grace period
start=$(date +%s)
"$RUN" -n 3 --grace 1 -- sh -c 'trap "" TERM; if [ "$HOCCL_RANK" = 1 ]; then exit 5; fi; sleep 30' 2> "$TMP/err6"; rc=$?
took=$(( $(date +%s) - start ))
[ $rc = 5 ] && [ $took -lt 10 ] && grep -q SIGKILL "$TMP/err6" && ok "SIGKILL after grace (${took}s)" || bad "SIGKILL after grace" "rc=$rc took=${took}s"

# 7. --timeout -> 124
start=$(date +%s)
"$RUN" -n 2 --timeout 1 -- sleep 30 2> "$TMP/err7"; rc=$?
took=$(( $(date +%s) - start ))
[ $rc = 124 ] && [ $took -lt 10 ] && grep -q timeout "$TMP/err7" && ok "timeout -> 124" || bad "timeout" "rc=$rc took=${took}s"

# 8. SIGTERM to hoccl-run is forwarded
"$RUN" -n 2 -- sleep 30 & lp=$!
sleep 0.5
kill -TERM $lp
start=$(date +%s)
wait $lp; rc=$?
took=$(( $(date +%s) - start ))
[ $rc = 143 ] && [ $took -lt 10 ] && ok "SIGTERM forwarded" || bad "SIGTERM forwarded" "rc=$rc took=${took}s"

# 9. a program that does not exist -> 127 with a message
"$RUN" -n 2 -- /nonexistent/program 2> "$TMP/err9"; rc=$?
[ $rc = 127 ] && grep -q 'cannot execute' "$TMP/err9" && ok "missing program -> 127" || bad "missing program" "rc=$rc"

# 10. usage errors and --params
"$RUN" -n 2 2> /dev/null; rc=$?
[ $rc = 2 ] && ok "no program -> 2" || bad "no program" "rc=$rc"
"$RUN" -n 2 --env NOEQUALS -- true 2> /dev/null; rc=$?
[ $rc = 2 ] && ok "bad --env -> 2" || bad "bad --env" "rc=$rc"
"$RUN" --params > "$TMP/params"; rc=$?
[ $rc = 0 ] && grep -q '^HOCCL_DEBUG ' "$TMP/params" && grep -q '^HOCCL_TIMEOUT ' "$TMP/params" && ok "--params" ||
  bad "--params" "rc=$rc"
grep -q '^HOCCL_TIMEOUT  *int  *300  *\[1, 31536000\]' "$TMP/params" && ok "--params: type, default, range" ||
  bad "--params: type, default, range" "$(grep '^HOCCL_TIMEOUT' "$TMP/params")"
"$RUN" --params=markdown > "$TMP/params.md"; rc=$?
[ $rc = 0 ] && grep -qF '| `HOCCL_TIMEOUT` | int | `300` | [1, 31536000] |' "$TMP/params.md" && ok "--params=markdown" ||
  bad "--params=markdown" "rc=$rc"
"$RUN" --params=xml 2> "$TMP/err10"; rc=$?
[ $rc = 2 ] && grep -q 'expected --params or --params=markdown' "$TMP/err10" && ok "--params=xml -> 2" ||
  bad "--params=xml" "rc=$rc"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
