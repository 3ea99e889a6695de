# Sourced by the sanitizer and fuzzing scripts: their builds use -O1 with line tables only
# (-g1) instead of RelWithDebInfo's -O2 -g. That is the optimisation level the sanitizers'
# own documentation recommends (reports keep exact lines, nothing is optimised away), and
# on a 2-core machine it compiles in ~60% of the time, which is most of CI's wall clock.
SANITIZER_FLAGS=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")
