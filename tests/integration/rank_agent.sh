#!/usr/bin/env bash
# `mirrored rank-agent PROGRAM ARGS...`, the process Open MPI's daemon starts in a rank's place
# under on_failure = shrink (src/cli/rank_agent_command.cpp), with shell scripts as the rank:
#   1. the rank runs in a session of its own (out of the process group the daemon signals),
#      and the agent ends as the rank did: its exit status, or its signal;
#   2. signals sent to the agent reach the rank (USR1, a preemption warning; TERM, a job ended
#      on purpose);
#   3. while the rank holds ("h" on MIRRORED_RANK_AGENT_FD: its job lost ranks and shrank),
#      TERM, INT and HUP stay with the agent, USR1 still passes; after "r" TERM passes again;
#      a hold that comes within 150 ms after a TERM keeps that TERM too; an agent killed while
#      the rank holds leaves the rank running (it outlives the runtime).
source "$(dirname "$0")/lib.sh"

# agent SCRIPT: the agent with `bash -c SCRIPT` as its rank, in the background: AGENT.
agent() {
  "$MIRRORED" rank-agent bash -c "$1" &
  AGENT=$!
}
# wait_for_file FILE WHAT: until FILE exists (5 s at most).
wait_for_file() {
  wait_until 5 "$2: $1 to appear" test -e "$1"
}
# ended_with AGENT STATUS WHAT
ended_with() {
  local status=0
  wait "$1" || status=$?
  ((status == $2)) || fail "$3: the agent ended with $status, expected $2"
}

# 1. Session, exit status, signal.
agent "echo \$\$ \$(ps -o sid= -p \$\$) > '$WORK/ids'; exit 3"
ended_with "$AGENT" 3 "a rank that exits 3"
read -r rank_pid rank_sid <"$WORK/ids"
((rank_pid == rank_sid)) || fail "the rank (pid $rank_pid) is not the leader of its own session ($rank_sid)"
agent 'kill -9 $$'
ended_with "$AGENT" 137 "a rank killed by SIGKILL"
echo "ok: the rank leads its own session; the agent ends as the rank did (exit 3; SIGKILL: 137)"

# 2. Signals pass on.
agent "trap 'touch $WORK/usr1' USR1; touch $WORK/up1; while [[ ! -e $WORK/usr1 ]]; do sleep 0.05; done; exit 0"
wait_for_file "$WORK/up1" "USR1 rank"
kill -USR1 "$AGENT"
ended_with "$AGENT" 0 "USR1 passed on"
agent "touch $WORK/up2; exec sleep 60"
wait_for_file "$WORK/up2" "TERM rank"
kill -TERM "$AGENT"
ended_with "$AGENT" 143 "TERM passed on to a rank that does not catch it"
echo "ok: USR1 and TERM sent to the agent reach the rank"

# 3. Holding.
agent "trap 'touch $WORK/term' TERM; trap 'touch $WORK/usr1b' USR1
       printf h >&\$MIRRORED_RANK_AGENT_FD; touch $WORK/held
       while [[ ! -e $WORK/release ]]; do sleep 0.05; done
       printf r >&\$MIRRORED_RANK_AGENT_FD; touch $WORK/released
       while [[ ! -e $WORK/term ]]; do sleep 0.05; done; exit 4"
wait_for_file "$WORK/held" "holding rank"
sleep 0.2  # the agent reads the byte
kill -TERM "$AGENT"; kill -INT "$AGENT"; kill -HUP "$AGENT"; kill -USR1 "$AGENT"
wait_for_file "$WORK/usr1b" "USR1 while holding"
[[ ! -e "$WORK/term" ]] || fail "TERM reached a rank that holds"
kill -0 "$AGENT" || fail "the agent ended on TERM/INT/HUP while its rank holds"
touch "$WORK/release"
wait_for_file "$WORK/released" "released rank"
sleep 0.2
kill -TERM "$AGENT"
ended_with "$AGENT" 4 "TERM after the rank released"
echo "ok: while the rank holds, TERM, INT and HUP stay with the agent and USR1 passes; after release TERM passes"

# An ending signal waits 150 ms for the rank to hold (its shrink may be under way as the
# runtime's SIGTERM arrives): a hold that comes after the TERM, within that time, keeps it.
agent "trap 'touch $WORK/late_term' TERM; touch $WORK/up3
       while [[ ! -e $WORK/hold_now ]]; do sleep 0.01; done; printf h >&\$MIRRORED_RANK_AGENT_FD
       sleep 1; exit 5"
wait_for_file "$WORK/up3" "late-holding rank"
kill -TERM "$AGENT"
touch "$WORK/hold_now"
ended_with "$AGENT" 5 "a hold right after TERM"
[[ ! -e "$WORK/late_term" ]] || fail "a TERM followed within 150 ms by the rank's hold reached the rank"
echo "ok: a TERM the rank's hold follows within 150 ms stays with the agent"

agent "printf h >&\$MIRRORED_RANK_AGENT_FD; echo \$\$ > $WORK/orphan; exec sleep 60"
wait_for_file "$WORK/orphan" "orphan rank"
sleep 0.2
kill -KILL "$AGENT"
wait "$AGENT" 2>/dev/null || true
orphan=$(cat "$WORK/orphan")
sleep 0.2
kill -0 "$orphan" 2>/dev/null || fail "the rank did not outlive its agent while holding"
kill -KILL "$orphan"
echo "ok: a rank that holds outlives its agent's SIGKILL (the runtime's end)"
echo "rank_agent: ok"
