// bfloat16 matrix products through Intel MKL's cblas_gemm_bf16bf16f32, loaded at run time.
//
// MKL is not linked: it exports cblas_sgemm too, and linking it beside OpenBLAS would let
// the link order decide whose float32 products every other kernel gets. Its single-library
// runtime (libmkl_rt, in PyPI's `mkl` wheel) is opened with RTLD_LOCAL instead and only its
// bf16 GEMM is looked up, so the process's sgemm stays OpenBLAS's. MKL multiplies bf16 with
// AVX512-BF16 or AMX where the CPU has them and emulates them elsewhere (correct, slow).
//
// Inputs are rounded as on every other bf16 path (round_rows_to_bf16: the same bits), into
// buffers that keep the callers' row strides; MKL accumulates in float32 into the float32
// output, so the result is the kRounded one up to summation order.
#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "bf16_backends.h"
#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored::kernels::cpu {
namespace {

// mkl_cblas.h / mkl_service.h values, kept here so the build needs no MKL headers.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
constexpr int kInterfaceLp64 = 0, kThreadingSequential = 1, kThreadingGnu = 3;

using GemmBf16 = void (*)(int layout, int trans_a, int trans_b, int m, int n, int k, float alpha, const uint16_t* a,
                          int lda, const uint16_t* b, int ldb, float beta, float* c, int ldc);
using SetLayer = int (*)(int);
using SetThreadsLocal = int (*)(int);
using VersionString = void (*)(char*, int);

struct MklBf16 {
  GemmBf16 gemm = nullptr;
  SetThreadsLocal set_threads_local = nullptr;
  std::string version;
};

template <typename F>
F symbol(void* handle, const char* name, const std::string& library) {
  void* address = dlsym(handle, name);
  if (!address)
    throw InputError(str_cat("MIRRORED_CPU_BF16=mkl: ", library, " has no ", name,
                             " (expected MKL's single-library runtime, libmkl_rt, 2020 or newer)"));
  return reinterpret_cast<F>(address);
}

MklBf16 load(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw InputError(str_cat("MIRRORED_CPU_BF16=mkl: could not load MKL: ", dlerror(),
                             " (expected `pip install mkl` with its lib/ folder in LD_LIBRARY_PATH, or "
                             "MIRRORED_MKL_LIBRARY=/path/to/libmkl_rt.so.N)"));
  // Layers are chosen before any other MKL call. GNU OpenMP where this build runs on it
  // (the oneDNN builds), so MKL shares its threads with the convolutions; sequential
  // otherwise, since MKL's GNU layer does not load libgomp itself but expects it loaded.
#ifdef MIRRORED_WITH_ONEDNN
  const int threading = kThreadingGnu;
#else
  const int threading = kThreadingSequential;
#endif
  symbol<SetLayer>(handle, "MKL_Set_Interface_Layer", library)(kInterfaceLp64);
  symbol<SetLayer>(handle, "MKL_Set_Threading_Layer", library)(threading);
  MklBf16 mkl;
  mkl.gemm = symbol<GemmBf16>(handle, "cblas_gemm_bf16bf16f32", library);
  mkl.set_threads_local = symbol<SetThreadsLocal>(handle, "MKL_Set_Num_Threads_Local", library);
  char version[256] = {};
  symbol<VersionString>(handle, "MKL_Get_Version_String", library)(version, sizeof version);
  mkl.version = version;
  // "Intel(R) oneAPI Math Kernel Library Version 2026.2-Product Build ... applications"
  if (const size_t end = mkl.version.find("-Product"); end != std::string::npos) mkl.version.resize(end);
  return mkl;
}

// MIRRORED_MKL_LIBRARY, else the runtime's soname that the loader finds (MKL 2024: .so.2,
// 2025 and newer: .so.3).
std::string default_library() {
  if (const char* path = std::getenv("MIRRORED_MKL_LIBRARY"); path && *path) return path;
  for (const char* name : {"libmkl_rt.so.3", "libmkl_rt.so.2"})
    if (void* handle = dlopen(name, RTLD_LAZY | RTLD_LOCAL)) {
      dlclose(handle);
      return name;
    }
  return "libmkl_rt.so.3";
}

const MklBf16& mkl() {
  static const MklBf16 loaded = load(default_library());
  return loaded;
}

int lp64(int64_t value, const char* what) {
  MIRRORED_CHECK(value <= INT_MAX, "MKL bf16 GEMM: ", what, " = ", value, " exceeds its 32-bit interface");
  return static_cast<int>(value);
}

}  // namespace

std::string mkl_bf16_version() { return mkl().version; }

std::string load_mkl_bf16(const std::string& library) { return load(library).version; }

void mkl_gemm_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, Bf16Operand a,
                   int64_t lda, Bf16Operand b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const MklBf16& lib = mkl();
  const uint16_t* ra = rounded_operand(0, a, transpose_a ? k : m, transpose_a ? m : k, lda);
  const uint16_t* rb = rounded_operand(1, b, transpose_b ? n : k, transpose_b ? k : n, ldb);
  lib.set_threads_local(threads());
  lib.gemm(kRowMajor, transpose_a ? kTrans : kNoTrans, transpose_b ? kTrans : kNoTrans, lp64(m, "m"), lp64(n, "n"),
           lp64(k, "k"), alpha, ra, lp64(lda, "lda"), rb, lp64(ldb, "ldb"), beta, c, lp64(ldc, "ldc"));
}

}  // namespace mirrored::kernels::cpu
