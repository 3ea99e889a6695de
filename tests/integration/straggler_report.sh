#!/usr/bin/env bash
# Straggler report (train/straggler.h): two ranks bound to one core each, and rank 1 given
# half of its core's time: it is stopped for 20 ms of every 40 ms (SIGSTOP/SIGCONT), the
# effect of sharing the core with a busy loop at the same priority. (A real busy loop's
# effect depends on the rest of the machine's load: with per-session CPU groups, a loaded
# machine hands the group's extra share to the core with more runnable tasks.) metrics.jsonl
# gets {"kind": "straggler", ...} records naming rank 1 and never rank 0, the progress output
# warns, and `mirrored info --ranks` shows rank 1's records. The same run left alone records none.
source "$(dirname "$0")/lib.sh"
require_data
(( $(nproc) >= 2 )) || { echo "SKIP: needs 2 cores for 2 ranks bound to a core each"; exit 77; }
nice=()
nice -n -10 true 2>/dev/null && nice=(nice -n -10)  # other load at nice 0 takes little from the ranks
run() {  # run NAME [slow]: 2 ranks, rank r on core r
  local out="$WORK/$1" cycler="" steps=80
  # The slowed run gets more log points: the first straggler.window (3) are warm-up, and one
  # point where the stop/continue cycle happened to miss a busy stretch starts the count again.
  [[ "${2:-}" == slow ]] && steps=200
  "${nice[@]}" mpirun --allow-run-as-root --bind-to core --map-by core -np 2 "$MIRRORED" train \
    --data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --epochs 1 --max_steps "$steps" --batch_size 256 \
    --model.hidden 1024 --threads 1 --log_every 10 --progress plain --collective_timeout_s 60 --out "$out" \
    >"$WORK/$1.log" 2>&1 &
  local job=$!
  if [[ "${2:-}" == slow ]]; then
    local pid="" candidate
    for _ in $(seq 100); do
      for candidate in $(pgrep -f -- "--out $out"); do
        grep -qz '^OMPI_COMM_WORLD_RANK=1$' "/proc/$candidate/environ" 2>/dev/null && pid=$candidate
      done
      [[ -n "$pid" ]] && break
      sleep 0.05
    done
    [[ -n "$pid" ]] || { kill "$job"; fail "rank 1 not found"; }
    (while kill -STOP "$pid" 2>/dev/null; do sleep 0.02; kill -CONT "$pid" 2>/dev/null || break; sleep 0.02; done) &
    cycler=$!
  fi
  local status=0
  wait "$job" || status=$?
  if [[ -n "$cycler" ]]; then kill "$cycler" 2>/dev/null || true; wait "$cycler" 2>/dev/null || true; fi
  ((status == 0)) || { tail -20 "$WORK/$1.log"; fail "$1: training exited $status"; }
}
run slow slow
grep -q '"kind": "straggler", "step": [0-9]*, "rank": 1, "host": "[^"]*", "phase": "[a-z]*", "score": 0\.' \
  "$WORK/slow/metrics.jsonl" || { grep -E "rank_scores|straggler" "$WORK/slow/metrics.jsonl"; fail "no straggler record names rank 1"; }
! grep -q '"kind": "straggler", "step": [0-9]*, "rank": 0,' "$WORK/slow/metrics.jsonl" ||
  { grep straggler "$WORK/slow/metrics.jsonl"; fail "the fast rank 0 was recorded as a straggler"; }
grep -q "warning: straggler: rank 1 on " "$WORK/slow.log" || fail "no progress warning names rank 1"
"$MIRRORED" info --ranks "$WORK/slow" >"$WORK/slow.ranks" || fail "info --ranks exited $?"
cat "$WORK/slow.ranks"
grep -qE "^  1  .*  [1-9][0-9]*  [^ ]+$" "$WORK/slow.ranks" || fail "info --ranks shows no straggler records for rank 1"
run clean
if grep -q '"kind": "straggler"' "$WORK/clean/metrics.jsonl"; then
  grep -E "rank_scores|straggler" "$WORK/clean/metrics.jsonl"; fail "the run left alone recorded a straggler"
fi
[[ $(grep -c '"kind": "rank_scores"' "$WORK/clean/metrics.jsonl") -ge 7 ]] || fail "the clean run has no scores"
echo "PASS: the rank with half a core is reported as a straggler; the clean run reports none"
