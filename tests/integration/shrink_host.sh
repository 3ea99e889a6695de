#!/usr/bin/env bash
# on_failure = shrink across hosts: 2 network-namespace hosts x 2 ranks (launch/multinode.sh),
# sgd mlp, reduction = invariant (the survivors continue the uninterrupted run bit for bit), global
# batch 120 (divides over 4 and 2), 1,000 steps: part 2 needs survivors that outlive the runtime
# until PMIx tells them it is gone (about a second after mpirun exits; 990 steps on 2 ranks
# take 4 s or more), part 2b checks 60 steps, which end about when mpirun exits.
#   1. every rank of host h2 killed at once (kill -9, after step 10), its Open MPI daemon
#      (prted) left alive: the job exits 0 on the 2 ranks of h1 and soon (no wait for the
#      lost ranks in MPI_Finalize), final.h5 within 1e-5 of the uninterrupted 2x2 run, one
#      membership record with world_size 2 naming ranks 2 and 3, nothing left running on
#      either host;
#   2. every process of h2 killed at once, the daemon too (a whole node lost): Open MPI 5.0's
#      runtime (PRRTE 3.0) ends the job when it loses a daemon (it says so, and mpirun exits),
#      but h1's ranks, started through `mirrored rank-agent`, outlive it: the job finishes on
#      them with part 1's checks, launch/multinode.sh waits for them and shows their output
#      (the progress to step 1000), exits 0, and leaves no file and no process behind.
#      2b. the same with 60 steps: the survivors finish about when mpirun exits, often before
#      PMIx tells them that the runtime is gone; their output is shown all the same, and the
#      job ends within 5 s of the kill (under 1 s on a quiet machine).
#   3. both ranks of h2 stopped (SIGSTOP), its daemon alive: declared failed by the detector,
#      the job finishes on h1's 2 ranks; no survivor shares their host to end them, so
#      launch/multinode.sh ends mpirun (and them) after the grace; exit 0, nothing left.
#   4. a node crash, as a power loss or kernel panic looks from outside: h2's link cut at the
#      switch, then every process of h2 killed, so no socket closes and nothing tells
#      anyone; the shell that launched h2's daemon (nsrsh's, standing in for the ssh client,
#      which runs on the launching node and hears nothing either) is stopped, not killed.
#      collective_timeout_s = 8: MPI's failure detector declares both ranks within half of it
#      (2 s each; the watchdog would revoke at 8 s), the job goes on and finishes on h1's 2 ranks with
#      part 1's checks; mpirun, which would wait for h2's daemon for ever, is ended by
#      launch/multinode.sh once mirrored's chief has reported (MIRRORED_LAUNCHER_GRACE = 5 s);
#      the job exits 0 and nothing is left running.
#   5. 2 hosts x 1 rank, every process of h2 killed (as in 2): the one survivor, alone (no
#      watchdog thread), runs on without mpirun and still hears the launch script: a
#      preemption warning (SIGUSR1) sent to launch/multinode.sh reaches it through the
#      run-state directory's `signals` (MIRRORED_RUN_STATE_DIR); it writes a checkpoint, the
#      job exits 7 (preempted, requeue to resume) and nothing is left running. What a
#      neighbour could plant takes no effect: another user cannot create a file in the
#      run-state directory at all, and a symlink planted there (as root can) for the output
#      copy, and a signals file of another user asking for KILL and STOP, are refused.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
require_data
require_ulfm
require_netns
start=$SECONDS
netns_up 2
common=("${FMNIST_MLP_ARGS[@]}" --batch_size 120 --epochs 4 --max_steps 1000 --reduction invariant)
H1=${NETNS_PREFIX}h1 H2=${NETNS_PREFIX}h2

on_hosts 2 2 train "${common[@]}" --out "$WORK/full" >"$WORK/full.log" 2>&1 || { cat "$WORK/full.log"; fail "uninterrupted 2x2 run"; }

