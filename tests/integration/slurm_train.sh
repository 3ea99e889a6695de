#!/usr/bin/env bash
# slurm/train-cpu.sbatch on a real Slurm (munged + slurmctld + slurmd on this machine):
# `sbatch --wait` runs a 2-task training to completion through srun --mpi=pmix and leaves
# metrics and final.h5; the mpirun fallback inside the same kind of allocation gives the
# bit-identical model (same world size).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_lib.sh"
require_data
require_slurm
start=$SECONDS
slurm_up
echo "slurm up in $((SECONDS - start)) s"
export MIRRORED_ROOT=$SOURCE_DIR
# The mlp recipe (the script defaults to the cnn): these runs test the script, in seconds.
export MIRRORED_CONFIG=$SOURCE_DIR/launch/configs/fmnist_mlp.ini
args="--data.train $DATA_DIR/train.h5 --data.test $DATA_DIR/test.h5 --epochs 1 --max_steps 40 --log_every 20
      --model.hidden 64,32 --seed 5"
for launcher in srun mpirun; do
  t0=$SECONDS
  MIRRORED_LAUNCHER=$launcher MIRRORED_ARGS="$args --out $WORK/$launcher" \
    timeout -k 5 240 sbatch --wait --quiet --output "$WORK/$launcher.out" "$SOURCE_DIR/slurm/train-cpu.sbatch" ||
    { cat "$WORK/$launcher.out"; fail "$launcher job failed"; }
  [[ -s "$WORK/$launcher/final.h5" ]] || { cat "$WORK/$launcher.out"; fail "$launcher job left no final.h5"; }
  [[ $(grep -c '"kind": "train"' "$WORK/$launcher/metrics.jsonl") -eq 2 ]] ||
    { cat "$WORK/$launcher/metrics.jsonl"; fail "$launcher job: expected 2 train records"; }
  echo "ok: $launcher job in $((SECONDS - t0)) s"
done
grep -q "launcher: srun (Slurm job .* step 0, 2 tasks on .*), 2 rank(s)" "$WORK/srun.out" ||
  { cat "$WORK/srun.out"; fail "the srun job's cluster table does not name srun"; }
grep -q "launcher: mpirun (Open MPI) inside Slurm job" "$WORK/mpirun.out" ||
  { cat "$WORK/mpirun.out"; fail "the mpirun job's cluster table does not name mpirun"; }
"$COMPARE" "$WORK/srun/final.h5" "$WORK/mpirun/final.h5" --exact
echo "slurm_train: ok in $((SECONDS - start)) s"
