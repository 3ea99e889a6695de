#!/usr/bin/env bash
# mirrored bench allreduce on NP ranks: the exit status must be 0, every row's #wrong must be
# 0 in the mirrored column and in the MPI_Allreduce column, and the summary must say OK.
# usage: bench_allreduce.sh NP
source "$(dirname "$0")/lib.sh"
np=${1:?usage: bench_allreduce.sh NP}
status=0
mpirun_np "$np" bench allreduce --min_bytes 4 --max_bytes 4194304 --iters 3 --warmup 1 \
  --json "$WORK/rows.jsonl" >"$WORK/out" 2>&1 || status=$?
cat "$WORK/out"
[[ $status -eq 0 ]] || fail "bench allreduce at $np ranks exited $status"
# Data rows: size count type time algbw busbw #wrong time algbw busbw #wrong ratio
rows=$(grep -cE '^ *[0-9]+ +[0-9]+ +float ' "$WORK/out" || true)
[[ $rows -ge 21 ]] || fail "expected 21 rows (4 B .. 4 MiB), got $rows"
bad=$(awk '$3 == "float" && ($7 != 0 || $11 != 0)' "$WORK/out")
[[ -z "$bad" ]] || fail "rows with wrong results: $bad"
grep -q 'out of bounds values : 0 OK' "$WORK/out" || fail "summary line missing or not OK"
# The JSON rows carry both counts too.
[[ $(grep -c '"mpi_wrong": 0' "$WORK/rows.jsonl") -eq $rows ]] || fail "JSON rows lack \"mpi_wrong\": 0"
echo "ok: bench allreduce at $np ranks: $rows sizes, #wrong 0 in both columns, exit 0"
