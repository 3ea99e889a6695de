#!/usr/bin/env bash
# For building mirrored ON a GPU machine that has only a bare CUDA image (nvcc, CMake,
# ninja, python3) and no network: `launch/gpu_selftest.sh --build --build-deps DIR`. The
# usual way needs none of this: launch/gpu_bundle.sh builds the binaries here and carries
# them. Packs Open MPI with its runtime libraries, HDF5, Boost.Program_options (with the
# Boost headers it includes), OpenBLAS, GoogleTest and zlib, all from Debian 12 packages,
# plus the self-test's data. Run it on a Debian 12 machine that reaches its package mirror;
# nothing is installed here.
#
#   DIR/prefix.tar.xz   the packages unpacked with dpkg -x (never into /), docs and unused
#                       static libraries removed; the self-test unpacks it
#                       (launch/gpu_prefix_env.sh)
#   DIR/packages.txt    the package names and versions inside
#   DIR/glibc.txt       the newest glibc symbol version those libraries need (e.g. 2.34)
#   DIR/fmnist/, DIR/shakespeare/   the training data (launch/gpu_bundle_data.sh)
#
# oneDNN is left out: the build there is configured with MIRRORED_ONEDNN=OFF. Packages the
# CUDA image always has (libc6, libgcc-s1, libstdc++6) are left out too; Debian 12's glibc is
# older than the image's, so the rest loads there. Debian's Open MPI 4.1 has no ULFM.
# usage: launch/gpu_build_deps.sh DIR
# env:   TRAIN_IMAGES (default 10000), FMNIST_IDX_DIR, WHEEL_CACHE_DIR (default data/cache), GPU_BUNDLE_COMPRESS=none (DIR/prefix.tar,
#        uncompressed and not held to the size limit: quicker, for tests on this machine)
set -euo pipefail
cd "$(dirname "$0")/.."
source launch/gpu_bundle_data.sh
out=${1:?usage: launch/gpu_build_deps.sh DIR}
train_images=${TRAIN_IMAGES:-10000}
idx_dir=${FMNIST_IDX_DIR:-/usr/share/datasets/fashion-mnist}
limit_mib=40

packages=(
  # Open MPI 4.1 and what its libraries and plugins load
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libevent-core-2.1-7 libevent-pthreads-2.1-7
  libhwloc15 libpmix2 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200
  libpsm2-2 libpsm-infinipath1 libgfortran5 libquadmath0 libnuma1 libmunge2 libatomic1 libudev1
  # HDF5 1.10 (serial) and its runtime closure (libcurl and what it links)
  libhdf5-dev libhdf5-103-1 libsz2 libaec0 libcurl4 libbrotli1 libcom-err2 libgmp10 libgnutls30
  libgssapi-krb5-2 libhogweed6 libidn2-0 libk5crypto3 libkeyutils1 libkrb5-3 libkrb5support0
  libldap-2.5-0 libnettle8 libnghttp2-14 libp11-kit0 libpsl5 librtmp1 libsasl2-2 libssh2-1 libssl3
  libtasn1-6 libunistring2 libffi8 libzstd1
  # Boost.Program_options, with the Boost headers and CMake package files it needs
  libboost-program-options1.74-dev libboost-program-options1.74.0 libboost1.74-dev
  # OpenBLAS (pthreads), GoogleTest, zlib
  libopenblas-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev
  libgtest-dev googletest zlib1g-dev zlib1g
)

for f in t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz; do
  [[ -s "$idx_dir/$f" ]] || { echo "gpu_build_deps: $idx_dir/$f missing (apt-get install dataset-fashion-mnist, or set FMNIST_IDX_DIR)" >&2; exit 1; }
done
command -v apt-get >/dev/null && command -v dpkg >/dev/null ||
  { echo "gpu_build_deps: needs apt-get and dpkg (a Debian 12 machine)" >&2; exit 1; }

mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_bundle.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/prefix"

# apt-get download writes into the current folder; as root it warns that it cannot drop to
# the _apt user for a folder _apt cannot write, which is harmless.
download() { (cd "$work/debs" && apt-get download -q "${packages[@]}" >"$work/download.log" 2>&1); }
if ! download; then
  # Package lists may be missing (a fresh container): fetch them once and try again.
  apt-get update -q >>"$work/download.log" 2>&1 || true
  download || { cat "$work/download.log" >&2; echo "gpu_build_deps: apt-get download failed" >&2; exit 1; }
