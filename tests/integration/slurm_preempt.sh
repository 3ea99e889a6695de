#!/usr/bin/env bash
# Preemption on a real Slurm: the warning signal (what --signal=B:USR1@60 sends before the
# time limit) is sent early with `scancel --signal=USR1 --batch`; slurm/preemptible.sh
# forwards it through srun to the ranks, the trainer checkpoints and exits 7, the script
# requeues the job, and the requeued job (released at once instead of after Slurm's
# ~120 s hold) resumes from the checkpoint and ends bit-identical to an uninterrupted run.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_lib.sh"
require_data
require_slurm
start=$SECONDS
slurm_up
export MIRRORED_ROOT=$SOURCE_DIR
# The mlp recipe (the script defaults to the cnn): these runs test the script, in seconds.
export MIRRORED_CONFIG=$SOURCE_DIR/launch/configs/fmnist_mlp.ini
# The test set as training data, 156 steps per epoch; the signal goes out once the first
# epoch's checkpoint is on disk, with 4 epochs (seconds) still to run.
epochs=5
common="--data.train $DATA_DIR/test.h5 --data.test $DATA_DIR/test.h5 --batch_size 64 --epochs $epochs
        --model.hidden 128 --lr 0.05 --momentum 0.9 --seed 8 --log_every 10"  # threads: 1 per task, from the script

job=$(MIRRORED_ARGS="$common --out $WORK/run" sbatch --parsable --output "$WORK/job.out" \
        "$SOURCE_DIR/slurm/train-cpu.sbatch")
echo "submitted job $job"
FAIL_SHOWS=$WORK/job.out
started() {
  compgen -G "$WORK/run/checkpoints/ckpt-*.h5" >/dev/null && return 0
  case $(job_field "$job" JobState) in PENDING|RUNNING|CONFIGURING) return 1 ;; esac
  fail "job $job ended before it was signalled"
}
wait_until 120 "the first checkpoint" started
scancel --signal=USR1 --batch "$job"
t_signal=$SECONDS

wait_requeued "$job"
echo "ok: requeued $((SECONDS - t_signal)) s after the signal"
grep -q "checkpoint of step" "$WORK/job.out" || fail "no checkpoint message"
[[ ! -e "$WORK/run/final.h5" ]] || fail "the preempted run wrote final.h5"
release_requeued "$job"
wait_job_done "$job" "$WORK/run/final.h5"
state=$(job_field "$job" JobState)
[[ -z "$state" || "$state" == COMPLETED || "$state" == COMPLETING ]] || fail "job state $state"
grep -q "restart 1:" "$WORK/job.out" || fail "the second run is not restart 1"
step=$(sed -nE 's/.*checkpoint of step ([0-9]+) written.*/\1/p' "$WORK/job.out" | head -1)
grep -q "resuming from .*ckpt-0*$step.h5" "$WORK/job.out" || fail "the requeued job did not resume from step $step"
((step < epochs * 156)) || fail "the signal came after the run ended (step $step): nothing was tested"
echo "ok: preempted at step $step, requeued, resumed; job done $((SECONDS - t_signal)) s after the signal"

# shellcheck disable=SC2086
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$MIRRORED" train $common --threads 1 \
  --out "$WORK/uninterrupted" --quiet >/dev/null
"$COMPARE" "$WORK/uninterrupted/final.h5" "$WORK/run/final.h5" --exact
echo "slurm_preempt: ok in $((SECONDS - start)) s"