# host_killed_run NAME COMM: a 2x2 shrink run writing WORK/NAME whose h2 processes (only
# those named COMM, or all with COMM empty) are killed together after step 10. Sets STATUS
# and TOOK (seconds from the kill to the job's end).
host_killed_run() {
  local out=$WORK/$1 job victims t0
  on_hosts 2 2 train "${common[@]}" "${RUN_ARGS[@]}" --on_failure shrink --out "$out" >"$out.log" 2>&1 &
  job=$!
  wait_for_step "$out" 10 "$job"
  if [[ "$2" == mirrored ]]; then victims=$(host_ranks "$H2"); else victims=$(host_pids "$H2"); fi
  [[ $(host_ranks "$H2" | wc -l) == 2 ]] || fail "$1: h2 does not hold 2 ranks"
  t0=$(date +%s%N)
  # shellcheck disable=SC2086  # a list of pids
  kill -9 $victims
  STATUS=0
  wait "$job" || STATUS=$?
  TOOK=$(( ($(date +%s%N) - t0) / 1000000 ))
  TOOK="$((TOOK / 1000)).$(printf %03d $((TOOK % 1000)))"
}
RUN_ARGS=()
# survived NAME [FULL]: the checks of a run that lost h2's ranks and finished on h1's; FULL:
# the uninterrupted run it equals (WORK/full).
survived() {
  local out=$WORK/$1 membership
  [[ -s "$out/final.h5" ]] || { cat "$out.log"; fail "$1: no final.h5"; }
  "$COMPARE" "$WORK/${2:-full}/final.h5" "$out/final.h5" --rtol 1e-5 || fail "$1: parameters differ from the uninterrupted run's"
  membership=$(grep '"kind": "membership"' "$out/metrics.jsonl") || { cat "$out.log"; fail "$1: no membership record"; }
  grep -Eq "\"world_size\": 2, \"lost\": \[\{\"rank\": 2, \"host\": \"${NETNS_PREFIX}-h2\"\}, \{\"rank\": 3, \"host\": \"${NETNS_PREFIX}-h2\"\}\], \"recovery_s\": " <<<"$membership" ||
    { cat "$out.log"; fail "$1: membership record: $membership"; }
  last_world_size "$out" 2
  MEMBERSHIP=$membership
}

host_killed_run ranks mirrored
((STATUS == 0)) || { cat "$WORK/ranks.log"; fail "h2's ranks killed: the job exited $STATUS"; }
survived ranks
nothing_left_on_hosts "h2's ranks killed"
# MPI_Finalize must not wait for the lost ranks (it did for 30 s before async_mpi_finalize,
# on top of the 990 steps left, which take 4 s on a quiet machine and 15 s at a load of 10).
((${TOOK%.*} < 30)) || fail "h2's ranks killed: the job took $TOOK s to end after the kill"
echo "ok: both ranks of h2 killed after step 10 (its daemon alive): finished on h1's 2, exit 0, $TOOK s from the kill to the job's end; $MEMBERSHIP"

host_killed_run node ""
nothing_left_on_hosts "every process of h2 killed"
((STATUS == 0)) || { cat "$WORK/node.log"; fail "every process of h2 killed: the job exited $STATUS"; }
survived node
# Open MPI's runtime ended the job (mpirun exited); the survivors went on without it and the
# launch script waited for them, showing their output.
grep -Eq "lost communication with a remote daemon|A daemon failed to report back" "$WORK/node.log" ||
  { cat "$WORK/node.log"; fail "every process of h2 killed: the runtime did not end the job (the test no longer tests that)"; }
grep -q "ranks outlived it and go on without it" "$WORK/node.log" ||
  { cat "$WORK/node.log"; fail "every process of h2 killed: launch/multinode.sh did not say it waits for the survivors"; }
# shellcheck disable=SC2015  # fail when either is missing
grep -q "this rank goes on without it" "$WORK/node.log" && grep -qF "(1000/1000)" "$WORK/node.log" ||
  { cat "$WORK/node.log"; fail "every process of h2 killed: the survivors' output (progress to step 1000) was not shown"; }
state_dir=$(grep -ao "MIRRORED_RUN_STATE_DIR [^;]*;" "$WORK/node.log" | sed 's/MIRRORED_RUN_STATE_DIR \(.*\);/\1/')
[[ -n "$state_dir" && ! -e "$state_dir" ]] ||
  fail "every process of h2 killed: the run-state directory '$state_dir' was left behind"
echo "ok: every process of h2 killed, its daemon too: Open MPI's runtime ended the job, the survivors went on" \
     "without it and finished on h1's 2 ranks, exit 0, $TOOK s from the kill to the job's end; $MEMBERSHIP"
