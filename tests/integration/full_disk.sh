#!/usr/bin/env bash
# A full disk (a 4 MiB tmpfs, filled): the resume's rewrite of metrics.jsonl stops with exit 10
# and a clear message and keeps every record (it once lost them and went on); with room again
# the same command resumes. An export onto the full disk exits 10 too, its old file whole.
# Needs root (mount); skips with the reason otherwise.
source "$(dirname "$0")/lib.sh"
[[ $(id -u) -eq 0 ]] || { echo "SKIP: mounting a small tmpfs needs root"; exit 77; }
disk=$WORK/disk
mkdir -p "$disk"
mount -t tmpfs -o size=4m tmpfs "$disk" 2>"$WORK/mount.err" || { echo "SKIP: cannot mount a tmpfs: $(cat "$WORK/mount.err")"; exit 77; }
trap 'umount "$disk" 2>/dev/null; rm -rf "$WORK"' EXIT
"$MIRRORED" data import-text --out "$WORK/corpus" "${DOCS_TEXT[@]}" >/dev/null
run=(train --model gpt --gpt.layers 1 --gpt.heads 2 --gpt.width 16 --gpt.context 16 --batch_size 4 --threads 1
     --device cpu --data.train "$WORK/corpus/train.h5" --data.test "$WORK/corpus/val.h5" --progress plain
     --log_every 1 --eval_windows 8 --out "$disk/run")
"$MIRRORED" "${run[@]}" --max_steps 40 --checkpoint.every_steps 30 >"$WORK/first.out" 2>&1 ||
  { cat "$WORK/first.out"; fail "the first run failed"; }
# As if stopped after step 30's checkpoint.
rm "$disk/run/final.h5"
find "$disk/run/checkpoints" -name 'ckpt-*.h5' ! -name ckpt-000000030.h5 -delete
cp "$disk/run/metrics.jsonl" "$WORK/metrics.before"
# Full but for one page: config.ini's rewrite fits (its old page is freed as it is replaced),
# the rewrite of metrics.jsonl (30 records, more than a page) does not.
dd if=/dev/zero of="$disk/page" bs=4k count=1 >/dev/null 2>&1
dd if=/dev/zero of="$disk/fill" bs=4k >/dev/null 2>&1 || true
rm "$disk/page"

status=0
"$MIRRORED" "${run[@]}" --max_steps 50 --checkpoint.every_steps 0 >"$WORK/full.out" 2>&1 || status=$?
((status == 10)) || { cat "$WORK/full.out"; fail "resume on a full disk: exit $status, expected 10"; }
grep -q "cannot write '$disk/run/metrics.jsonl': .*No space left on device.*is unchanged" "$WORK/full.out" ||
  { cat "$WORK/full.out"; fail "resume on a full disk: no clear message"; }
cmp -s "$WORK/metrics.before" "$disk/run/metrics.jsonl" || fail "metrics.jsonl changed on a full disk"
[[ -z "$(find "$disk/run" -name '*.tmp.*')" ]] || fail "a temporary was left: $(find "$disk/run" -name '*.tmp.*')"
echo "ok: resume on a full disk: exit 10, every record of metrics.jsonl kept: $(grep -o "cannot write.*" "$WORK/full.out" | head -1)"

echo old >"$WORK/keep"
cp "$WORK/keep" "$disk/model.safetensors" 2>/dev/null || true
status=0
"$MIRRORED" export --checkpoint "$disk/run/checkpoints/ckpt-000000030.h5" --out "$disk/model.safetensors" \
  >"$WORK/export.out" 2>&1 || status=$?
((status == 10)) || { cat "$WORK/export.out"; fail "export onto a full disk: exit $status, expected 10"; }
echo "ok: export onto a full disk: exit 10: $(grep -o "cannot write.*" "$WORK/export.out" | head -1)"

rm "$disk/fill"
"$MIRRORED" "${run[@]}" --max_steps 50 --checkpoint.every_steps 0 >"$WORK/room.out" 2>&1 ||
  { cat "$WORK/room.out"; fail "with room again, the resume failed"; }
grep -q "resuming from .*ckpt-000000030.h5" "$WORK/room.out" || { cat "$WORK/room.out"; fail "did not resume"; }
steps=$(grep '"kind": "train"' "$disk/run/metrics.jsonl" | sed -E 's/.*"step": ([0-9]+),.*/\1/' | tr '\n' ' ')
[[ "$steps" == "$(seq -s ' ' 1 50) " ]] || fail "metrics.jsonl's train records after the resume: $steps"
echo "ok: with room again the same command resumed from step 30; train records 1 to 50, each once"
echo "full_disk: ok"
