#!/usr/bin/env bash
# on_failure = shrink inside a Slurm job (a real one-node Slurm, 4 CPUs declared on this
# machine), sgd mlp, fast reduction, global batch 120 (divides over 4 and 3):
#   1. slurm/train-cpu.sbatch with on_failure = shrink and no MIRRORED_LAUNCHER: the script
#      launches mpirun --with-ft ulfm inside the allocation, saying so; rank 2 killed (kill -9)
#      after step 10: the job ends with exit 0 on 3 replicas, final.h5 written, a membership
#      record with world_size 3 naming rank 2, the status file removed, nothing left running;
#   2. the same with MIRRORED_LAUNCHER=srun: every rank refuses on_failure = shrink at
#      start-up (exit 2), naming srun and the way out;
#   3. why (the reason for 2, checked so that a Slurm that changes it shows up here): under
#      `srun --mpi=pmix --kill-on-bad-exit=0`, one rank killed makes Slurm's PMIx plugin kill
#      the whole step (its error handler: SIGKILL to every task), before any survivor could act.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_lib.sh"
require_data
require_slurm
require_ulfm
start=$SECONDS
export CPUS=4  # 4 tasks of 1 CPU on this machine's cores (local-cluster.sh declares them)
slurm_up
echo "slurm up in $((SECONDS - start)) s"
export MIRRORED_ROOT=$SOURCE_DIR
# The mlp recipe (the script defaults to the cnn): these runs test the script, in seconds.
export MIRRORED_CONFIG=$SOURCE_DIR/launch/configs/fmnist_mlp.ini
args="--data.train $DATA_DIR/train.h5 --data.test $DATA_DIR/test.h5 --batch_size 120 --epochs 1 --max_steps 60
      --model.hidden 256,128 --lr 0.05 --momentum 0.9 --seed 5 --log_every 5 --checkpoint.every_epochs 0
      --progress plain --on_failure shrink"

# 1. The default launch for on_failure = shrink: mpirun inside the allocation.
t0=$SECONDS out=$WORK/mpirun
MIRRORED_ARGS="$args --out $out" timeout -k 5 120 \
  sbatch --wait --quiet --ntasks 4 --output "$out.out" "$SOURCE_DIR/slurm/train-cpu.sbatch" &
job=$!
kill_rank_at_step "$out" 10 2 "$job"
status=0
wait "$job" || status=$?
((status == 0)) || { cat "$out.out"; fail "mpirun in the allocation, rank 2 killed: sbatch --wait exited $status"; }
grep -q "on_failure = shrink: launching with mpirun --with-ft ulfm inside the allocation" "$out.out" ||
  { cat "$out.out"; fail "the sbatch script did not say it chose mpirun"; }
grep -q "launcher: mpirun (Open MPI) inside Slurm job .*, 4 rank(s)" "$out.out" ||
  { cat "$out.out"; fail "the cluster table does not name mpirun inside the Slurm job"; }
[[ -s "$out/final.h5" ]] || { cat "$out.out"; fail "mpirun in the allocation: no final.h5"; }
membership=$(grep '"kind": "membership"' "$out/metrics.jsonl") || { cat "$out.out"; fail "no membership record"; }
grep -q '"world_size": 3, "lost": \[{"rank": 2, "host": "[^"]*"}\], "recovery_s": ' <<<"$membership" ||
  fail "membership record: $membership"
last_world_size "$out" 3
[[ -z "$(ls -A "$SOURCE_DIR"/.mirrored-exit-status.* 2>/dev/null)" ]] || fail "the exit status file was left behind"
no_leftovers "$out"
echo "ok: mpirun --with-ft ulfm in the allocation (chosen by the script), rank 2 killed after step 10: exit 0" \
     "in $((SECONDS - t0)) s, final.h5; $membership"

# 2. srun, asked for explicitly: refused at start-up.
t0=$SECONDS out=$WORK/srun status=0
MIRRORED_LAUNCHER=srun MIRRORED_ARGS="$args --out $out" timeout -k 5 60 \
  sbatch --wait --quiet --ntasks 4 --output "$out.out" "$SOURCE_DIR/slurm/train-cpu.sbatch" || status=$?
((status == 2)) || { cat "$out.out"; fail "shrink under srun: sbatch --wait exited $status, expected 2"; }
grep -q "on_failure = shrink cannot work under srun: Slurm's PMIx plugin kills the whole job step" "$out.out" ||
  { cat "$out.out"; fail "shrink under srun: no refusal naming srun"; }
[[ ! -e "$out/final.h5" ]] || fail "shrink under srun: a final.h5 exists"
echo "ok: on_failure = shrink under srun refused at start-up (exit 2, $((SECONDS - t0)) s)"

# 3. Why: Slurm kills the step when a rank dies, --kill-on-bad-exit=0 notwithstanding. The
# ranks train with on_failure = abort and a collective timeout far beyond the test, so only
# Slurm can end them early.
t0=$SECONDS out=$WORK/srun_abort
# shellcheck disable=SC2116,SC2086  # args's words on one line
cat >"$WORK/srun_abort.sh" <<EOF
#!/bin/bash
srun --mpi=pmix --kill-on-bad-exit=0 "$MIRRORED" train $(echo ${args% --on_failure shrink}) --on_failure abort \
  --collective_timeout_s 120 --threads 1 --out "$out"
EOF
timeout -k 5 90 sbatch --wait --quiet --ntasks 4 --output "$out.out" "$WORK/srun_abort.sh" &
job=$!
kill_rank_at_step "$out" 10 2 "$job"
killed_at=$SECONDS status=0
wait "$job" || status=$?
took=$((SECONDS - killed_at))
((status != 0 && took < 30)) || { cat "$out.out"; fail "srun, rank 2 killed: exit $status after $took s"; }
if grep -q "Error handler invoked" "$out.out" && grep -q "tasks 0-1,3: Killed" "$out.out"; then
  echo "ok (why srun is refused): srun --kill-on-bad-exit=0, rank 2 killed: Slurm's PMIx plugin killed the" \
       "step ($(grep -o "Error handler invoked[^,]*" "$out.out" | head -1); the survivors: tasks 0-1,3: Killed), exit $status, $took s"
else
  cat "$out.out"
  fail "srun --kill-on-bad-exit=0 no longer has Slurm kill the step when a rank dies: the srun refusal may be" \
       "lifted (docs/checkpoints-and-failures.md, \"What it needs\")"
fi
echo "slurm_shrink: ok in $((SECONDS - start)) s"
