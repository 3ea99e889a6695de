#pragma once
#include "mirrored/distribute/runtime.h"

// The job's runtime, started once by the MPI test main.
mirrored::distribute::Runtime& test_runtime();
