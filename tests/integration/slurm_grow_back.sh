#!/usr/bin/env bash
# Growing back under a real Slurm (one node, 4 CPUs declared): slurm/train-cpu.sbatch with 4
# tasks, sgd mlp, reduction = invariant, on_failure = shrink (mpirun --with-ft ulfm inside
# the allocation). Rank 2 killed after step 10: the job goes on with 3 replicas; then
# `scancel --signal=URG --batch JOB` (the documented signal): slurm/preemptible.sh passes it
# on through the run-state directory, the job writes a checkpoint and exits 11, the script
# requeues it, and the requeued job (released at once instead of after Slurm's hold) resumes
# at 4 ranks, finishes bit-identical to an uninterrupted 4-rank run and records the growth
# (trigger "signal", its downtime counting the time in the queue).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_lib.sh"
require_data
require_slurm
require_ulfm
start=$SECONDS
export CPUS=4
slurm_up
export MIRRORED_ROOT=$SOURCE_DIR
export MIRRORED_CONFIG=$SOURCE_DIR/launch/configs/fmnist_mlp.ini  # the sgd mlp (the script defaults to the cnn)
common="--data.train $DATA_DIR/train.h5 --data.test $DATA_DIR/test.h5 --batch_size 128 --epochs 1 --max_steps 300
        --model.hidden 256,128 --lr 0.05 --momentum 0.9 --seed 5 --log_every 5 --checkpoint.every_epochs 0
        --progress plain --reduction invariant"
out=$WORK/run
job=$(MIRRORED_ARGS="$common --on_failure shrink --out $out" sbatch --parsable --ntasks 4 --output "$WORK/job.out" \
        "$SOURCE_DIR/slurm/train-cpu.sbatch")
FAIL_SHOWS=$WORK/job.out
kill_rank_at_step "$out" 10 2
records_at_least "$out" 1
scancel --signal=URG --batch "$job"
wait_requeued "$job"
grep -q "the job asked to grow back to its full size (exit 11)" "$WORK/job.out" || fail "no exit 11"
echo "ok: SIGURG to the batch script: the shrunk job wrote a checkpoint, exited 11 and was requeued"
release_requeued "$job"
wait_job_done "$job" "$out/final.h5"
grep -q "restart 1:" "$WORK/job.out" || fail "the second run is not restart 1"
grown=$(grown_record "$out" 3 4 signal)
# shellcheck disable=SC2086
mpirun_np 4 train $common --threads 1 --out "$WORK/uninterrupted" --quiet >/dev/null
"$COMPARE" "$WORK/uninterrupted/final.h5" "$out/final.h5" --exact ||
  fail "4 -> 3 -> 4 ranks under Slurm (reduction = invariant): not bit-identical to the uninterrupted run"
# The step it grew back at, of 300: how much of the run the signal's way through Slurm took.
echo "ok: requeued at 4 ranks, resumed at step $(sed -E 's/.*"step": ([0-9]+),.*/\1/' <<<"$grown") of 300, final.h5" \
     "bit-identical; $(grep -a -o 'downtime [0-9.]* s' "$WORK/job.out" | tail -1) (queue included)"
echo "slurm_grow_back: ok in $((SECONDS - start)) s"
