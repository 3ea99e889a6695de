#!/usr/bin/env bash
# launch/quickstart.sh installs only what launch/install_deps.sh installs without --test, so
# its build (launch/build.sh build: the default options) must configure on a machine without
# GoogleTest: the test suites are left out, saying so. Asking for them with
# MIRRORED_BUILD_TESTS=ON must then fail at configure, naming the missing package.
# GoogleTest is made unfindable with CMAKE_DISABLE_FIND_PACKAGE_GTest.
source "$(dirname "$0")/lib.sh"
src=${SOURCE_DIR:?SOURCE_DIR must point at the source tree}
no_gtest=-DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON

cmake -S "$src" -B "$WORK/quickstart" -DCMAKE_BUILD_TYPE=Release "$no_gtest" >"$WORK/quickstart.log" 2>&1 ||
  { cat "$WORK/quickstart.log"; fail "the quickstart's build does not configure without GoogleTest"; }
grep -q "GoogleTest not found: the test suites are not built" "$WORK/quickstart.log" ||
  { cat "$WORK/quickstart.log"; fail "configure did not say that the tests are left out"; }
[[ -f "$WORK/quickstart/Makefile" || -f "$WORK/quickstart/build.ninja" ]] || fail "no build files were generated"
[[ ! -e "$WORK/quickstart/tests" ]] || fail "the tests were configured although GoogleTest is missing"
echo "ok: the quickstart's build configures without GoogleTest"

status=0
cmake -S "$src" -B "$WORK/explicit" -DCMAKE_BUILD_TYPE=Release -DMIRRORED_CUDA=OFF -DMIRRORED_BUILD_TESTS=ON "$no_gtest" \
  >"$WORK/explicit.log" 2>&1 || status=$?
[[ $status -ne 0 ]] || fail "MIRRORED_BUILD_TESTS=ON configured without GoogleTest"
grep -q "MIRRORED_BUILD_TESTS=ON needs GoogleTest" "$WORK/explicit.log" ||
  { cat "$WORK/explicit.log"; fail "the configure error does not name the missing GoogleTest"; }
echo "ok: MIRRORED_BUILD_TESTS=ON without GoogleTest is refused at configure"
