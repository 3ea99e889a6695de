#!/usr/bin/env bash
# launch/gpu_selftest.sh without a GPU, and its step runner (launch/selftest_lib.sh):
#  - no nvidia-smi, or an nvidia-smi that lists no GPU: exit 3 at once with the self-test's
#    own "no GPU" message and a summary, before any build;
#  - the runner: every step under its own timeout, the next step runs after one that failed
#    or timed out, and the summary lists each step's result, seconds and notes, and the
#    build's share of the total;
#  - a GPU machine whose build fails: every later step is reported as not run, exit 1.
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

# 4. A GPU machine (a fake nvidia-smi listing one) whose build fails at once: every later step
#    is reported as not run, and the build's share is printed.
printf '#!/bin/sh\ncase "$1" in -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)";; *) echo "NVIDIA H200, 570.00, 9.0, 143771 MiB";; esac\n' \
  >"$WORK/fake-one/nvidia-smi"
chmod +x "$WORK/fake-one/nvidia-smi"
: >"$WORK/not-a-folder"
status=0
PATH=$WORK/fake-one:$PATH timeout 120 "$selftest" "$WORK/not-a-folder" >"$WORK/nobuild.out" 2>&1 || status=$?
cat "$WORK/nobuild.out"
[[ $status -eq 1 ]] || fail "failed build: exit $status (expected 1)"
grep -qE '^  PASS +gpu .*' "$WORK/nobuild.out" || fail "failed build: the gpu step did not pass with a GPU listed"
grep -q 'nvidia-smi: 1 GPU(s); NVIDIA H200' "$WORK/nobuild.out" || fail "failed build: the GPU is not named"
grep -qE '^  FAIL +build ' "$WORK/nobuild.out" || fail "failed build: the build step is not a failure"
for step in device unit prefetcher nccl bench_allreduce data cnn gpt throughput errors; do
  grep -qE "^  NOT-RUN +$step " "$WORK/nobuild.out" || fail "failed build: step $step is not reported as not run"
done
grep -qE '^  build: [0-9]+ s of [0-9]+ s \([0-9]+%\)' "$WORK/nobuild.out" || fail "failed build: no build share"
[[ $(grep -c "the build did not pass" "$WORK/nobuild.out") -ge 10 ]] || fail "failed build: the reason is not given for each step"
echo "ok: a failed build: the ten later steps reported as not run, exit 1"
