"""Reads a TensorBoard log directory with TensorBoard's own loader and checks every scalar
against metrics.jsonl (float32 in the event file, so a relative tolerance of 1e-6).
usage: check_tensorboard.py LOGDIR METRICS_JSONL"""
import glob
import json
import math
import sys

from tensorboard.backend.event_processing import event_accumulator, event_file_loader

logdir, metrics_path = sys.argv[1], sys.argv[2]
# The raw records first: TFRecord framing with valid CRCs, and the version record leading.
path = glob.glob(f"{logdir}/events.out.tfevents.*")[0]
events = list(event_file_loader.LegacyEventFileLoader(path).Load())
if events[0].file_version != "brain.Event:2":
    sys.exit(f"FAIL: first record has file_version {events[0].file_version!r}")
if len(events) < 2 or any(not e.summary.value for e in events[1:]):
    sys.exit("FAIL: records after the first must all carry summary values")

acc = event_accumulator.EventAccumulator(logdir, size_guidance={event_accumulator.SCALARS: 0})
acc.Reload()
records = [json.loads(line) for line in open(metrics_path)]

# jsonl field -> tensorboard tag, per record kind
expected = {
    "train": {"loss": "train/loss", "lr": "train/lr", "samples_per_sec": "train/samples_per_sec",
              "comm_ms": "train/comm_ms", "exposed_comm_ms": "train/exposed_comm_ms",
              "world_size": "train/world_size"},
    "eval": {"test_loss": "test/loss", "test_accuracy": "test/accuracy"},
}
# A language model's run: validation loss, perplexity and bits per byte, and tokens/s.
if any(r["kind"] == "eval" and "val_loss" in r for r in records):
    expected["train"]["tokens_per_sec"] = "train/tokens_per_sec"
    expected["eval"] = {"val_loss": "val/loss", "perplexity": "val/perplexity", "bits_per_byte": "val/bits_per_byte"}
# Several ranks: the lowest straggler score at every log point, and each straggler's score.
if any(r["kind"] == "rank_scores" for r in records):
    expected["rank_scores"] = {"lowest": "straggler/lowest_score"}
for rank in sorted({r["rank"] for r in records if r["kind"] == "straggler"}):
    expected[("straggler", rank)] = {"score": f"straggler/rank{rank}"}
final_tag = next(iter(expected["eval"].values()))
tags = set(acc.Tags()["scalars"])
want_tags = {tag for fields in expected.values() for tag in fields.values()}
if tags != want_tags:
    sys.exit(f"FAIL: tags {sorted(tags)} != {sorted(want_tags)}")

checked = 0
for kind, fields in expected.items():
    rows = [r for r in records if (r["kind"], r.get("rank")) == kind or r["kind"] == kind]
    for field, tag in fields.items():
        events = acc.Scalars(tag)
        if [e.step for e in events] != [r["step"] for r in rows]:
            sys.exit(f"FAIL: {tag} steps {[e.step for e in events]} != metrics.jsonl {[r['step'] for r in rows]}")
        for event, row in zip(events, rows):
            if not math.isclose(event.value, row[field], rel_tol=1e-6, abs_tol=1e-9):
                sys.exit(f"FAIL: {tag} at step {event.step}: {event.value} != metrics.jsonl {field} {row[field]}")
            if event.wall_time < 1.6e9:
                sys.exit(f"FAIL: {tag} at step {event.step}: wall_time {event.wall_time}")
            checked += 1
if checked < 10:
    sys.exit(f"FAIL: only {checked} values compared")
print(f"ok: {checked} scalars over {len(tags)} tags match metrics.jsonl "
      f"(final {final_tag} {acc.Scalars(final_tag)[-1].value:.4f})")
