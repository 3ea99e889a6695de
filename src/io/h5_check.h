#pragma once
// Checking HDF5 C API return codes. HDF5 signals failure with a negative id or status and
// leaves the reason on its error stack; these helpers turn that into mirrored::Error with
// file:line, the call as written, the object it was applied to and HDF5's own reason.
#include <hdf5.h>

#include <string>

#include "mirrored/core/error.h"

namespace mirrored::io::detail {

// HDF5 prints its error stack to stderr on every failure unless told not to. We report
// failures ourselves, so this switches the printing off once per process.
void silence_hdf5_errors();

// The most specific description on HDF5's current error stack ("" when it is empty).
std::string hdf5_error_reason();

[[noreturn]] void throw_hdf5_failure(const char* file, int line, const char* call,
                                     const std::string& target);

template <typename Result>
Result check_hdf5(Result result, const char* file, int line, const char* call,
                  const std::string& target) {
  if (result < 0) throw_hdf5_failure(file, line, call, target);
  return result;
}

}  // namespace mirrored::io::detail

// MIRRORED_H5_CHECK(H5Dwrite(...), "'data.h5' /images") returns the call's result, or throws
// "file:line: H5Dwrite(...) on 'data.h5' /images failed: <HDF5's reason>".
#define MIRRORED_H5_CHECK(call, target) \
  ::mirrored::io::detail::check_hdf5((call), __FILE__, __LINE__, #call, (target))
