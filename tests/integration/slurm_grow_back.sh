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
info=$("$MIRRORED" info 2>/dev/null) || fail "mirrored info failed"
grep -q "^  ulfm  *available (" <<<"$info" ||
  { echo "SKIP: this binary has no ULFM (built against $(command -v mpirun)); launch/install_openmpi.sh + launch/build.sh"; exit 77; }
start=$SECONDS
export CPUS=4
slurm_up
export MIRRORED_ROOT=$SOURCE_DIR
export MIRRORED_CONFIG=$SOURCE_DIR/launch/configs/fmnist_mlp.ini  # the sgd mlp (the script defaults to the cnn)
common="--data.train $DATA_DIR/train.h5 --data.test $DATA_DIR/test.h5 --batch_size 128 --epochs 1 --max_steps 300
        --model.hidden 256,128 --lr 0.05 --momentum 0.9 --seed 5 --log_every 5 --checkpoint.every_epochs 0
        --progress plain --reduction invariant"
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    ((SECONDS < deadline)) || { cat "$WORK/job.out" 2>/dev/null; fail "timed out after $limit s waiting for $what"; }
    sleep 0.05
  done
}
out=$WORK/run
job=$(MIRRORED_ARGS="$common --on_failure shrink --out $out" sbatch --parsable --ntasks 4 --output "$WORK/job.out" \
        "$SOURCE_DIR/slurm/train-cpu.sbatch")
at_step_10() { grep -q '"kind": "train", "step": 10,' "$out/metrics.jsonl" 2>/dev/null; }
wait_for 120 "step 10" at_step_10
victim=""
for pid in $(pgrep -f -- "--out $out( |$)"); do
  grep -qz '^MIRRORED_RANK_AGENT_FD=' "/proc/$pid/environ" 2>/dev/null || continue
  if grep -qzE '^(PMIX_RANK|OMPI_COMM_WORLD_RANK)=2$' "/proc/$pid/environ"; then victim=$pid; fi
done
[[ -n "$victim" ]] || { cat "$WORK/job.out"; fail "rank 2 not found"; }
kill -9 "$victim"
shrunk() { grep -q '"kind": "membership"' "$out/metrics.jsonl" 2>/dev/null; }
wait_for 60 "the shrink" shrunk
scancel --signal=URG --batch "$job"
requeued() { [[ $(job_field "$job" JobState) == PENDING && $(job_field "$job" Restarts) == 1 ]]; }
wait_for 120 "the job to be requeued (PENDING, Restarts=1)" requeued
grep -q "the job asked to grow back to its full size (exit 11)" "$WORK/job.out" || { cat "$WORK/job.out"; fail "no exit 11"; }
echo "ok: SIGURG to the batch script: the shrunk job wrote a checkpoint, exited 11 and was requeued"
t_requeue=$SECONDS
expired() { ((SECONDS - t_requeue > 5)); }
wait_for 30 "the old credential to expire" expired  # as it.slurm_preempt
scontrol update JobId="$job" StartTime=now
finished() { [[ -s "$out/final.h5" ]] && [[ $(job_field "$job" JobState) != RUNNING ]]; }
wait_for 180 "the requeued job to finish" finished
grep -q "restart 1:" "$WORK/job.out" || { cat "$WORK/job.out"; fail "the second run is not restart 1"; }
grown=$(grep '"grown"' "$out/metrics.jsonl") || { cat "$WORK/job.out"; fail "no grown record"; }
grep -Eq '"world_size": 4, "lost": \[\], "grown": \[\{"from_world": 3, "to_world": 4, "downtime_s": [0-9.e+-]+, "trigger": "signal", "stopped_ms": [0-9]+, "first_step_ms": [0-9]+\}\]' <<<"$grown" ||
  fail "grown record: $grown"
# shellcheck disable=SC2086
mpirun_np 4 train $common --threads 1 --out "$WORK/uninterrupted" --quiet >/dev/null
"$COMPARE" "$WORK/uninterrupted/final.h5" "$out/final.h5" --exact ||
  fail "4 -> 3 -> 4 ranks under Slurm (reduction = invariant): not bit-identical to the uninterrupted run"
echo "ok: requeued at 4 ranks, resumed, final.h5 bit-identical; $(grep -o 'downtime [0-9.]* s' "$WORK/job.out" | tail -1) (queue included)"
echo "slurm_grow_back: ok in $((SECONDS - start)) s"
