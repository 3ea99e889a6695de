#include <algorithm>
#include <cstdlib>
#include <cstdio>

#include "blas_core.h"
#include "commands.h"
#include "library_versions.h"
#include "parse_options.h"
#include "mirrored/core/cuda_memory.h"
#include "mirrored/core/device.h"
#include "mirrored/core/log.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/runtime/gpu_info.h"
#include "mirrored/runtime/runtime.h"

namespace mirrored::cli {

int info_command(int& argc, char**& argv, const Args& args) {
  boost::program_options::options_description desc(
      "usage: mirrored info   (under mpirun or srun: one row per rank in the table, printed by rank 0)\n"
      "       mirrored info --ranks RUN_DIR   (a run's straggler scores per rank and membership changes, from its metrics.jsonl)\n"
      "Version, build options, libraries, the devices this process would train on and the\n"
      "cluster table.\noptions");
  desc.add_options()("help,h", "print this help")(
      "ranks", boost::program_options::value<std::string>()->value_name("RUN_DIR"),
      "print a finished run's straggler scores per rank (no MPI, no devices)");
  boost::program_options::variables_map values;
  if (!parse_options(args, desc, nullptr, values, "info")) return 0;
  if (values.count("ranks")) return rank_scores_report(values["ranks"].as<std::string>());
  // It reports devices and libraries and moves no device buffers: no NCCL communicator, so
  // a NCCL that cannot start here (a sandboxed runtime) still lets it say everything else.
  runtime::RuntimeOptions options;
  options.launch = runtime::Launch::kAuto;
  options.device = runtime::DeviceChoice::kAuto;
  options.device_communicator = false;
  runtime::Runtime runtime(argc, argv, options);
  std::string gpu_reason;
  const int gpus = cuda_device_count(&gpu_reason);

  InfoRows rows = build_rows();
#ifdef MIRRORED_CUDA_NOT_BUILT
  const std::string not_built = MIRRORED_CUDA_NOT_BUILT;
#else
  const std::string not_built = "MIRRORED_CUDA=OFF or toolkit/NCCL/cuDNN not found";
#endif
  rows.emplace_back("cuda", cuda_built() ? str_cat("built in (", gpus, " GPU(s) visible",
                                                   gpus ? "" : ": " + gpu_reason, ")")
                                         : str_cat("NOT BUILT: this binary computes on the CPU only (", not_built,
                                                   ")"));
  rows.emplace_back("device = auto", str_cat(runtime.device().is_cuda() ? "one GPU per rank" : "the CPU",
                                             " (what mirrored train picks here by default; table below)"));
  for (auto& row : library_rows()) rows.push_back(std::move(row));
  rows.emplace_back("cpu simd", str_cat(kernels::cpu_simd_level(), std::getenv("MIRRORED_CPU_SIMD")
                                                                          ? " (MIRRORED_CPU_SIMD)"
                                                                          : " (the widest this CPU has)"));
  rows.emplace_back("blas core", blas_core_description());
  rows.emplace_back("cpu fp32 products", str_cat(kernels::cpu_f32_gemm_method(),
                                                 " (reduction = invariant: OpenBLAS in fixed tiles)"));
  rows.emplace_back("cpu bf16", str_cat(kernels::cpu_native_bf16() ? "native (AVX512-BF16 or AMX)"
                                                                     : "not native: precision = bf16 is slower than fp32",
                                       "; precision = bf16 uses ", kernels::cpu_bf16_method()));
  rows.emplace_back("launch", str_cat(runtime.uses_mpi() ? "mpi" : "local (one process)", ", ",
                                      runtime.world_size(), " rank(s) on ", runtime.cluster().num_nodes(),
                                      " node(s)"));
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  chief_print(str_cat("mirrored ", MIRRORED_VERSION));
  for (const auto& [label, value] : rows)
    chief_print(str_cat("  ", label, std::string(width + 2 - label.size(), ' '), value));
  chief_print("");
  chief_print(runtime.cluster().table());
  const std::string gpu_table = runtime::gpus_per_rank(runtime.world());  // collective: every rank
  chief_print("GPUs per rank:\n" + gpu_table);
  return 0;
}

}  // namespace mirrored::cli
