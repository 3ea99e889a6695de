#!/usr/bin/env bash
# `mirrored info`: the build and library rows in one process, and under mpirun -np 2 the
# cluster table with one row per rank, printed once (by rank 0).
source "$(dirname "$0")/lib.sh"
"$MIRRORED" info >"$WORK/one.out" 2>&1 || { cat "$WORK/one.out"; fail "mirrored info failed"; }
cat "$WORK/one.out"
for label in version build sanitizers compiler cuda mpi hdf5 blas launch; do
  grep -qE "^  $label +[^ ]" "$WORK/one.out" || fail "info lacks the '$label' row"
done
grep -qE '^  blas +OpenBLAS [0-9]' "$WORK/one.out" || fail "info does not name the OpenBLAS version"
grep -qE '^  launch +local \(one process\), 1 rank' "$WORK/one.out" || fail "one process should say local, 1 rank"
# A CUDA build names the architectures it carries kernels for (a GPU outside them fails at
# its first kernel with "no kernel image").
if grep -qE '^  cuda runtime ' "$WORK/one.out"; then
  grep -qE '^  cuda archs +[0-9n]' "$WORK/one.out" || fail "a CUDA build's info lacks the 'cuda archs' row"
fi

mpirun_np 2 info >"$WORK/two.out" 2>&1 || { cat "$WORK/two.out"; fail "mirrored info under mpirun failed"; }
cat "$WORK/two.out"
[[ $(grep -c '^mirrored ' "$WORK/two.out") == 1 ]] || fail "the header was printed more than once"
grep -qE '^  launch +mpi, 2 rank\(s\) on 1 node' "$WORK/two.out" || fail "launch row should say mpi, 2 ranks"
grep -qE '^rank +host +local_rank +node +device$' "$WORK/two.out" || fail "no cluster table header"
rows=$(grep -cE '^[0-9]+ +[^ ]+ +[0-9]+ +[0-9]+ +cpu' "$WORK/two.out")
[[ $rows == 2 ]] || fail "expected 2 cluster rows, found $rows"
grep -qE '^0 +[^ ]+ +0 +0 +cpu' "$WORK/two.out" && grep -qE '^1 +[^ ]+ +1 +0 +cpu' "$WORK/two.out" ||
  fail "rows should be rank 0 and 1, local ranks 0 and 1 on node 0"
echo "ok: info rows and a 2-row cluster table"
