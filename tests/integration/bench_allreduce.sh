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
# One table per collective (all-reduce, reduce-scatter, all-gather), 21 sizes each (4 B .. 4
# MiB): exactly 63 rows, so a table that goes missing fails here.
rows=$(grep -cE '^ *[0-9]+ +[0-9]+ +float ' "$WORK/out" || true)
[[ $rows -eq 63 ]] || fail "expected 63 rows (3 collectives x 21 sizes, 4 B .. 4 MiB), got $rows"
for op in allreduce reduce_scatter allgather; do
  [[ $(grep -c "\"op\": \"$op\"" "$WORK/rows.jsonl") -eq 21 ]] || fail "expected 21 JSON rows of $op"
done
bad=$(awk '$3 == "float" && ($7 != 0 || $11 != 0)' "$WORK/out")
[[ -z "$bad" ]] || fail "rows with wrong results: $bad"
grep -q 'out of bounds values : 0 OK' "$WORK/out" || fail "summary line missing or not OK"
# The JSON rows carry both counts too.
[[ $(grep -c '"mpi_wrong": 0' "$WORK/rows.jsonl") -eq $rows ]] || fail "JSON rows lack \"mpi_wrong\": 0"
echo "ok: bench allreduce at $np ranks: $rows rows (3 collectives), #wrong 0 in both columns, exit 0"
