// mirrored bench allreduce: an nccl-tests style table for the project's communicator next
// to plain MPI_Allreduce on the same buffers, a correctness pass (#wrong), a summary line,
// optional JSON, and a non-zero exit on any wrong result.
#include <mpi.h>

#include <boost/program_options.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <vector>

#include "commands.h"
#include "mirrored/core/cuda_memory.h"
#include "mirrored/core/error.h"
#include "mirrored/core/tensor.h"
#include "mirrored/core/log.h"
#include "mirrored/core/timer.h"
#include "mirrored/distribute/runtime.h"
#include "mirrored/io/jsonl_writer.h"

namespace mirrored::cli {
namespace po = boost::program_options;
namespace {

constexpr int kRounds = 3;

struct Row {
  int64_t bytes = 0, count = 0;
  double mirrored_us = 0, mpi_us = 0;
  int64_t wrong = 0, mpi_wrong = 0;  // elements off the exact sum, over all ranks
};

// Mean time per call in microseconds, averaged over ranks (as nccl-tests reports).
double time_us(comm::Communicator& world, int warmup, int iters, const std::function<void()>& op) {
  for (int i = 0; i < warmup; ++i) op();
  world.barrier();
  Stopwatch clock;
  for (int i = 0; i < iters; ++i) op();
  const double local = clock.seconds() * 1e6 / iters;
  return world.allreduce_value(local, comm::ReduceOp::kMean);
}

// Rank-filled inputs whose sum is exact in float: element i of rank r is (r + 1) * (i % 7 + 1).
// `device` (when not null) is a device buffer of the same size: the all-reduce runs there.
int64_t count_wrong(comm::Communicator& world, comm::Communicator& tested, std::vector<float>& buffer,
                    bool use_mirrored, float* device = nullptr) {
  const int n = world.size();
  for (size_t i = 0; i < buffer.size(); ++i)
    buffer[i] = static_cast<float>((world.rank() + 1) * static_cast<int>(i % 7 + 1));
  if (use_mirrored && device) {
    cuda_copy(device, buffer.data(), buffer.size() * sizeof(float));
    tested.allreduce(device, buffer.size(), comm::ReduceOp::kSum);
    cuda_copy(buffer.data(), device, buffer.size() * sizeof(float));
  } else if (use_mirrored) {
    tested.allreduce(buffer.data(), buffer.size(), comm::ReduceOp::kSum);
  } else {
    MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(buffer.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  int64_t wrong = 0;
  const float ranks = static_cast<float>(n * (n + 1) / 2);
  for (size_t i = 0; i < buffer.size(); ++i)
    if (buffer[i] != ranks * static_cast<float>(i % 7 + 1)) ++wrong;
  return world.allreduce_value(wrong, comm::ReduceOp::kSum);
}

}  // namespace

int bench_allreduce(int& argc, char**& argv, const Args& args) {
  po::options_description desc("mirrored bench allreduce options");
  desc.add_options()("help,h", "print this help")(
      "min-bytes", po::value<int64_t>()->default_value(1024), "smallest message")(
      "max-bytes", po::value<int64_t>()->default_value(int64_t{64} << 20), "largest message (sizes double)")(
      "iters", po::value<int>()->default_value(20), "timed iterations per size")(
      "warmup", po::value<int>()->default_value(5), "untimed iterations per size")(
      "json", po::value<std::string>(), "also write the rows as JSON lines to this file")(
      "device", po::value<std::string>()->default_value("cpu"),
      "cpu: the MPI communicator on host buffers; cuda: NCCL on device buffers (one GPU per rank)");
  po::variables_map values;
  try {
    po::store(po::command_line_parser(args).options(desc).run(), values);
    po::notify(values);
  } catch (const po::error& e) {
    throw InputError(str_cat("bench allreduce: ", e.what()), ExitCode::kUsage);
  }
  if (values.count("help")) {
    std::printf("usage: mirrored bench allreduce [options]\n");
    std::cout << desc << "\n";
    return 0;
  }
  const int64_t min_bytes = values["min-bytes"].as<int64_t>(), max_bytes = values["max-bytes"].as<int64_t>();
  const int iters = values["iters"].as<int>(), warmup = values["warmup"].as<int>();
  if (min_bytes < 4 || max_bytes < min_bytes || iters < 1 || warmup < 0)
    throw InputError("bench allreduce: expected 4 <= --min-bytes <= --max-bytes, --iters >= 1, --warmup >= 0",
                     ExitCode::kUsage);

  const std::string device_name = values["device"].as<std::string>();
  if (device_name != "cpu" && device_name != "cuda")
    throw InputError(str_cat("bench allreduce: --device '", device_name, "': expected cpu or cuda"), ExitCode::kUsage);
  const bool on_gpu = device_name == "cuda";
  distribute::Runtime runtime(
      argc, argv, {distribute::Launch::kMpi, on_gpu ? distribute::DeviceChoice::kCuda : distribute::DeviceChoice::kCpu});
  auto& world = runtime.world();
  // The communicator under test: NCCL on device buffers with --device cuda (the MPI column
  // stays on host buffers of the same size, the path a CPU job would take).
  auto& tested = runtime.device_communicator();
  const int n = world.size();
  const double bus_factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
  chief_print(str_cat("# mirrored bench allreduce: ", n, " ranks, float32 sum, ", iters, " iters, ", warmup,
                      " warmup; time averaged over ranks, best of ", kRounds, " alternating rounds"));
  chief_print("#                                  mirrored (" + tested.backend() + (on_gpu ? ", device" : "") +
              ")         MPI_Allreduce (host)");
  chief_print("#       size      count   type     time   algbw   busbw  #wrong      time   algbw   busbw  #wrong  ratio");
  chief_print("#        (B)   (elements)          (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)          algbw");

  std::vector<Row> rows;
  std::vector<float> buffer(static_cast<size_t>(max_bytes / 4));  // touched once, reused for all sizes
  std::fill(buffer.begin(), buffer.end(), 1.0f);
  Tensor device_buffer;
  if (on_gpu) device_buffer = Tensor({static_cast<int64_t>(buffer.size())}, DType::kF32, runtime.device());
  float* tested_data = on_gpu ? device_buffer.data<float>() : buffer.data();
  int64_t total_wrong = 0;
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    Row row;
    row.bytes = bytes;
    row.count = bytes / 4;
    std::vector<float> view(buffer.begin(), buffer.begin() + row.count);
    float* data = buffer.data();
    const auto count = static_cast<size_t>(row.count);
    // Alternate the two in rounds and keep each one's best round, so a burst of load on a
    // shared machine cannot favour whichever ran first.
    row.mirrored_us = row.mpi_us = 1e300;
    for (int round = 0; round < kRounds; ++round) {
      row.mirrored_us = std::min(row.mirrored_us, time_us(world, warmup, iters, [&] {
        tested.allreduce(tested_data, count, comm::ReduceOp::kSum);
      }));
      row.mpi_us = std::min(row.mpi_us, time_us(world, warmup, iters, [&] {
        MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }));
    }
    const int64_t wrong_mirrored = count_wrong(world, tested, view, true, on_gpu ? tested_data : nullptr);
    const int64_t wrong_mpi = count_wrong(world, tested, view, false);
    row.wrong = wrong_mirrored;
    row.mpi_wrong = wrong_mpi;
    // Either column wrong fails the run: a broken MPI underneath is as fatal as a broken
    // communicator, and the MPI column is the reference the ratio is read against.
    total_wrong += wrong_mirrored + wrong_mpi;
    rows.push_back(row);
    const double algbw = static_cast<double>(bytes) / row.mirrored_us / 1e3;
    const double mpi_algbw = static_cast<double>(bytes) / row.mpi_us / 1e3;
    char line[256];
    std::snprintf(line, sizeof(line), "%12lld %10lld  float %9.1f %7.2f %7.2f %7lld %9.1f %7.2f %7.2f %7lld %6.2f",
                  static_cast<long long>(bytes), static_cast<long long>(row.count), row.mirrored_us, algbw,
                  algbw * bus_factor, static_cast<long long>(wrong_mirrored), row.mpi_us, mpi_algbw,
                  mpi_algbw * bus_factor, static_cast<long long>(wrong_mpi), algbw / mpi_algbw);
    chief_print(line);
  }
  double sum_busbw = 0, sum_ratio_1mb = 0;
  int rows_1mb = 0;
  for (const auto& row : rows) {
    sum_busbw += static_cast<double>(row.bytes) / row.mirrored_us / 1e3 * bus_factor;
    if (row.bytes >= (1 << 20)) {
      sum_ratio_1mb += row.mpi_us / row.mirrored_us;
      ++rows_1mb;
    }
  }
  chief_print(str_cat("# out of bounds values : ", total_wrong, " ", total_wrong ? "FAILED" : "OK"));
  char summary[160];
  std::snprintf(summary, sizeof(summary), "# avg bus bandwidth    : %.3f GB/s;  mirrored/MPI algbw from 1 MB: %.3f",
                sum_busbw / static_cast<double>(rows.size()), rows_1mb ? sum_ratio_1mb / rows_1mb : 0.0);
  chief_print(summary);
  if (values.count("json") && world.rank() == 0) {
    io::JsonlWriter json(values["json"].as<std::string>(), false);
    for (const auto& row : rows)
      json.write({{"bytes", row.bytes},
                  {"count", row.count},
                  {"ranks", static_cast<int64_t>(n)},
                  {"backend", tested.backend()},
                  {"mirrored_us", row.mirrored_us},
                  {"mpi_us", row.mpi_us},
                  {"algbw_gbs", static_cast<double>(row.bytes) / row.mirrored_us / 1e3},
                  {"mpi_algbw_gbs", static_cast<double>(row.bytes) / row.mpi_us / 1e3},
                  {"wrong", row.wrong},
                  {"mpi_wrong", row.mpi_wrong}});
  }
  return total_wrong == 0 ? 0 : static_cast<int>(ExitCode::kFailure);
}

}  // namespace mirrored::cli
