#!/usr/bin/env bash
# on_failure = shrink (ULFM, Open MPI 5) on 4 local ranks, sgd mlp, fast reduction:
#   1. kill -9 of a worker mid-run: the job exits 0 on 3 replicas, final.h5 within 1e-5 of the
#      uninterrupted 4-rank run's after 60 steps, one membership record naming the lost rank,
#      world_size 3 in the later train records, nothing left running;
#   2. kill -9 of the chief (rank 0): the lowest survivor becomes chief and finishes the same
#      run directory (final.h5 within 1e-5, the membership record);
#   3. SIGSTOP of a worker: declared failed by the heartbeat detector at half of
#      collective_timeout_s, the run finishes on 3 and the stopped process is ended by the
#      survivor on its host, so mpirun ends and nothing is left behind;
#   4. shrink.min_replicas = 4: the survivors write the checkpoint of the last completed step
#      and exit 8; that checkpoint resumed at 4 ranks ends bit-identical to the uninterrupted run;
#   5. without `mpirun --with-ft ulfm`, on_failure = shrink is refused at start-up (exit 2);
#   6. the gpt recipe with reduction = invariant (6 virtual replicas: 2, 2, 1, 1 on 4 ranks,
#      2 each on 3): a killed worker, then a killed chief, and final.h5 is bit-identical to
#      the uninterrupted 4-rank run's; the same with the adamw state sharded (optimizer.shard,
#      grad_clip = 1 as in the recipe), whose lost shard comes back from its keeper (skipped
#      when the Shakespeare corpus is not imported);
#   7. sharded state, a rank and its keeper (the next rank) killed together: exit 8 naming
#      both, no checkpoint written after the failure.
# The global batch is 128: over 3 survivors the fast-mode shares are uneven (43, 43, 42), each
# replica's gradient and loss weighted by its share.
source "$(dirname "$0")/lib.sh"
require_data
require_ulfm
start=$SECONDS
common=("${FMNIST_MLP_ARGS[@]}" --batch_size 128 --max_steps 60)

# killed_run OUT VICTIM ARGS...: a 4-rank shrink job writing OUT (log OUT.log) whose rank
# VICTIM is killed after step 10; it must exit 0.
killed_run() {
  local out=$1 victim=$2 status=0 job
  shift 2
  ft_run 4 "$@" --on_failure shrink --out "$out" >"$out.log" 2>&1 &
  job=$!
  kill_rank_at_step "$out" 10 "$victim" "$job"
  wait "$job" || status=$?
  ((status == 0)) || { cat "$out.log"; fail "$out, killed rank $victim: the job exited $status"; }
}

ft_run 4 "${common[@]}" --out "$WORK/full" >"$WORK/full.log" 2>&1 || { cat "$WORK/full.log"; fail "uninterrupted run"; }

for victim in 2 0; do
  out="$WORK/killed$victim"
  killed_run "$out" "$victim" "${common[@]}"
  [[ -s "$out/final.h5" ]] || fail "killed rank $victim: no final.h5"
  "$COMPARE" "$WORK/full/final.h5" "$out/final.h5" --rtol 1e-5 ||
    fail "killed rank $victim: parameters differ from the uninterrupted run's"
  membership=$(grep '"kind": "membership"' "$out/metrics.jsonl") || { cat "$out/metrics.jsonl"; fail "no membership record"; }
  grep -q "\"world_size\": 3, \"lost\": \[{\"rank\": $victim, \"host\": \"[^\"]*\"}\], \"recovery_s\": " <<<"$membership" ||
    fail "membership record: $membership"
  [[ $(grep -c '"world_size": 3' "$out/ranks.jsonl") -eq 3 ]] || { cat "$out/ranks.jsonl"; fail "ranks.jsonl: not the 3 survivors"; }
  "$MIRRORED" info --ranks "$out" > "$WORK/info$victim.out" 2>&1 || { cat "$WORK/info$victim.out"; fail "info --ranks"; }
  grep -q "world size 3, lost \[{\"rank\": $victim," "$WORK/info$victim.out" ||
    { cat "$WORK/info$victim.out"; fail "info --ranks does not show the membership change"; }
  last_world_size "$out" 3
  grep -q "membership: 3 replica(s) after losing rank $victim" "$WORK/killed$victim.log" ||
    { cat "$WORK/killed$victim.log"; fail "no membership line on the progress output"; }
  no_leftovers "$out"
  echo "ok: rank $victim killed after step 10: finished on 3 replicas, exit 0; $membership"
done

out="$WORK/stopped"
ft_run 4 "${common[@]}" --on_failure shrink --collective_timeout_s 4 --out "$out" >"$WORK/stopped.log" 2>&1 &
job=$!
victim=$(signal_at_step "$out" 10 1 STOP "$job")
stopped_at=$SECONDS
status=0
wait "$job" || status=$?
((status == 0)) || { kill -9 "$victim" 2>/dev/null; cat "$WORK/stopped.log"; fail "stopped rank: the job exited $status"; }
"$COMPARE" "$WORK/full/final.h5" "$out/final.h5" --rtol 1e-5 || fail "stopped rank: parameters differ"
membership=$(grep '"kind": "membership"' "$out/metrics.jsonl") || fail "stopped rank: no membership record"
grep -q '"lost": \[{"rank": 1,' <<<"$membership" || fail "stopped rank: $membership"
grep -aq "rank 1 (pid $victim on .*) was still there, stopped or hung: ended it" "$WORK/stopped.log" ||
  { cat "$WORK/stopped.log"; fail "no survivor says it ended the stopped rank"; }
