#!/usr/bin/env bash
# OpenBLAS kernels: on a CPU with AVX2 + FMA, mirrored runs a vector kernel set even where
# OpenBLAS itself falls back to SSE3 ones (a hypervisor hiding the CPU model); a user's
# OPENBLAS_CORETYPE is left alone. Checked through `mirrored info`, alone and under mpirun.
source "$(dirname "$0")/lib.sh"
core_of() { sed -nE 's/^  blas core +([A-Za-z0-9]+).*/\1/p' | head -1; }

chosen=$(OPENBLAS_CORETYPE=Prescott "$MIRRORED" info | core_of)
[[ "$chosen" == Prescott ]] || fail "OPENBLAS_CORETYPE=Prescott was not honoured (core '$chosen')"
echo "ok: the user's OPENBLAS_CORETYPE is kept ($chosen)"

if ! grep -qw avx2 /proc/cpuinfo || ! grep -qw fma /proc/cpuinfo; then
  echo "SKIP: this CPU has no AVX2/FMA, so no vector OpenBLAS core to require"
  exit 77
fi
for run in local mpi; do
  if [[ $run == local ]]; then
    line=$(env -u OPENBLAS_CORETYPE "$MIRRORED" info | grep -E '^  blas core')
  else
    line=$(unset OPENBLAS_CORETYPE; mpirun_np 2 info | grep -E '^  blas core')
  fi
  core=$(core_of <<< "$line")
  [[ "$core" =~ ^(Haswell|Zen|SkylakeX|Cooperlake|SapphireRapids)$ ]] ||
    fail "$run: OpenBLAS runs '$core' kernels on a CPU with AVX2 ($line)"
  echo "ok: $run: $line"
done