# Part 2b: as part 2 with 60 steps: the survivors' 50 steps take a fraction of a second after
# a recovery of about 0.1 s, so they finish about when mpirun exits, often before PMIx tells
# them the runtime is gone (then they never touch `alive`): the script still shows their
# output, and does not wait for a heartbeat that cannot come.
RUN_ARGS=(--max_steps 60)
on_hosts 2 2 train "${common[@]}" "${RUN_ARGS[@]}" --out "$WORK/full60" >"$WORK/full60.log" 2>&1 ||
  { cat "$WORK/full60.log"; fail "uninterrupted 2x2 run of 60 steps"; }
host_killed_run short ""
nothing_left_on_hosts "every process of h2 killed, 60 steps"
((STATUS == 0)) || { cat "$WORK/short.log"; fail "every process of h2 killed, 60 steps: the job exited $STATUS"; }
survived short full60
# shellcheck disable=SC2015  # fail when either is missing
grep -q "ranks outlived it and go on without it" "$WORK/short.log" && grep -qF "(60/60)" "$WORK/short.log" ||
  { cat "$WORK/short.log"; fail "every process of h2 killed, 60 steps: the survivors' output (to step 60) was not shown"; }
((${TOOK%.*} < 5)) || { cat "$WORK/short.log"; fail "every process of h2 killed, 60 steps: $TOOK s from the kill to the job's end"; }
echo "ok: every process of h2 killed, 60 steps: the survivors finished about when mpirun exited; their output" \
     "shown, exit 0, $TOOK s from the kill to the job's end"
RUN_ARGS=()
# Part 5 (before 4, which leaves h2 cut off): see the header.
out=$WORK/relay
long_run=() previous=""
for arg in "${common[@]}"; do  # common's run, 40 epochs of up to 20000 steps
  case "$previous" in --epochs) arg=40 ;; --max_steps) arg=20000 ;; esac
  long_run+=("$arg") previous=$arg
done
state=$WORK/relay-state
MIRRORED_RUN_STATE_DIR=$state on_hosts 2 1 train "${long_run[@]}" --on_failure shrink --out "$out" >"$out.log" 2>&1 &
job=$!
wait_for_step "$out" 10 "$job"
script=$(pgrep -o -f "launch/multinode.sh") || fail "relay: no launch/multinode.sh running"
[[ "$(stat -c '%U %a' "$state")" == "root 700" ]] || fail "relay: the run-state directory is $(stat -c '%U %a' "$state")"
! setpriv --reuid=65534 --regid=65534 --clear-groups touch "$state/signals" 2>/dev/null ||
  fail "relay: another user could create a file in the run-state directory"
echo precious >"$WORK/victim"
ln -s "$WORK/victim" "$state/output"  # as only root could: the output copy must not follow it
victims=$(host_pids "$H2")
# shellcheck disable=SC2086  # a list of pids
kill -9 $victims
wait_for "$out.log" "ranks outlived it and go on without it" "relay: mpirun's end" 15
survivor=$(host_ranks "$H1")
printf 'KILL\nSTOP\n9\n' >"$state/signals"
chown 65534:65534 "$state/signals"
sleep 1.5  # ten reads of the signals file by the survivor
# shellcheck disable=SC2015,SC2086  # fail when either is false; survivor is one pid or none
[[ -n "$survivor" ]] && kill -0 $survivor 2>/dev/null && [[ "$(ps -o stat= -p $survivor)" != T* ]] ||
  { cat "$out.log"; fail "relay: a signals file of another user took effect"; }
kill -USR1 "$script"
STATUS=0
wait "$job" || STATUS=$?
((STATUS == 7)) || { cat "$out.log"; fail "relay: the job exited $STATUS, expected 7 (preempted)"; }
# The survivor's own lines went to the output copy it refused to open through the symlink:
# the checkpoint is read from the directory.
step=$(find "$out/checkpoints" -name 'ckpt-*.h5' | sed -nE 's/.*ckpt-0*([0-9]+)\.h5$/\1/p' | sort -n | tail -1)
[[ -n "$step" && ! -e "$out/final.h5" ]] || { cat "$out.log"; fail "relay: no preemption checkpoint (or a final.h5)"; }
((step > 10 && step < 20000)) || fail "relay: the run ended before the signal (step $step): nothing was tested"
[[ "$(cat "$WORK/victim")" == precious ]] || fail "relay: the output copy was written through a planted symlink"
! grep -q precious "$out.log" || fail "relay: launch/multinode.sh showed a file through the planted symlink"
nothing_left_on_hosts "relay"
echo "ok: after h2 was lost and mpirun had exited, a preemption warning sent to launch/multinode.sh reached the" \
     "survivor: checkpoint of step $step on h1's rank, exit 7, nothing left; a planted output symlink and a" \
     "foreign signals file (KILL, STOP) took no effect"

