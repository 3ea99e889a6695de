#!/usr/bin/env bash
# The command line agrees with itself: --version; the top-level usage names every command
# and subcommand; `info` takes --help and refuses unknown flags and stray words like every
# other command (exit 2, naming the command); defaults print as written (0.05, not
# 0.050000000000000003); multi-word flags are spelled with underscores (--min_bytes like
# --max_steps), the old --min-bytes spelling still working with a deprecation warning.
source "$(dirname "$0")/lib.sh"

version=$("$MIRRORED" --version)
[[ "$version" =~ ^mirrored\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "--version printed '$version'"
"$MIRRORED" info >"$WORK/info.txt" 2>&1
grep -qx "$version" "$WORK/info.txt" || { cat "$WORK/info.txt"; fail "--version and info disagree ($version)"; }
echo "ok: $version"

"$MIRRORED" --help >"$WORK/usage.txt"
for command in train eval generate export "data import-idx" "data import-text" "data inspect" info trace "bench allreduce" \
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
