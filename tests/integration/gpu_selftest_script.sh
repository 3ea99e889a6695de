#!/usr/bin/env bash
# launch/gpu_selftest.sh without a GPU, and its step runner (launch/selftest_lib.sh):
#  - no nvidia-smi, or an nvidia-smi that lists no GPU: exit 3 at once with the self-test's
#    own "no GPU" message and a summary, before anything else;
#  - the runner: every step under its own timeout, the next step runs after one that failed
#    or timed out, and the summary lists each step's result, seconds and notes, and the
#    build's share of the total;
#  - the overall deadline: a step made slow on purpose is cut where the deadline falls, the
#    steps after it are NOT-RUN saying so, and the summary prints, well inside the deadline
#    plus a few seconds; the same through gpu_selftest.sh itself (fake programs);
#  - $OUT: the summary, the console output and every log (one archive) land there;
#  - SIGTERM in the middle of a step: the step is ended, the summary prints and is in $OUT;
#  - a GPU machine whose bundle is not a bundle, or whose build fails: every later step is
#    reported as not run, exit 1.
source "$(dirname "$0")/lib.sh"
src=${SOURCE_DIR:?SOURCE_DIR must point at the source tree}
selftest=$src/launch/gpu_selftest.sh
export TMPDIR=$WORK   # the self-test's log folders go with the test's

# 1. No nvidia-smi at all.
if ! command -v nvidia-smi >/dev/null; then
  start=$SECONDS status=0
  timeout 60 "$selftest" "$WORK/build-none" >"$WORK/none.out" 2>&1 || status=$?
  cat "$WORK/none.out"
  [[ $status -eq 3 ]] || fail "without nvidia-smi: exit $status (expected 3)"
  grep -q 'gpu_selftest: no GPU on this machine: no nvidia-smi on PATH' "$WORK/none.out" || fail "without nvidia-smi: no 'no GPU' message"
  grep -qE '^  FAIL +gpu ' "$WORK/none.out" || fail "without nvidia-smi: the summary lacks the failed gpu step"
  grep -q 'RESULT: FAIL' "$WORK/none.out" || fail "without nvidia-smi: the summary does not say FAIL"
  [[ ! -e "$WORK/build-none" ]] || fail "without nvidia-smi: a build was started"
  echo "ok: no nvidia-smi: exit 3 with its own message in $((SECONDS - start)) s, nothing built"
else
  echo "ok: (nvidia-smi is installed here: the no-nvidia-smi case is left out)"
fi

# 2. An nvidia-smi that finds no GPU (a driver without devices, a container without them).
mkdir -p "$WORK/fake-none" "$WORK/fake-one"
printf '#!/bin/sh\necho "No devices were found"\nexit 6\n' >"$WORK/fake-none/nvidia-smi"
chmod +x "$WORK/fake-none/nvidia-smi"
status=0
PATH=$WORK/fake-none:$PATH timeout 60 "$selftest" "$WORK/build-none" >"$WORK/nodev.out" 2>&1 || status=$?
cat "$WORK/nodev.out"
[[ $status -eq 3 ]] || fail "nvidia-smi listing no GPU: exit $status (expected 3)"
grep -q 'no GPU on this machine: nvidia-smi lists no GPU: No devices were found' "$WORK/nodev.out" ||
  fail "nvidia-smi listing no GPU: the message does not say so"
echo "ok: nvidia-smi listing no GPU: exit 3 with its own message"

# 3. The runner: a passing, a failing, a hanging and another passing step.
cat >"$WORK/runner.sh" <<RUNNER
source "$src/launch/selftest_lib.sh"
selftest_init "$WORK/runner-logs"
run_step first 20 bash -c 'source "$src/launch/selftest_lib.sh"; note "first: fine"'
run_step build 20 bash -c 'sleep 1; source "$src/launch/selftest_lib.sh"; note "built"'
run_step broken 20 bash -c 'source "$src/launch/selftest_lib.sh"; note "broken: gave up"; exit 4'
run_step hangs 2 bash -c 'sleep 60 & wait'
run_step last 20 bash -c 'echo output for the log; source "$src/launch/selftest_lib.sh"; note "last: fine"'
not_run never "an earlier step failed"
print_summary
exit \$SELFTEST_STATUS
RUNNER
start=$SECONDS status=0
bash "$WORK/runner.sh" >"$WORK/runner.out" 2>&1 || status=$?
took=$((SECONDS - start))
cat "$WORK/runner.out"
[[ $status -eq 1 ]] || fail "runner: exit $status with failed steps (expected 1)"
((took < 20)) || fail "runner: took $took s: the hanging step was not stopped at its 2 s limit"
summary=$(sed -n '/==== gpu_selftest summary/,$p' "$WORK/runner.out")
for expected in 'PASS +first ' 'first: fine' 'PASS +build ' 'FAIL +broken .* s +\(exit 4\)' 'broken: gave up' \
                'TIMEOUT +hangs .* s +after 2 s' 'PASS +last ' 'last: fine' 'NOT-RUN +never ' 'an earlier step failed' \
                'build: [0-9]+ s of [0-9]+ s \([0-9]+%\)' 'RESULT: FAIL'; do
  grep -qE -- "$expected" <<<"$summary" || fail "runner: the summary lacks /$expected/"
