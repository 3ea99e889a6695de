#!/usr/bin/env bash
# The command line agrees with itself: --version; the top-level usage names every command
# and subcommand; `info` takes --help and refuses unknown flags and stray words like every
# other command (exit 2, naming the command); defaults print as written (0.05, not
# 0.050000000000000003); multi-word flags are spelled with underscores (--min_bytes like
# --max_steps), the old --min-bytes spelling still working with a deprecation warning;
# every shipped configuration passes --dry_run; an unknown key names the nearest ones; the
# launch scripts print their usage on a missing argument.
source "$(dirname "$0")/lib.sh"

version=$("$MIRRORED" --version)
[[ "$version" =~ ^mirrored\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "--version printed '$version'"
"$MIRRORED" info >"$WORK/info.txt" 2>&1
grep -qx "$version" "$WORK/info.txt" || { cat "$WORK/info.txt"; fail "--version and info disagree ($version)"; }
echo "ok: $version"

"$MIRRORED" --help >"$WORK/usage.txt"
for command in train eval generate export "data import-idx" "data import-images" "data import-text" "data inspect" info trace "bench allreduce" \
  "bench train" "bench layers" --version; do
  grep -qE "^  $command  " "$WORK/usage.txt" || { cat "$WORK/usage.txt"; fail "the usage does not list '$command'"; }
done
status=0
"$MIRRORED" >/dev/null 2>&1 || status=$?
((status == 2)) || fail "no command: exit $status, expected 2"
echo "ok: the usage lists every command"

"$MIRRORED" info --help >"$WORK/info_help.txt" || fail "info --help failed"
grep -q "usage: mirrored info" "$WORK/info_help.txt" || { cat "$WORK/info_help.txt"; fail "info --help prints no usage"; }
! grep -q "^  version " "$WORK/info_help.txt" || fail "info --help ran info"
expect_exit 2 info_unknown_flag "info: unrecognised option '--bogus' (mirrored info --help)" 30 1 info --bogus
expect_exit 2 info_stray_word "info: too many positional options" 30 1 info cluster
echo "ok: info --help, and unknown info flags are usage errors"

"$MIRRORED" train --help >"$WORK/train_help.txt"
grep -qE '^  --lr 0\.05 ' "$WORK/train_help.txt" || { grep -- '--lr ' "$WORK/train_help.txt"; fail "lr default not printed as 0.05"; }
! grep -qE '[0-9]\.[0-9]*0000000000[0-9]|[0-9]\.[0-9]*9999999999' "$WORK/train_help.txt" ||
  { grep -E '0000000000|9999999999' "$WORK/train_help.txt"; fail "a default is printed with float noise"; }
echo "ok: defaults print as written"

"$MIRRORED" bench allreduce --help >"$WORK/bench_help.txt"
grep -q -- "--min_bytes" "$WORK/bench_help.txt" && grep -q -- "--max_bytes" "$WORK/bench_help.txt" ||
  { cat "$WORK/bench_help.txt"; fail "bench allreduce --help lacks --min_bytes/--max_bytes"; }
! grep -q -- "--min-bytes" "$WORK/bench_help.txt" || fail "bench allreduce --help still shows --min-bytes"
mpirun_np 2 bench allreduce --min-bytes 4 --max-bytes 16 --iters 1 --warmup 0 >"$WORK/old.out" 2>&1 ||
  { cat "$WORK/old.out"; fail "the deprecated --min-bytes spelling no longer works"; }
[[ $(grep -c -- "--min-bytes is deprecated; use --min_bytes" "$WORK/old.out") -eq 1 ]] ||
  { cat "$WORK/old.out"; fail "no single deprecation warning for --min-bytes"; }
rows=$(grep -cE "^ +(4|8|16) +[0-9]+ +float" "$WORK/old.out" || true)
((rows % 3 == 0 && rows > 0)) && ! grep -qE "^ +32 +8 +float" "$WORK/old.out" ||
  { cat "$WORK/old.out"; fail "the deprecated flags did not set the sizes 4..16 (rows: $rows)"; }
expect_exit 2 both_spellings "--min_bytes and --min-bytes given together" 30 1 bench allreduce --min_bytes 8 --min-bytes 4
echo "ok: --min_bytes/--max_bytes, the old spelling accepted with a warning"

# Every shipped configuration passes the checks (--dry_run: no MPI, no data, no training),
# and gpt2_small.ini is GPT-2 small with llm.c's GPT-2 124M schedule.
for config in "$SOURCE_DIR"/launch/configs/*.ini; do
  (cd "$WORK" && "$MIRRORED" train --config "$config" --dry_run) >"$WORK/dry.out" 2>&1 ||
    { cat "$WORK/dry.out"; fail "$config does not pass train --dry_run"; }
done
(cd "$WORK" && "$MIRRORED" train --config "$SOURCE_DIR/launch/configs/gpt2_small.ini" --dry_run) >"$WORK/gpt2.out"
for line in "model = gpt" "layers = 12" "heads = 12" "width = 768" "context = 1024" "precision = bf16" \
            "optimizer = adamw" "lr = 6e-04" "lr_schedule = cosine" "lr_warmup_steps = 700" "lr_min = 0" \
            "weight_decay = 0.1" "grad_clip = 1" "beta1 = 0.9" "beta2 = 0.95" "batch_size = 64" "accumulate_steps = 8"; do
  grep -qxF "$line" "$WORK/gpt2.out" || { cat "$WORK/gpt2.out"; fail "gpt2_small.ini: no '$line'"; }
done
grep -qE "^run directory: runs/gpt2_small/run-[0-9a-f]{8} " "$WORK/gpt2.out" || { cat "$WORK/gpt2.out"; fail "no run directory line"; }
[[ ! -e "$WORK/runs" ]] || fail "--dry_run created a run directory"
echo "ok: every shipped configuration passes --dry_run; gpt2_small.ini is GPT-2 small on llm.c's schedule"

# A head wider than the attention supports is a configuration error naming both keys.
expect_exit 2 wide_head "gpt.width = 768 / gpt.heads = 3 is a head size of 256, above 128" 10 1 train \
  --config "$SOURCE_DIR/launch/configs/gpt2_small.ini" --gpt.heads 3 --dry_run
# An unknown key suggests the nearest ones, in one line.
expect_exit 2 learning_rate "unknown key '--learning_rate'; did you mean --lr?" 10 1 train --learning_rate 0.1
# mirrored's own lines only: Open MPI 4.1's mpirun adds a banner for a non-zero exit.
[[ $(grep -c '^mirrored: ' "$WORK/learning_rate.out") -eq 1 && $(awk 'length > 300' "$WORK/learning_rate.out" | wc -l) -eq 0 ]] ||
  { cat "$WORK/learning_rate.out"; fail "more than one line of error"; }

# The launch scripts print their usage when an argument is missing.
status=0; "$SOURCE_DIR/launch/local.sh" build/mirrored train >"$WORK/local.out" 2>&1 || status=$?
((status == 2)) && grep -q "usage: launch/local.sh NP PROGRAM" "$WORK/local.out" && ! grep -q "unbound variable" "$WORK/local.out" ||
  { cat "$WORK/local.out"; fail "launch/local.sh without NP: exit $status"; }
status=0; "$SOURCE_DIR/launch/multinode.sh" hosts build/mirrored train >"$WORK/multi.out" 2>&1 || status=$?
((status == 2)) && grep -q "usage: launch/multinode.sh" "$WORK/multi.out" || { cat "$WORK/multi.out"; fail "multinode.sh without NP"; }
status=0; "$SOURCE_DIR/launch/import_shakespeare.sh" --bep >"$WORK/imp.out" 2>&1 || status=$?
((status == 2)) && grep -q "unknown option '--bep'" "$WORK/imp.out" || { cat "$WORK/imp.out"; fail "import_shakespeare.sh --bep"; }
# --bpe first, the binary second: the subword folder, the binary taken as the binary.
status=0; SHAKESPEARE_DIR="$WORK/bpe" "$SOURCE_DIR/launch/import_shakespeare.sh" --bpe "$WORK/no-such-binary" \
  >"$WORK/bpe.out" 2>&1 || status=$?
grep -q "$WORK/no-such-binary not found" "$WORK/bpe.out" || { cat "$WORK/bpe.out"; fail "import_shakespeare.sh --bpe BINARY"; }
echo "ok: the launch scripts print usage on a missing argument; import_shakespeare.sh takes --bpe anywhere"
