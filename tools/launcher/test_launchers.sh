#!/bin/bash
# Launchers form ONE job: all_reduce_perf started by torchrun, Open MPI's mpirun, or a Slurm-, PMIx- or
# MPICH/Hydra-style environment (set by hand for N processes) must print one table for N ranks with correct results,
# never N tables of 1-rank jobs; a partial environment must fail at once naming the variables it read.
# Usage: test_launchers.sh MODE PATH/TO/all_reduce_perf [VENV_BIN]
#        MODE: torchrun | mpirun | slurm | pmix | mpich | partial
# Exit 77 (skipped) with a printed reason when torchrun or mpirun is not installed. Every run is bounded (-T, timeout).
set -u
MODE=${1:?usage: test_launchers.sh MODE PATH/TO/all_reduce_perf [VENV_BIN]}
PERF=${2:?usage: test_launchers.sh MODE PATH/TO/all_reduce_perf [VENV_BIN]}
VENV_BIN=${3:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ARGS=(-b 8 -e 64K -f 8 -n 2 -w 1 -c 1 -T 60)
pass=0
fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }
# Start from a clean launcher environment (the test runner may itself run under one).
for v in $(env | grep -oE '^(HOCCL_[A-Z_]+|OMPI_[A-Z_]+|PMIX_[A-Z_]+|PMI_[A-Z_]+|SLURM_[A-Z_]+|MPI_LOCAL[A-Z_]+|RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|MASTER_ADDR|MASTER_PORT)=' | tr -d =); do
  unset "$v"
done

# check_one_job NAME N OUTPUT RC: one table, N rank lines, results checked OK, exit 0.
check_one_job() {
  local name=$1 n=$2 out=$3 rc=$4
  local tables ranks
  tables=$(grep -c '^# Collective test starting' "$out")
  ranks=$(grep -cE '^#  Rank +[0-9]+ Group' "$out")
  if [ "$rc" = 0 ] && [ "$tables" = 1 ] && [ "$ranks" = "$n" ] && grep -q '^# Out of bounds values : 0 OK' "$out" &&
     ! grep -q 'FAILED' "$out"; then
    ok "$name: one job of $n ranks, results OK"
  else
    bad "$name" "rc=$rc, $tables table(s), $ranks rank line(s) (want 1 and $n); hoccl's errors and the output's end:
$(grep -iE 'hoccl|FAIL|error' "$out" | grep -vE 'Traceback|torch/distributed' | head -12)
...
$(tail -40 "$out")"
  fi
}