fi
debs_bytes=$(du -cb "$work"/debs/*.deb | tail -1 | cut -f1)

: >"$out/packages.txt"
for deb in "$work"/debs/*.deb; do
  dpkg-deb -f "$deb" Package Version | paste -sd' ' >>"$out/packages.txt"
  dpkg -x "$deb" "$work/prefix"
done
sort -o "$out/packages.txt" "$out/packages.txt"

# Prune what neither a build nor a run reads: documentation, and static libraries other than
# GoogleTest's (Debian ships GoogleTest as static libraries only).
p=$work/prefix
rm -rf "$p"/usr/share/{doc,man,info,lintian,bug} "$p"/usr/share/openmpi/doc
find "$p" -name '*.a' ! -name 'libgtest*.a' ! -name 'libgmock*.a' -delete
find "$p" -xtype l -name '*.a' -delete   # links to the static libraries just removed
rm -f "$p"/usr/lib/x86_64-linux-gnu/openblas-pthread/liblapack*   # the project uses BLAS only
# Boost: of its 160 MB of headers keep those boost/program_options.hpp includes (as g++
# resolves them, in C++17 and C++20) and the folders whose choice depends on the compiler.
inc=$p/usr/include
keep=$work/boost_headers
echo '#include <boost/program_options.hpp>' >"$work/po.cpp"
for std in c++17 c++20; do
  "${CXX:-g++}" -std=$std -M -MT x -I"$inc" "$work/po.cpp" |
    tr ' \\' '\n\n' | sed -n "s|^$inc/||p"
done | grep '^boost/' | sort -u >"$keep"
[[ $(wc -l <"$keep") -gt 100 ]] || { echo "gpu_build_deps: could not list the Boost headers program_options needs" >&2; exit 1; }
for dir in config mpl type_traits preprocessor detail core; do
  (cd "$inc" && find "boost/$dir" -type f) >>"$keep"
done
mv "$inc/boost" "$work/boost_all"
(cd "$work/boost_all/.." && mv boost_all boost && tar -cf - -T <(sort -u "$keep")) | tar -C "$inc" -xf -
# The newest glibc symbol version any program or library here needs: gpu_selftest.sh compares
# it with the image's glibc before it unpacks anything (an older glibc cannot load them).
# (readelf refuses the scripts among the programs: its exit status is left out)
{ find "$p" -type f \( -name '*.so*' -o -path '*/bin/*' \) -print0 | xargs -0 readelf -V 2>/dev/null || true; } |
  { grep -oE 'Name: GLIBC_[0-9]+\.[0-9]+(\.[0-9]+)?' || true; } | sed 's/Name: GLIBC_//' | sort -uV | tail -1 >"$out/glibc.txt"
[[ -s "$out/glibc.txt" ]] || { echo "gpu_build_deps: could not read the glibc versions the libraries need (readelf)" >&2; exit 1; }
rm -f "$out"/prefix.tar*
if [[ "${GPU_BUNDLE_COMPRESS:-xz}" == none ]]; then
  tar -C "$p" -cf "$out/prefix.tar" .   # for tests that unpack it at once
else
  tar -C "$p" -cf - . | xz -T0 -6 >"$out/prefix.tar.xz"
fi

bundle_data "$out"
total=$(du -cb "$out"/prefix.tar* "$out/packages.txt" "$out/glibc.txt" "$out/fmnist" $(ls -d "$out/shakespeare" 2>/dev/null) | tail -1 | cut -f1)
mib=$(awk -v b="$total" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "gpu_build_deps: $(wc -l <"$out/packages.txt") packages ($(awk -v b="$debs_bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MiB of .deb)," \
     "$BUNDLE_DATA_NOTE; glibc >= $(cat "$out/glibc.txt") needed;" \
     "$out holds $mib MiB (limit $limit_mib MiB)"
[[ "${GPU_BUNDLE_COMPRESS:-xz}" == none ]] || awk -v b="$total" -v l="$limit_mib" 'BEGIN { exit !(b <= l * 1048576) }' ||
  { echo "gpu_build_deps: $mib MiB is over the $limit_mib MiB limit" >&2; exit 1; }