# Parts 3 and 4: a shrink run writing WORK/NAME with collective_timeout_s = 8 and mpirun's
# grace 5 s, started in the background (JOB); returns after its step 10.
start_after_step10() {
  out=$WORK/$1
  MIRRORED_LAUNCHER_GRACE=5 on_hosts 2 2 train "${common[@]}" --on_failure shrink --collective_timeout_s 8 \
    --out "$out" >"$out.log" 2>&1 &
  JOB=$!
  wait_for_step "$out" 10 "$JOB"
}
# finished_without_h2 NAME WHAT: the job exited 0 with part 1's checks, launch/multinode.sh
# ended mpirun after the grace saying why, and nothing is left running. ENDED: when the job
# ended (date +%s%N).
finished_without_h2() {
  STATUS=0
  wait "$JOB" || STATUS=$?
  ENDED=$(date +%s%N)
  ((STATUS == 0)) || { cat "$out.log"; fail "$2: the job exited $STATUS"; }
  survived "$1"
  grep -q "is still running 5 s later, waiting for ranks the job lost" "$out.log" ||
    { cat "$out.log"; fail "$2: launch/multinode.sh did not say why it ended mpirun"; }
  nothing_left_on_hosts "$2"
}

# A host's ranks stopped: see the header (part 3).
start_after_step10 stopped
stopped=$(host_ranks "$H2")
[[ $(wc -w <<<"$stopped") == 2 ]] || { cat "$out.log"; fail "stopped: h2 does not hold 2 ranks"; }
t0=$SECONDS
# shellcheck disable=SC2086  # a list of pids
kill -STOP $stopped
finished_without_h2 stopped "h2's ranks stopped"
echo "ok: both ranks of h2 stopped: finished on h1's 2 ranks, exit 0, $((SECONDS - t0)) s after SIGSTOP" \
     "(mpirun's 5 s grace included), nothing left; $MEMBERSHIP"

# A crashed node: see the header (part 4).
start_after_step10 crash
shells=$(host_pids "$H2" sh) victims=""
for pid in $(host_pids "$H2"); do [[ " $shells " == *" $pid "* ]] || victims="$victims $pid"; done
[[ -n "$shells" && $(host_ranks "$H2" | wc -l) == 2 ]] || fail "crash: h2 does not hold 2 ranks and a launch shell"
t0=$(date +%s%N)
ip -n "${NETNS_PREFIX}sw" link set p2 down
# shellcheck disable=SC2086  # lists of pids
kill -STOP $shells
# shellcheck disable=SC2086
kill -9 $victims
# The survivors' first step after the recovery (the membership record): detection included.
records_at_least "$out" 1
WENT_ON=$(( ($(date +%s%N) - t0) / 1000000 ))
WENT_ON="$((WENT_ON / 1000)).$(printf %03d $((WENT_ON % 1000)))"
finished_without_h2 crash "node crash"
TOOK=$(( (ENDED - t0) / 1000 ))
TOOK="$((TOOK / 1000000)).$(printf %03d $((TOOK / 1000 % 1000)))"
echo "ok: h2 crashed (link cut, every process killed): went on within $WENT_ON s (detection included), finished on" \
     "h1's 2 ranks, exit 0, $TOOK s from the crash to the job's end (mpirun's 5 s grace included); $MEMBERSHIP"

netns_down
# shellcheck disable=SC2143  # grep -q in a pipe could end `ip` early (SIGPIPE fails the pipe)
[[ -z "$(ip netns list | grep "^${NETNS_PREFIX}")" ]] || fail "namespaces left behind"
echo "shrink_host: ok in $((SECONDS - start)) s"
