#!/usr/bin/env bash
# `mirrored data import-text` on a folder of the forms public corpora ship in, made here from
# this repository's documentation (no download): .md files, .txt.gz (Python's gzip), .md.zst
# (the zstd tool) and a .jsonl.gz of records with the text under "text" and other fields
# around it. Checks that the folder gives the tokens of the same documents concatenated in
# one plain file (exact); that a symlink in the tree is skipped and counted; that a bad
# record, a truncated .gz and a truncated .zst are refused naming the file (and the line);
# and that the corpus written as shards (--shard_mb) trains the gpt recipe to the same
# final.h5, bit for bit, as the one-file import. Skips (77) without the zstd tool.
source "$(dirname "$0")/lib.sh"
command -v zstd >/dev/null || { echo "SKIP: no zstd command-line tool to make .zst inputs (apt-get install zstd)"; exit 77; }
command -v h5dump >/dev/null || { echo "SKIP: no h5dump to compare token arrays (apt-get install hdf5-tools)"; exit 77; }

# 1. The folder. Its walk order is the byte order of the relative paths.
corpus=$WORK/corpus
mkdir -p "$corpus/a" "$corpus/c/deeper"
docs=("${DOCS_TEXT[@]}")
python3 - "$corpus" "${docs[@]}" <<'EOF'
import gzip, json, pathlib, sys
root, docs = pathlib.Path(sys.argv[1]), [pathlib.Path(p) for p in sys.argv[2:]]
texts = [d.read_text(encoding="utf-8") for d in docs]
# a/: the first third as plain .md; c/deeper: the last third as .txt.gz, one file each.
third = len(texts) // 3
for i, text in enumerate(texts[:third]):
    (root / "a" / f"{i:02d}.md").write_text(text, encoding="utf-8")
with gzip.open(root / "b-records.jsonl.gz", "wt", encoding="utf-8") as out:
    for i, text in enumerate(texts[third:2 * third]):
        out.write(json.dumps({"id": i, "meta": {"source": str(docs[third + i].name), "tags": [1, None]},
                              "text": text}) + "\n")
        if i == 0:
            out.write("\n")  # a blank line: skipped
for i, text in enumerate(texts[2 * third:]):
    with gzip.open(root / "c" / "deeper" / f"{i:02d}.txt.gz", "wt", encoding="utf-8") as out:
        out.write(text)
# The plain concatenation in the walk's order: a/, b-records.jsonl.gz, c/deeper/, then
# c/zst.md.zst (the first document again, written below; 'd' < 'z').
plain = "".join(texts[:third]) + "".join(texts[third:2 * third]) + "".join(texts[2 * third:]) + texts[0]
(root.parent / "plain.txt").write_text(plain, encoding="utf-8")
EOF
# c/zst.md.zst: the first document again, zstd-compressed.
zstd -q -19 "${docs[0]}" -o "$corpus/c/zst.md.zst"
ln -s "${docs[0]}" "$corpus/a/link.md"
ln -s /etc "$corpus/etc"

"$MIRRORED" data import-text --field text --out "$WORK/walked" "$corpus" >"$WORK/walked.out" 2>&1 ||
  { cat "$WORK/walked.out"; fail "import-text of the folder failed"; }
cat "$WORK/walked.out"
"$MIRRORED" data import-text --out "$WORK/plain" "$WORK/plain.txt" >"$WORK/plain.out" 2>&1 ||
  { cat "$WORK/plain.out"; fail "import-text of the plain file failed"; }
for split in train val; do
  h5dump -b LE -d /tokens -o "$WORK/walked_$split.bin" "$WORK/walked/$split.h5" >/dev/null
  h5dump -b LE -d /tokens -o "$WORK/plain_$split.bin" "$WORK/plain/$split.h5" >/dev/null
  [[ -s "$WORK/plain_$split.bin" ]] || fail "empty $split split"
  cmp "$WORK/walked_$split.bin" "$WORK/plain_$split.bin" || fail "the folder's $split tokens differ from the plain file's"
done
grep -qF "2 skipped: 2 a symlink ($corpus/a/link.md, $corpus/etc)" "$WORK/walked.out" ||
  fail "the symlinks were not counted and named"
grep -qE "imported in [0-9.]+ s: [0-9.]+ MB/s of text, [0-9.]+ MB/s from disk, [0-9]+ tokens/s" "$WORK/walked.out" ||
  fail "no rate line"
echo "ok: .md + .jsonl.gz + .zst + .txt.gz folder gives the plain concatenation's tokens; symlinks skipped"