no_leftovers "$out"
echo "ok: rank 1 stopped: excluded, job ended $((SECONDS - stopped_at)) s after SIGSTOP with exit 0; $membership"

# Below shrink.min_replicas: exit 8 with the checkpoint of the last completed step, which a
# 4-rank resume continues bit-identically.
out="$WORK/minimum"
ft_run 4 "${common[@]}" --on_failure shrink --shrink.min_replicas 4 --out "$out" >"$WORK/minimum.log" 2>&1 &
job=$!
kill_rank_at_step "$out" 15 3 "$job"
status=0
wait "$job" || status=$?
((status == 8)) || { cat "$WORK/minimum.log"; fail "below min_replicas: exit $status, expected 8"; }
grep -q "fewer than shrink.min_replicas = 4" "$WORK/minimum.log" || { cat "$WORK/minimum.log"; fail "no min_replicas message"; }
ckpt=$(find "$out/checkpoints" -name 'ckpt-*.h5' | sort | tail -1)
[[ -s "$ckpt" ]] || fail "no checkpoint after falling below min_replicas"
no_leftovers "$out"
mpirun_np 4 train "${common[@]}" --out "$out" >"$WORK/resumed.log" 2>&1 || { cat "$WORK/resumed.log"; fail "resume at 4 ranks"; }
grep -q "resuming from '$ckpt'" "$WORK/resumed.log" || { cat "$WORK/resumed.log"; fail "did not resume from $ckpt"; }
"$COMPARE" "$WORK/full/final.h5" "$out/final.h5" --exact || fail "the resumed run is not bit-identical"
echo "ok: below min_replicas: exit 8, $(basename "$ckpt"), resumed at 4 ranks bit-identically"

# Without the launcher's switch, shrink is refused on every rank before training.
expect_exit 2 no_ft "launch it with \`mpirun --with-ft ulfm\`" 30 2 train "${common[@]}" --on_failure shrink \
  --out "$WORK/no_ft"
corpus=${SHAKESPEARE_DIR:-$SOURCE_DIR/data/shakespeare}
if [[ -s "$corpus/train.h5" && -s "$corpus/val.h5" ]]; then
  gpt=(--config "$SOURCE_DIR/launch/configs/shakespeare_gpt.ini" --data.train "$corpus/train.h5"
       --data.test "$corpus/val.h5" --max_steps 30 --eval_every 30 --eval_windows 120 --log_every 5
       --checkpoint.every_steps 0 --reduction invariant --threads 1 --progress plain)
  ft_run 4 "${gpt[@]}" --out "$WORK/gpt_full" >"$WORK/gpt_full.log" 2>&1 || { cat "$WORK/gpt_full.log"; fail "gpt run"; }
  for victim in 2 0; do
    out="$WORK/gpt_killed$victim"
    killed_run "$out" "$victim" "${gpt[@]}"
    "$COMPARE" "$WORK/gpt_full/final.h5" "$out/final.h5" --exact ||
      fail "gpt (reduction = invariant), killed rank $victim: not bit-identical to the uninterrupted run"
    no_leftovers "$out"
    echo "ok: gpt with reduction = invariant, rank $victim killed: final.h5 bit-identical to the uninterrupted run's"
  done
  out="$WORK/gpt_sharded_killed1"
  killed_run "$out" 1 "${gpt[@]}" --optimizer.shard true
  grep -q "optimizer shard is also kept by rank + 1" "$out.log" || { cat "$out.log"; fail "no shard-copy line"; }
  "$COMPARE" "$WORK/gpt_full/final.h5" "$out/final.h5" --exact ||
    fail "gpt sharded (adamw, clipping), killed rank 1: not bit-identical to the uninterrupted run"
  no_leftovers "$out"
  echo "ok: gpt with the adamw state sharded, rank 1 killed: its shard rebuilt from its keeper, final.h5 bit-identical"
else
  echo "note: the Shakespeare corpus is not imported in $corpus; the invariant gpt part is skipped"
fi

# Sharded state, a rank and its keeper lost at once: nothing can rebuild shard 1.
out="$WORK/both_holders"
ft_run 4 "${common[@]}" --optimizer.shard true --on_failure shrink --out "$out" >"$out.log" 2>&1 &
job=$!
wait_for_step "$out" 10 "$job"
owner=$(rank_process "$out" 1) keeper=$(rank_process "$out" 2)
[[ -n "$owner" && -n "$keeper" ]] || fail "ranks 1 and 2 of $out not found"
kill -9 "$owner" "$keeper"
status=0
wait "$job" || status=$?
((status == 8)) || { cat "$out.log"; fail "owner and keeper lost: exit $status, expected 8"; }
grep -q "lost both copies of sharded optimizer state: shard 1: its owner rank 1 (.*) and its keeper rank 2" "$out.log" ||
  { cat "$out.log"; fail "the error does not name shard 1's owner and keeper"; }
[[ -z "$(ls "$out/checkpoints/" 2>/dev/null)" ]] || fail "a checkpoint was written without a whole state"
no_leftovers "$out"
echo "ok: sharded, owner and keeper of shard 1 killed together: exit 8 naming them, nothing written"
echo "shrink_continue: ok in $((SECONDS - start)) s"