done
order=$(grep -oE '^  [A-Z-]+ +[a-z]+ ' <<<"$summary" | awk '{print $2}' | paste -sd' ')
[[ "$order" == "first build broken hangs last never" ]] || fail "runner: steps in the summary: '$order'"
grep -q 'output for the log' "$WORK/runner-logs/last.log" || fail "runner: a step's output is not in its log"
echo "ok: runner: a failed and a timed-out step (stopped after $took s in all) did not stop the steps after them; the summary lists all six"

# 4. The deadline in the runner: a 60 s step under a 5 s deadline is cut at the deadline, the
#    step after it is not started, and the summary says both.
cat >"$WORK/deadline.sh" <<RUNNER
source "$src/launch/selftest_lib.sh"
selftest_init "$WORK/deadline-logs" 5
run_step quick 20 bash -c 'source "$src/launch/selftest_lib.sh"; note "quick: fine"'
run_step slow 60 bash -c 'sleep 60 & wait'
run_step after 20 bash -c 'echo never'
print_summary
exit \$SELFTEST_STATUS
RUNNER
start=$SECONDS status=0
bash "$WORK/deadline.sh" >"$WORK/deadline.out" 2>&1 || status=$?
took=$((SECONDS - start))
cat "$WORK/deadline.out"
[[ $status -eq 1 ]] || fail "deadline: exit $status (expected 1)"
((took < 15)) || fail "deadline: took $took s with a 5 s deadline"
summary=$(sed -n '/==== gpu_selftest summary/,$p' "$WORK/deadline.out")
for expected in 'PASS +quick ' 'TIMEOUT +slow .* s +after [0-9] s \(the deadline\)' 'NOT-RUN +after ' \
                "not started: the self-test's deadline of 5 s was reached" 'RESULT: FAIL'; do
  grep -qE -- "$expected" <<<"$summary" || fail "deadline: the summary lacks /$expected/"
done
[[ ! -s "$WORK/deadline-logs/after.log" ]] || fail "deadline: the step after the deadline ran"
echo "ok: the runner's deadline: the slow step cut at it, the next NOT-RUN, the summary after $took s"

# 5. The same through gpu_selftest.sh on a "GPU machine" (a fake nvidia-smi) with fake
#    programs in WORK_DIR: `mirrored info` answers at once, the GPU unit tests hang. Under an
#    8 s deadline the unit step is cut, every later step is NOT-RUN, the summary prints, and
#    $OUT holds the summary, the console output and the logs.
printf '#!/bin/sh\ncase "$1" in -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)";; *) echo "NVIDIA H200, 570.00, 9.0, 143771 MiB, Default";; esac\n' \
  >"$WORK/fake-one/nvidia-smi"