# The same with SentencePiece pieces (a model trained on the plain file, then given to both).
if "$MIRRORED" data import-text --tokenizer sentencepiece --vocab_size 500 --out "$WORK/bpe" "$WORK/plain.txt" \
     >"$WORK/bpe.out" 2>&1; then
  "$MIRRORED" data import-text --tokenizer "$WORK/bpe/tokenizer.model" --field text --out "$WORK/bpe_walked" "$corpus" \
    >/dev/null 2>&1 || fail "import-text of the folder with a SentencePiece model failed"
  for split in train val; do
    h5dump -b LE -d /tokens -o "$WORK/bpe_walked_$split.bin" "$WORK/bpe_walked/$split.h5" >/dev/null
    h5dump -b LE -d /tokens -o "$WORK/bpe_plain_$split.bin" "$WORK/bpe/$split.h5" >/dev/null
    cmp "$WORK/bpe_walked_$split.bin" "$WORK/bpe_plain_$split.bin" || fail "SentencePiece $split tokens differ"
  done
  echo "ok: the folder gives the plain file's SentencePiece tokens"
elif grep -q "built without SentencePiece" "$WORK/bpe.out"; then
  echo "note: built without SentencePiece, its part not run: $(tail -1 "$WORK/bpe.out")"
else
  cat "$WORK/bpe.out"; fail "import-text --tokenizer sentencepiece"
fi

# 2. Bad input, exit 3 and the file named (and the line, for a record).
expect_refusal() {  # NAME EXPECTED-TEXT INPUT...
  local name=$1 expected=$2 status=0
  shift 2
  "$MIRRORED" data import-text --field text --out "$WORK/bad" "$@" >"$WORK/$name.out" 2>&1 || status=$?
  [[ $status -eq 3 ]] || { cat "$WORK/$name.out"; fail "$name: exit $status, expected 3"; }
  grep -qF -- "$expected" "$WORK/$name.out" || { cat "$WORK/$name.out"; fail "$name: no '$expected'"; }
  echo "ok: $name refused"
}
printf '{"text": "one"}\n{"text": 2}\n' | gzip >"$WORK/number.jsonl.gz"
expect_refusal "a non-string field" "$WORK/number.jsonl.gz:2: field 'text' is a number" "$WORK/number.jsonl.gz"
printf '{"text": "one"}\n{"body": "two"}\n' >"$WORK/missing.jsonl"
expect_refusal "a missing field" "$WORK/missing.jsonl:2: no field 'text'" "$WORK/missing.jsonl"
printf '{"text": "one"}\n{"text": "two"\n' >"$WORK/broken.jsonl"
expect_refusal "a malformed record" "$WORK/broken.jsonl:2: not a JSON record" "$WORK/broken.jsonl"
gzip -c "${docs[0]}" | head -c 2000 >"$WORK/cut.txt.gz"
expect_refusal "a truncated .gz" "'$WORK/cut.txt.gz': truncated gzip data" "$WORK/cut.txt.gz"
head -c 2000 "$corpus/c/zst.md.zst" >"$WORK/cut.md.zst"
expect_refusal "a truncated .zst" "'$WORK/cut.md.zst': truncated zstd data" "$WORK/cut.md.zst"

# 3. Shards: a corpus over 1 MiB of training tokens, as 1 MiB shards, trains the same
#    model bit for bit as the one file (the tokens in order are the same; this checks that
#    the printed glob is what data.train reads).
for copy in 1 2 3 4 5 6 7; do cp "$WORK/plain.txt" "$WORK/big-$copy.txt"; done
big=("$WORK"/big-*.txt)
"$MIRRORED" data import-text --out "$WORK/one" "${big[@]}" >/dev/null
"$MIRRORED" data import-text --shard_mb 1 --out "$WORK/sharded" "${big[@]}" >"$WORK/sharded.out" 2>&1 ||
  { cat "$WORK/sharded.out"; fail "sharded import failed"; }
glob=$(sed -n "s/^wrote [0-9]* tokens in [0-9]* shards, .* ('\(.*\)' reads them as one set)$/\1/p" "$WORK/sharded.out" | head -1)
[[ $glob == "$WORK/sharded/train-*-of-0000"[2-9]".h5" ]] || { cat "$WORK/sharded.out"; fail "no shard glob printed"; }
ls "$WORK"/sharded/train-*.h5 >/dev/null
model=(--model gpt --gpt.layers 1 --gpt.heads 2 --gpt.width 16 --gpt.context 16 --batch_size 8 --epochs 1
       --max_steps 6 --seed 3 --threads 1 --quiet)
"$MIRRORED" train "${model[@]}" --data.train "$WORK/one/train.h5" --data.test "$WORK/one/val.h5" --out "$WORK/t1"
"$MIRRORED" train "${model[@]}" --data.train "$glob" --data.test "$WORK/sharded/val.h5" --out "$WORK/t2"
"$COMPARE" "$WORK/t1/final.h5" "$WORK/t2/final.h5" --exact
echo "ok: the sharded import trains bit-identically to the one file"
