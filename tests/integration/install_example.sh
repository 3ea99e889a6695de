#!/usr/bin/env bash
# mirrored as a library: `cmake --install` to a fresh prefix, then examples/custom_loop
# configured out of tree with find_package(mirrored) (-DCMAKE_PREFIX_PATH), built, and run
# under mpirun -np 2: its custom training loop must learn Fashion-MNIST.
source "$(dirname "$0")/lib.sh"
require_data
build_dir=$(dirname "$MIRRORED")   # the binary sits at the top of its build tree
cmake --install "$build_dir" --prefix "$WORK/prefix" >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; fail "install failed"; }
for f in include/mirrored/mirrored.h include/mirrored/distribute/strategy.h bin/mirrored; do
  [[ -e "$WORK/prefix/$f" ]] || fail "install lacks $f"
done
ls "$WORK"/prefix/lib*/libmirrored.* >/dev/null || fail "install lacks libmirrored"
ls "$WORK"/prefix/lib*/cmake/mirrored/{mirroredConfig,mirroredConfigVersion,mirroredTargets}.cmake >/dev/null ||
  fail "install lacks the CMake package files"

# The example is built with the compiler and build type of the tree it links against.
compiler=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
cmake -S "$SOURCE_DIR/examples/custom_loop" -B "$WORK/example" -DCMAKE_PREFIX_PATH="$WORK/prefix" \
  -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_BUILD_TYPE="${build_type:-Release}" >"$WORK/configure.log" 2>&1 ||
  { cat "$WORK/configure.log"; fail "configuring the example against the installed package failed"; }
cmake --build "$WORK/example" -j2 >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; fail "building the example failed"; }
# The example must use the installed headers, not the source tree's.
grep -q "$WORK/prefix/include" "$WORK/example/CMakeFiles/custom_loop.dir/flags.make" ||
  fail "the example did not compile against the installed headers"

mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$WORK/example/custom_loop" "$DATA_DIR" 300 \
  >"$WORK/run.log" 2>&1 || { cat "$WORK/run.log"; fail "the example failed under mpirun -np 2"; }
cat "$WORK/run.log"
line=$(grep '^replicas 2  steps 300  test accuracy ' "$WORK/run.log") || fail "no result line from 2 replicas"
acc=$(sed -E 's/.*test accuracy ([0-9.]+).*/\1/' <<<"$line")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.78) }' || fail "custom loop reached test accuracy $acc < 0.78"
echo "ok: installed package, out-of-tree example, accuracy $acc after 300 steps on 2 replicas"
