#pragma once
#include "mirrored/runtime/runtime.h"

// The job's runtime, started once by the MPI test main.
mirrored::runtime::Runtime& test_runtime();
