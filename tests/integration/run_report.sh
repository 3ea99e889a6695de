#!/usr/bin/env bash
# `mirrored report RUN_DIR` on a real run: 2 ranks under on_failure = shrink, rank 1 killed
# after step 10, the survivor finishes (straggler.threshold 1 flags a rank at every log point,
# so the run has straggler records too). The page must parse as XML and as HTML, hold one SVG
# per chart (loss, throughput, world size), mark the membership event, show the straggler
# records and the lost rank, and reference nothing outside itself (no http(s)://, no src=).
# Then the errors: a run directory given as a symlink, a malformed metrics.jsonl line
# (exit 3 naming file:line), and a folder without metrics.jsonl (exit 2).
source "$(dirname "$0")/lib.sh"
require_data
info=$("$MIRRORED" info 2>/dev/null) || fail "mirrored info failed"
grep -q "^  ulfm  *available (" <<<"$info" ||
  { echo "SKIP: this binary has no ULFM (built against $(command -v mpirun)); launch/install_openmpi.sh + launch/build.sh"; exit 77; }
start=$SECONDS
out="$WORK/run"
timeout -k 5 60 mpirun --with-ft ulfm --allow-run-as-root --oversubscribe --bind-to none -np 2 "$MIRRORED" train \
  --data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5" --model mlp --model.hidden 512,512 --batch_size 128 \
  --epochs 1 --max_steps 200 --eval_every 50 --log_every 5 --threads 1 --checkpoint.every_epochs 0 --progress plain \
  --straggler.threshold 1 --straggler.window 1 --on_failure shrink --out "$out" >"$WORK/train.log" 2>&1 &
job=$!
kill_rank_at_step "$out" 10 1
status=0
wait "$job" || status=$?
((status == 0)) || { cat "$WORK/train.log"; fail "the shrink run exited $status"; }
grep -q '"kind": "membership"' "$out/metrics.jsonl" || { cat "$out/metrics.jsonl"; fail "no membership record"; }

"$MIRRORED" report "$out" >"$WORK/report.out" 2>&1 || { cat "$WORK/report.out"; fail "report exited $?"; }
cat "$WORK/report.out"
grep -q "report: wrote $out/report.html" "$WORK/report.out" || fail "report does not say where it wrote"
python3 - "$out/report.html" <<'EOF' || fail "report.html: see above"
import html.parser, re, sys, xml.etree.ElementTree as ET
text = open(sys.argv[1], encoding="utf-8").read()
assert text.startswith("<!DOCTYPE html>"), "no doctype"
root = ET.fromstring(text.split("\n", 1)[1])  # well-formed XML after the doctype
class Collect(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(); self.tags = []; self.attrs = []
    def handle_starttag(self, tag, attrs):
        self.tags.append(tag); self.attrs += [v or "" for _, v in attrs]
parser = Collect(); parser.feed(text); parser.close()
svgs = root.findall(".//svg")
titles = [s.find("title").text for s in svgs]
assert titles == ["Loss", "Throughput", "World size"], titles
assert parser.tags.count("svg") == 3, parser.tags.count("svg")
assert "script" not in parser.tags and "img" not in parser.tags and "link" not in parser.tags, "external content"
assert not re.search(r"https?://", text), "an http(s) reference"
assert not any(a.startswith(("http", "//")) for a in parser.attrs), "an external attribute"
world = svgs[2]
labels = [t.text for t in world.iter("text") if t.text and t.text.startswith("shrink")]
assert labels == ["shrink 2\u21921"], labels
assert "lost rank 1 (" in text, "the lost rank is not named"
assert "<h2>Straggler records</h2>\n<table>" in text, "no straggler table"
assert "2 replica(s) at the start, 1 at the end" in text, "header world size"
assert "mlp (hidden 512,512)" in text, "header model"
print("report.html: XML and HTML parse, 3 charts, membership event", labels[0])
EOF

ln -s "$out" "$WORK/link"
status=0; "$MIRRORED" report "$WORK/link" >"$WORK/link.out" 2>&1 || status=$?
((status == 2)) && grep -q "symbolic link" "$WORK/link.out" || { cat "$WORK/link.out"; fail "symlinked run directory: exit $status"; }
mkdir "$WORK/bad"
printf '{"kind": "train", "step": 1, "loss": 1, "samples_per_sec": 1, "world_size": 1}\n{"kind": "train", "step": 2,\n{}\n' \
  >"$WORK/bad/metrics.jsonl"
status=0; "$MIRRORED" report "$WORK/bad" >"$WORK/bad.out" 2>&1 || status=$?
((status == 3)) && grep -q "$WORK/bad/metrics.jsonl:2" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "malformed line: exit $status"; }
[[ ! -e "$WORK/bad/report.html" ]] || fail "a report was written from a malformed file"
mkdir "$WORK/none"
status=0; "$MIRRORED" report "$WORK/none" >"$WORK/none.out" 2>&1 || status=$?
((status == 2)) && grep -q "no metrics.jsonl" "$WORK/none.out" || { cat "$WORK/none.out"; fail "no metrics.jsonl: exit $status"; }
echo "ok: errors: symlink (2), malformed line named (3), not a run (2)"
echo "run_report: ok in $((SECONDS - start)) s"