case "$MODE" in
  torchrun)
    if [ -z "$VENV_BIN" ] || [ ! -x "$VENV_BIN/torchrun" ]; then
      echo "SKIP: torchrun is not installed in the venv ($VENV_BIN); tools/install-deps --torch installs it"
      exit 77
    fi
    # --standalone: torch picks a free (ephemeral) port for its store (MASTER_PORT); hoccl's root takes a port of the
    # job's below 32000 (docs/launchers.md), not MASTER_PORT+1, which any outgoing connection may hold.
    timeout 120 "$VENV_BIN/torchrun" --standalone --nproc-per-node 2 --no-python "$PERF" "${ARGS[@]}" \
      > "$TMP/out" 2>&1
    check_one_job "torchrun --nproc-per-node 2" 2 "$TMP/out" $?
    timeout 120 "$VENV_BIN/torchrun" --standalone --nproc-per-node 2 --no-python "$PERF" "${ARGS[@]}" -t 2 \
      > "$TMP/out" 2>&1
    check_one_job "torchrun --nproc-per-node 2, 2 threads each" 4 "$TMP/out" $?
    ;;
  mpirun)
    if ! command -v mpirun > /dev/null; then
      echo "SKIP: mpirun (Open MPI) is not installed; tools/install-deps installs openmpi-bin"
      exit 77
    fi
    root=()
    [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
    timeout 120 mpirun "${root[@]}" --oversubscribe -np 3 "$PERF" "${ARGS[@]}" > "$TMP/out" 2>&1
    check_one_job "mpirun -np 3" 3 "$TMP/out" $?
    ;;
  slurm)
    # srun's variables set by hand: 3 tasks on one node, then the same 3 tasks spread over two "nodes" (both this
    # machine): tasks 0,1 on node 0 and task 2 on node 1, so that the launcher's node index groups the ranks.
    run_slurm() {  # NAME TASKS_PER_NODE NODE_OF_0 NODE_OF_1 NODE_OF_2 LOCALID_0 LOCALID_1 LOCALID_2
      local name=$1 per=$2 pids=() rcs=0 step=$RANDOM
      local nodes=("$3" "$4" "$5") locals=("$6" "$7" "$8")
      for r in 0 1 2; do
        env SLURM_PROCID=$r SLURM_NTASKS=3 SLURM_LOCALID=${locals[$r]} SLURM_NODEID=${nodes[$r]} \
          SLURM_STEP_NODELIST='localhost,127.0.0.[1-1]' SLURM_STEP_TASKS_PER_NODE="$per" SLURM_JOB_ID=$$ \
          SLURM_STEP_ID=$step \
          timeout 120 "$PERF" "${ARGS[@]}" > "$TMP/out.$r" 2>&1 &
        pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p" || rcs=$?; done
      cat "$TMP/out.0" "$TMP/out.1" "$TMP/out.2" > "$TMP/out"
      check_one_job "$name" 3 "$TMP/out" $rcs
    }
    run_slurm "Slurm environment, 3 tasks on one node" '3' 0 0 0 0 1 2
    grep -qE '^#  Rank +2 shm x2$' "$TMP/out" && ok "one node: shared memory between all" ||
      bad "one node: transports" "$(grep -E '^#  Rank' "$TMP/out")"
    run_slurm "Slurm environment, 2+1 tasks on two nodes" '2,1' 0 0 1 0 1 0
    if grep -qE '^#  Rank +0 shm x1, tcp x1$' "$TMP/out" && grep -qE '^#  Rank +2 tcp x2$' "$TMP/out"; then
      ok "two nodes: grouped by SLURM_NODEID (shm within, tcp across)"
    else
      bad "two nodes: transports" "$(grep -E '^#  Rank' "$TMP/out")"
    fi
    ;;
  pmix | mpich)
    # prterun's / Hydra's variables set by hand, 3 ranks on this host. PMIx exports no job size (HOCCL_WORLD_SIZE
    # gives it) and no root host (HOCCL_COMM_ID names it); Hydra exports its local rank and size (all 3 ranks here:
    # the root is 127.0.0.1) but no job id, so HOCCL_PORT gives the port.
    port=$((22000 + RANDOM % 8000))
    pids=()
    rcs=0
    for r in 0 1 2; do
      if [ "$MODE" = pmix ]; then
        vars=(PMIX_RANK=$r PMIX_NAMESPACE=prterun-test-$$@1 HOCCL_WORLD_SIZE=3 HOCCL_COMM_ID=127.0.0.1:$port)
      else
        vars=(PMI_RANK=$r PMI_SIZE=3 MPI_LOCALRANKID=$r MPI_LOCALNRANKS=3 HOCCL_PORT=$port)
      fi
      env "${vars[@]}" timeout 120 "$PERF" "${ARGS[@]}" > "$TMP/out.$r" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rcs=$?; done
    cat "$TMP/out.0" "$TMP/out.1" "$TMP/out.2" > "$TMP/out"
    check_one_job "$MODE environment, 3 ranks" 3 "$TMP/out" $rcs
    ;;
  partial)
    # expect_error NAME PATTERN... -- ENV...: the tool fails within the timeout and its message has every pattern.
    expect_error() {
      local name=$1
      shift
      local pats=()
      while [ "$1" != -- ]; do pats+=("$1"); shift; done
      shift
      env "$@" timeout 30 "$PERF" "${ARGS[@]}" > "$TMP/out" 2>&1
      local rc=$? missing=""
      for p in "${pats[@]}"; do grep -qF -- "$p" "$TMP/out" || missing+=" '$p'"; done
      if [ $rc != 0 ] && [ $rc != 124 ] && [ -z "$missing" ] && ! grep -q 'Collective test starting' "$TMP/out"; then
        ok "$name"
      else
        bad "$name" "rc=$rc, missing:$missing; output: $(head -5 "$TMP/out")"
      fi
    }
    expect_error "torchrun variables without MASTER_ADDR" "cannot find the job's root address" "RANK=1" \
      "WORLD_SIZE=2" "MASTER_ADDR (unset)" "MASTER_PORT (unset)" "HOCCL_COMM_ID (unset)" -- RANK=1 WORLD_SIZE=2
    expect_error "rank 0 of torchrun variables without MASTER_ADDR" "MASTER_ADDR (unset)" -- RANK=0 WORLD_SIZE=2
    expect_error "RANK without WORLD_SIZE" "RANK is set but WORLD_SIZE is not" -- RANK=1
    expect_error "mpirun variables on several hosts" "OMPI_COMM_WORLD_RANK=1" "OMPI_COMM_WORLD_LOCAL_SIZE=1" \
      "HOCCL_COMM_ID (unset)" -- OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_RANK=0 \
      OMPI_COMM_WORLD_LOCAL_SIZE=1
    expect_error "Slurm variables without a node list" "SLURM_STEP_NODELIST (unset)" "SLURM_PROCID=1" -- \
      SLURM_PROCID=1 SLURM_NTASKS=2
    expect_error "malformed SLURM_NTASKS" "SLURM_NTASKS='two'" -- SLURM_PROCID=1 SLURM_NTASKS=two
    expect_error "PMIx without a job size" "PMIX_RANK is set but the job size is unknown" "HOCCL_WORLD_SIZE" -- \
      PMIX_RANK=1 PMIX_NAMESPACE=ns
    expect_error "PMIx without a root address" "PMIX_RANK=1" "HOCCL_COMM_ID (unset)" -- PMIX_RANK=1 \
      PMIX_NAMESPACE=ns HOCCL_WORLD_SIZE=2
    expect_error "Hydra variables without a port" "PMI_RANK=1" "PMI_SIZE=2" "HOCCL_PORT" -- PMI_RANK=1 PMI_SIZE=2 \
      MPI_LOCALRANKID=1 MPI_LOCALNRANKS=2
    expect_error "PMI_RANK without PMI_SIZE" "PMI_RANK is set but PMI_SIZE is not" -- PMI_RANK=1
    ;;
  *)
    echo "unknown mode $MODE" >&2
    exit 2
    ;;
esac
echo "$pass passed, $fail failed"
[ $fail = 0 ]
