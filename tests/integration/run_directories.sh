#!/usr/bin/env bash
# Run directories (docs/training.md#run-directories): a configuration's `out` is a folder of
# runs. A rerun with another result-changing value goes to a new folder beside the first and
# leaves it untouched; the same configuration finds its folder and resumes; a requeued Slurm
# job (the same SLURM_JOB_ID) finds slurm-<id> and resumes, on every rank; --out DIR on the
# command line is the run directory itself; --resume never clears the earlier run there,
# TensorBoard event files included; a failed start leaves no empty folder.
source "$(dirname "$0")/lib.sh"
require_data
unset SLURM_JOB_ID  # set again below where a Slurm job is what is tested
runs=$WORK/runs
printf 'out = %s\n[model]\nhidden = 16\n' "$runs" > "$WORK/small.ini"
common=(--config "$WORK/small.ini" --data.train "$DATA_DIR/test.h5" --data.test "$DATA_DIR/test.h5"
        --batch_size 64 --epochs 1 --seed 3 --threads 1 --checkpoint.every_steps 10 --progress plain)
# the folder a log's start-up line names
run_dir_of() { sed -nE 's/^.*run directory: ([^ ]+) \(.*/\1/p' "$1" | head -1; }

mpirun_np 2 train "${common[@]}" --lr 0.1 --max_steps 10 > "$WORK/a.log" 2>&1 || { cat "$WORK/a.log"; fail "run a"; }
a=$(run_dir_of "$WORK/a.log")
[[ "$a" =~ ^$runs/run-[0-9a-f]{8}$ ]] || { cat "$WORK/a.log"; fail "run a: no 'run directory: $runs/run-<hash>' line"; }
[[ -s "$a/final.h5" && -s "$a/config.ini" ]] || fail "run a wrote no final.h5/config.ini in $a"
sum_a=$(md5sum "$a/final.h5" "$a/metrics.jsonl" "$a/config.ini" "$a"/checkpoints/* | md5sum)
echo "ok: the first run went to $a"

# Another learning rate: a new folder, exit 0, the first run untouched.
mpirun_np 2 train "${common[@]}" --lr 0.2 --max_steps 10 > "$WORK/b.log" 2>&1 || { cat "$WORK/b.log"; fail "run b"; }
b=$(run_dir_of "$WORK/b.log")
[[ "$b" =~ ^$runs/run-[0-9a-f]{8}$ && "$b" != "$a" ]] || { cat "$WORK/b.log"; fail "run b went to '$b' (a: $a)"; }
[[ -s "$b/final.h5" ]] || fail "run b wrote no final.h5"
[[ "$(md5sum "$a/final.h5" "$a/metrics.jsonl" "$a/config.ini" "$a"/checkpoints/* | md5sum)" == "$sum_a" ]] ||
  fail "the run with another lr changed the first run's files"
echo "ok: --lr 0.2 went to $b beside it, the first run unchanged"

# The first configuration again, with more steps (operational): its folder, resumed.
"$MIRRORED" train "${common[@]}" --lr 0.1 --max_steps 20 > "$WORK/a2.log" 2>&1 || { cat "$WORK/a2.log"; fail "run a again"; }
[[ "$(run_dir_of "$WORK/a2.log")" == "$a" ]] || { cat "$WORK/a2.log"; fail "the same configuration went elsewhere"; }
grep -q "resuming from '$a/checkpoints/ckpt-000000010.h5'" "$WORK/a2.log" || { cat "$WORK/a2.log"; fail "did not resume"; }
echo "ok: the same configuration resumes in $a"

# Its config.ini, read back, finds the same run (finished: says so, exit 0).
"$MIRRORED" train --config "$a/config.ini" --max_steps 20 > "$WORK/a3.log" 2>&1 || { cat "$WORK/a3.log"; fail "config.ini rerun"; }
[[ "$(run_dir_of "$WORK/a3.log")" == "$a" ]] || { cat "$WORK/a3.log"; fail "the stored config.ini names another folder"; }
grep -q "this run is finished" "$WORK/a3.log" || { cat "$WORK/a3.log"; fail "the finished run was not recognised"; }
echo "ok: train --config RUN_DIR/config.ini finds the same run"

# A Slurm job and its requeue: slurm-<id>, every rank agreeing, resumed even with another lr.
SLURM_JOB_ID=777 mpirun_np 2 train "${common[@]}" --lr 0.1 --max_steps 10 > "$WORK/s.log" 2>&1 ||
  { cat "$WORK/s.log"; fail "slurm run"; }
[[ "$(run_dir_of "$WORK/s.log")" == "$runs/slurm-777" && -s "$runs/slurm-777/checkpoints/ckpt-000000010.h5" ]] ||
  { cat "$WORK/s.log"; fail "the Slurm job did not write $runs/slurm-777"; }
SLURM_JOB_ID=777 mpirun_np 2 train "${common[@]}" --lr 0.1 --max_steps 20 > "$WORK/s2.log" 2>&1 ||
  { cat "$WORK/s2.log"; fail "requeued slurm run"; }
grep -q "resuming from '$runs/slurm-777/checkpoints/ckpt-000000010.h5'" "$WORK/s2.log" ||
  { cat "$WORK/s2.log"; fail "the requeued job did not resume"; }
echo "ok: a requeued Slurm job resumes in $runs/slurm-777"

# --out on the command line: that folder itself.
"$MIRRORED" train "${common[@]}" --lr 0.1 --max_steps 10 --out "$WORK/mine" > "$WORK/o.log" 2>&1 ||
  { cat "$WORK/o.log"; fail "--out run"; }
[[ "$(run_dir_of "$WORK/o.log")" == "$WORK/mine" && -s "$WORK/mine/final.h5" ]] || { cat "$WORK/o.log"; fail "--out"; }
echo "ok: --out DIR is the run directory"

# --resume never: the earlier run in the folder goes, TensorBoard included.
[[ $(ls "$a/tensorboard" | wc -l) -ge 1 ]] || fail "run a has no TensorBoard events"
sleep 1  # a new event file's name holds the second it was created
"$MIRRORED" train "${common[@]}" --lr 0.1 --max_steps 10 --resume never > "$WORK/n.log" 2>&1 ||
  { cat "$WORK/n.log"; fail "--resume never"; }
grep -q "resume = never: removed the earlier run in '$a' (.*TensorBoard event file" "$WORK/n.log" ||
  { cat "$WORK/n.log"; fail "no message naming what was removed"; }
[[ $(ls "$a/tensorboard" | wc -l) -eq 1 ]] || { ls -l "$a/tensorboard"; fail "old TensorBoard event files remain"; }
! grep -q '"step": 20' "$a/metrics.jsonl" || fail "metrics.jsonl holds the earlier run's step 20"
[[ "$(ls "$a/checkpoints")" == "ckpt-000000010.h5" ]] || { ls "$a/checkpoints"; fail "old checkpoints remain"; }
echo "ok: --resume never cleared the earlier run: $(grep -o "removed the earlier run.*" "$WORK/n.log")"

# A start that fails (missing data) leaves no empty run directory behind.
before=$(ls "$runs" | wc -l)
expect_failure missing_data "nope.h5" 30 1 train "${common[@]}" --lr 0.5 --data.train "$WORK/nope.h5"
[[ $(ls "$runs" | wc -l) -eq $before ]] || { ls -l "$runs"; fail "the failed start left a run directory"; }
echo "ok: a failed start leaves no run directory"
