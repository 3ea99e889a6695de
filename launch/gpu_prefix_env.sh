# shellcheck shell=bash disable=SC2034
# Sourced (bash): makes the packages of launch/gpu_build_deps.sh, unpacked under a private
# prefix, usable for building and running mirrored, without touching the system's own
# copies (there may be none). Used by launch/gpu_selftest.sh --build --build-deps and by the CI test
# tests/integration/gpu_bundle_relocation.sh, so the test checks the code the GPU run uses.
#
#   unpack_gpu_prefix BUNDLE_DIR PREFIX   unpacks BUNDLE_DIR/prefix.tar(.xz) into PREFIX
#   use_gpu_prefix PREFIX                 exports the Open MPI variables below, puts
#       PREFIX/wrap/bin (mpicc, mpicxx, mpirun, mpiexec, ompi_info) first on PATH, and sets
#       GPU_PREFIX_CMAKE_ARGS   (array) -D options that point CMake at PREFIX only
#       GPU_PREFIX_LINK_FLAGS   linker flags for programs built against PREFIX
#       GPU_PREFIX_LIBRARY_PATH the prefix's library folders
#       GPU_PREFIX_MPIRUN       the relocated mpirun
#   with_gpu_prefix CMD...                CMD with GPU_PREFIX_LIBRARY_PATH on LD_LIBRARY_PATH
#
# Open MPI finds its plugins, help files and wrapper data through OPAL_PREFIX (it was built
# for /usr, and everything else is derived from that). Debian's libraries carry no RPATH, so
# the prefix's libraries must be found some other way; LD_LIBRARY_PATH is NOT exported,
# because the image's own tools (cmake, python3) would then load Debian's libcurl, libssl
# and the like in place of their own. Instead: the Open MPI programs run through small
# wrappers that set it for themselves (and so for the ranks mpirun starts), and programs
# built here carry the prefix as DT_RPATH (--disable-new-dtags), which, unlike RUNPATH,
# also serves the libraries they load (libhdf5 loading libcurl).

unpack_gpu_prefix() {
  local bundle=$1 prefix=$2
  case "$prefix" in
    / | /usr | /usr/local | "") echo "unpack_gpu_prefix: refusing to unpack into '$prefix'" >&2; return 1 ;;
  esac
  mkdir -p "$prefix"
  if [[ -s "$bundle/prefix.tar.xz" ]]; then
    xz -dc "$bundle/prefix.tar.xz" | tar -C "$prefix" -xf - || return 1
  elif [[ -s "$bundle/prefix.tar" ]]; then
    tar -C "$prefix" -xf "$bundle/prefix.tar" || return 1
  else
    echo "unpack_gpu_prefix: no prefix.tar.xz or prefix.tar in $bundle (made by launch/gpu_build_deps.sh)" >&2
    return 1
  fi
}

use_gpu_prefix() {
  local root=$1
  root=$(cd "$root" && pwd) || return 1
  local usr=$root/usr arch=x86_64-linux-gnu
  local lib=$usr/lib/$arch
  GPU_PREFIX_LIBRARY_PATH=$lib:$root/lib/$arch:$lib/openmpi/lib:$lib/openblas-pthread:$lib/hdf5/serial
  export OPAL_PREFIX=$usr
  export OPAL_LIBDIR=$lib/openmpi/lib
  # Debian's Open MPI settings (which transports to leave out) live in its etc/.
  export OMPI_MCA_mca_base_param_files=$root/etc/openmpi/openmpi-mca-params.conf
  if [[ $(id -u) -eq 0 ]]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  mkdir -p "$root/wrap/bin"
  local tool
  for tool in mpicc mpicxx mpirun mpiexec ompi_info; do
    local real=$usr/bin/$tool.openmpi
    [[ -e "$real" ]] || real=$usr/bin/$tool
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' \
      "$GPU_PREFIX_LIBRARY_PATH" "$real" >"$root/wrap/bin/$tool"
    chmod +x "$root/wrap/bin/$tool"
  done
  export PATH=$root/wrap/bin:$PATH
  GPU_PREFIX_MPIRUN=$root/wrap/bin/mpirun
  GPU_PREFIX_LINK_FLAGS="-Wl,-rpath-link,$GPU_PREFIX_LIBRARY_PATH -Wl,--disable-new-dtags -Wl,-rpath,$GPU_PREFIX_LIBRARY_PATH"
  GPU_PREFIX_CMAKE_ARGS=(
    -DCMAKE_PREFIX_PATH="$usr"
    -DMPI_C_COMPILER="$root/wrap/bin/mpicc"
    -DMPI_CXX_COMPILER="$root/wrap/bin/mpicxx"
    -DMPIEXEC_EXECUTABLE="$GPU_PREFIX_MPIRUN"
    -DCMAKE_EXE_LINKER_FLAGS="$GPU_PREFIX_LINK_FLAGS"
    -DCMAKE_SHARED_LINKER_FLAGS="$GPU_PREFIX_LINK_FLAGS"
    # HDF5 by path: Debian's h5cc wrapper would answer with /usr paths.
    -DHDF5_ROOT="$lib/hdf5/serial"
    -DHDF5_C_COMPILER_EXECUTABLE="HDF5_C_COMPILER_EXECUTABLE-NOTFOUND"
    -DHDF5_C_INCLUDE_DIR="$usr/include/hdf5/serial"
    -DHDF5_hdf5_LIBRARY_RELEASE="$lib/hdf5/serial/libhdf5.so"
    -DBOOST_ROOT="$usr"
    -DBoost_DIR="$lib/cmake/Boost-1.74.0"
    -DBoost_NO_SYSTEM_PATHS=ON
    -DBLA_VENDOR=OpenBLAS
    -DBLAS_LIBRARIES="$lib/openblas-pthread/libopenblas.so"
    -DMIRRORED_CBLAS_INCLUDE_DIR="$usr/include/$arch/openblas-pthread"
    -DZLIB_ROOT="$usr"
    -DZLIB_INCLUDE_DIR="$usr/include"
    -DZLIB_LIBRARY="$lib/libz.so"
    -DGTest_DIR="$lib/cmake/GTest"
    -DMIRRORED_ONEDNN=OFF
  )
}

with_gpu_prefix() {
  env LD_LIBRARY_PATH="$GPU_PREFIX_LIBRARY_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
}