chmod +x "$WORK/fake-one/nvidia-smi"
fake=$WORK/fake-build
mkdir -p "$fake/tests"
printf '#!/bin/sh\nif [ "$1" = info ]; then echo "  cuda          built in (1 GPU(s) visible)"; echo "  cuda archs    cuda:0 sm_90: machine code"; fi\nexit 0\n' >"$fake/mirrored"
printf '#!/bin/sh\ncase "$*" in *--gtest_list_tests*) exit 0;; esac\nexec sleep 67\n' >"$fake/tests/unit_tests"
cp "$fake/tests/unit_tests" "$fake/tests/mpi_tests"
chmod +x "$fake/mirrored" "$fake"/tests/*
start=$SECONDS status=0
PATH=$WORK/fake-one:$PATH OUT=$WORK/out timeout 60 "$selftest" --deadline 8 "$fake" >"$WORK/slow.out" 2>&1 || status=$?
took=$((SECONDS - start))
cat "$WORK/slow.out"
[[ $status -eq 1 ]] || fail "self-test deadline: exit $status (expected 1)"
((took < 25)) || fail "self-test deadline: took $took s with an 8 s deadline"
grep -qE '^  PASS +device ' "$WORK/slow.out" || fail "self-test deadline: the fake device step did not pass"
grep -qE '^  TIMEOUT +unit .*\(the deadline\)' "$WORK/slow.out" || fail "self-test deadline: the unit step was not cut at the deadline"
for step in nccl data gpt cnn prefetcher bench_allreduce errors throughput; do
  grep -qE "^  NOT-RUN +$step " "$WORK/slow.out" || fail "self-test deadline: step $step is not reported as not run"
done
[[ $(grep -c "not started: the self-test's deadline of 8 s" "$WORK/slow.out") -ge 8 ]] ||
  fail "self-test deadline: the deadline is not given as the reason"
grep -q 'RESULT: FAIL' "$WORK/slow.out" || fail "self-test deadline: no RESULT line"
for f in gpu_selftest_summary.txt gpu_selftest_console.txt gpu_selftest_logs.tar.gz; do
  [[ -s "$WORK/out/$f" ]] || fail "\$OUT: $f missing"
done
[[ $(ls "$WORK/out" | wc -l) -le 8 ]] || fail "\$OUT holds more than 8 files"
grep -qE '^  NOT-RUN +throughput ' "$WORK/out/gpu_selftest_summary.txt" || fail "\$OUT: the summary is not the final one"
grep -q 'RESULT: FAIL' "$WORK/out/gpu_selftest_console.txt" || fail "\$OUT: the console output lacks the summary"
tar -tzf "$WORK/out/gpu_selftest_logs.tar.gz" | grep -qx './unit.log' || fail "\$OUT: the logs archive lacks unit.log"
echo "ok: gpu_selftest.sh under an 8 s deadline: unit cut, 8 steps NOT-RUN, summary after $took s; \$OUT holds $(ls "$WORK/out" | paste -sd' ')"

# 6. SIGTERM while a step runs: the step is ended, the summary says so and is in $OUT.
rm -rf "$WORK/out-term"
PATH=$WORK/fake-one:$PATH OUT=$WORK/out-term "$selftest" --deadline 100 "$fake" >"$WORK/term.out" 2>&1 &
job=$!
for _ in $(seq 100); do grep -q -- '---- unit' "$WORK/term.out" 2>/dev/null && break; sleep 0.1; done
sleep 1
start=$SECONDS status=0
kill -TERM "$job"
wait "$job" || status=$?
cat "$WORK/term.out"
[[ $status -ne 0 ]] || fail "SIGTERM: exit 0"
((SECONDS - start < 15)) || fail "SIGTERM: the self-test took $((SECONDS - start)) s to stop"
grep -qE '^  INTERRUPTED +unit ' "$WORK/term.out" || fail "SIGTERM: the running step is not reported as interrupted"
grep -q 'summary (interrupted by SIGTERM)' "$WORK/out-term/gpu_selftest_summary.txt" || fail "SIGTERM: \$OUT lacks the summary"
sleep 1
! pgrep -x -f "sleep 67" >/dev/null || fail "SIGTERM: the step's process lives on"
echo "ok: SIGTERM during the unit step: it was ended, the summary printed and is in \$OUT"

# 7. A GPU machine whose bundle folder is no bundle, and one whose build fails at once:
#    every later step is reported as not run, exit 1.
mkdir -p "$WORK/not-a-bundle"
status=0
PATH=$WORK/fake-one:$PATH timeout 60 "$selftest" --bundle "$WORK/not-a-bundle" "$WORK/work-nb" >"$WORK/nobundle.out" 2>&1 || status=$?
cat "$WORK/nobundle.out"
[[ $status -eq 1 ]] || fail "no bundle: exit $status (expected 1)"
grep -qE '^  FAIL +bundle ' "$WORK/nobundle.out" || fail "no bundle: the bundle step is not a failure"
grep -q 'has no payload.tar.xz and manifest.txt' "$WORK/nobundle.out" || fail "no bundle: the reason is not given"
[[ $(grep -c "the bundle step did not pass" "$WORK/nobundle.out") -ge 10 ]] || fail "no bundle: the later steps are not reported as not run"
echo "ok: a folder that is no bundle: the ten later steps reported as not run, exit 1"
: >"$WORK/not-a-folder"
status=0
PATH=$WORK/fake-one:$PATH timeout 120 "$selftest" --build "$WORK/not-a-folder" >"$WORK/nobuild.out" 2>&1 || status=$?
cat "$WORK/nobuild.out"
[[ $status -eq 1 ]] || fail "failed build: exit $status (expected 1)"
grep -qE '^  PASS +gpu .*' "$WORK/nobuild.out" || fail "failed build: the gpu step did not pass with a GPU listed"
grep -q 'nvidia-smi: 1 GPU(s); NVIDIA H200' "$WORK/nobuild.out" || fail "failed build: the GPU is not named"
grep -qE '^  FAIL +build ' "$WORK/nobuild.out" || fail "failed build: the build step is not a failure"
for step in device unit nccl data gpt cnn prefetcher bench_allreduce errors throughput; do
  grep -qE "^  NOT-RUN +$step " "$WORK/nobuild.out" || fail "failed build: step $step is not reported as not run"
done
grep -qE '^  build: [0-9]+ s of [0-9]+ s \([0-9]+%\)' "$WORK/nobuild.out" || fail "failed build: no build share"
[[ $(grep -c "the build step did not pass" "$WORK/nobuild.out") -ge 10 ]] || fail "failed build: the reason is not given for each step"
echo "ok: a failed build: the ten later steps reported as not run, exit 1"
