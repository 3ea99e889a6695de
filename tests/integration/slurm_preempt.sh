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

# wait_for SECONDS DESCRIPTION COMMAND...: poll every 0.1 s until COMMAND succeeds.
wait_for() {
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    ((SECONDS < deadline)) || { cat "$WORK/job.out" 2>/dev/null; fail "timed out after $limit s waiting for $what"; }
    sleep 0.1
  done
}

job=$(MIRRORED_ARGS="$common --out $WORK/run" sbatch --parsable --output "$WORK/job.out" \
        "$SOURCE_DIR/slurm/train-cpu.sbatch")
echo "submitted job $job"
started() {
  compgen -G "$WORK/run/checkpoints/ckpt-*.h5" >/dev/null && return 0
  case $(job_field "$job" JobState) in PENDING|RUNNING|CONFIGURING) return 1 ;; esac
  cat "$WORK/job.out"; fail "job $job ended before it was signalled"
}
wait_for 120 "the first checkpoint" started
scancel --signal=USR1 --batch "$job"
t_signal=$SECONDS

requeued() { [[ $(job_field "$job" JobState) == PENDING && $(job_field "$job" Restarts) == 1 ]]; }
wait_for 120 "the job to be requeued (PENDING, Restarts=1)" requeued
echo "ok: requeued $((SECONDS - t_signal)) s after the signal"
grep -q "checkpoint of step" "$WORK/job.out" || { cat "$WORK/job.out"; fail "no checkpoint message"; }
[[ ! -e "$WORK/run/final.h5" ]] || fail "the preempted run wrote final.h5"
# slurmd refuses the job's new credential until the old one expires (CRED_EXPIRE, 5 s in
# slurm/local-cluster.sh; Slurm holds a requeued job that long, 120 s by default). Past it,
# release the job at once instead of waiting for the scheduler's next pass.
t_requeue=$SECONDS
expired() { ((SECONDS - t_requeue > 5)); }
wait_for 30 "the old credential to expire" expired
scontrol update JobId="$job" StartTime=now

finished() { [[ -s "$WORK/run/final.h5" ]] && [[ $(job_field "$job" JobState) != RUNNING ]]; }
wait_for 180 "the requeued job to finish" finished
state=$(job_field "$job" JobState)
[[ -z "$state" || "$state" == COMPLETED || "$state" == COMPLETING ]] || { cat "$WORK/job.out"; fail "job state $state"; }
grep -q "restart 1:" "$WORK/job.out" || { cat "$WORK/job.out"; fail "the second run is not restart 1"; }
step=$(sed -nE 's/.*checkpoint of step ([0-9]+) written.*/\1/p' "$WORK/job.out" | head -1)
grep -q "resuming from .*ckpt-0*$step.h5" "$WORK/job.out" ||
  { cat "$WORK/job.out"; fail "the requeued job did not resume from step $step"; }
((step < epochs * 156)) || fail "the signal came after the run ended (step $step): nothing was tested"
echo "ok: preempted at step $step, requeued, resumed; job done $((SECONDS - t_signal)) s after the signal"

# shellcheck disable=SC2086
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$MIRRORED" train $common --threads 1 \
  --out "$WORK/uninterrupted" --quiet >/dev/null
"$COMPARE" "$WORK/uninterrupted/final.h5" "$WORK/run/final.h5" --exact
echo "slurm_preempt: ok in $((SECONDS - start)) s"
