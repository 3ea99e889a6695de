// mirrored bench allreduce: nccl-tests style tables for the project's communicator next to
// Open MPI's own calls on the same buffers (all-reduce, and the reduce-scatter and all-gather
// that sharded optimizer state uses), a correctness pass (#wrong), a summary line,
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
#include "mirrored/core/process.h"
#include "mirrored/core/timer.h"
#include "mirrored/distribute/runtime.h"
#include "mirrored/io/jsonl_writer.h"

namespace mirrored::cli {
namespace po = boost::program_options;
namespace {

constexpr int kRounds = 3;

// The collectives measured, each beside Open MPI's own call on the same buffers. Sizes are
// the whole buffer (nccl-tests' convention): a reduce-scatter reads `count` elements per
// rank and leaves each rank its piece; an all-gather assembles `count` elements from pieces.
enum class Op { kAllreduce, kReduceScatter, kAllgather };
constexpr Op kOps[] = {Op::kAllreduce, Op::kReduceScatter, Op::kAllgather};

const char* op_name(Op op) {
  switch (op) {
    case Op::kAllreduce: return "allreduce";
    case Op::kReduceScatter: return "reduce_scatter";
    case Op::kAllgather: return "allgather";
  }
  return "?";
}

// The block forms where the ranks divide the count, the "v" forms elsewhere.
const char* mpi_call(Op op) {
  switch (op) {
    case Op::kAllreduce: return "MPI_Allreduce";
    case Op::kReduceScatter: return "MPI_Reduce_scatter(_block)";
    case Op::kAllgather: return "MPI_Allgather(v), in place";
  }
  return "?";
}

// busbw = algbw x this (nccl-tests): 2(n-1)/n for all-reduce, (n-1)/n for the halves.
double bus_factor(Op op, int n) {
  if (n <= 1) return 1.0;
  return (op == Op::kAllreduce ? 2.0 : 1.0) * (n - 1) / n;
}

// The per-rank pieces of `count` elements: balanced, equal when n divides count.
struct Pieces {
  std::vector<size_t> counts;
  std::vector<int> mpi_counts, offsets;
  bool equal = true;
  size_t mine = 0, my_offset = 0;
};

Pieces pieces_of(size_t count, int n, int rank) {
  Pieces p;
  for (int r = 0; r < n; ++r) {
    const size_t begin = count * static_cast<size_t>(r) / static_cast<size_t>(n);
    const size_t end = count * static_cast<size_t>(r + 1) / static_cast<size_t>(n);
    p.counts.push_back(end - begin);
    p.mpi_counts.push_back(static_cast<int>(end - begin));
    p.offsets.push_back(static_cast<int>(begin));
    p.equal = p.equal && end - begin == p.counts.front();
    if (r == rank) p.mine = end - begin, p.my_offset = begin;
  }
  return p;
}

struct Row {
  Op op = Op::kAllreduce;
  int64_t bytes = 0, count = 0;
  double mirrored_us = 0, mpi_us = 0;
  int64_t wrong = 0, mpi_wrong = 0;  // elements off the exact answer, over all ranks
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

// One call of `op` through the communicator under test; the piece of a reduce-scatter lands
// in `piece`.
void run_tested(Op op, comm::Communicator& tested, float* data, float* piece, size_t count, const Pieces& p) {
  switch (op) {
    case Op::kAllreduce: tested.allreduce(data, count, comm::ReduceOp::kSum); break;
    case Op::kReduceScatter:
      tested.reduce_scatter(data, piece, p.counts, comm::DataType::kF32, comm::ReduceOp::kSum);
      break;
    case Op::kAllgather: tested.allgather_inplace(data, p.counts, comm::DataType::kF32); break;
  }
}

// The same through Open MPI's own call on host buffers.
void run_mpi(Op op, float* data, float* piece, size_t count, const Pieces& p) {
  switch (op) {
    case Op::kAllreduce:
      MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case Op::kReduceScatter:
      if (p.equal) {
        MPI_Reduce_scatter_block(data, piece, p.mpi_counts.front(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      } else {
        MPI_Reduce_scatter(data, piece, p.mpi_counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
      break;
    case Op::kAllgather:
      if (p.equal) {
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, p.mpi_counts.front(), MPI_FLOAT, MPI_COMM_WORLD);
      } else {
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, p.mpi_counts.data(), p.offsets.data(), MPI_FLOAT,
                       MPI_COMM_WORLD);
      }
      break;
  }
}

// Rank-filled inputs whose sums are exact in float: element i of rank r is (r + 1) * (i % 7 + 1)
// (an all-gather's input is each rank's own piece of that, the rest -1). With `device`
// (device buffers of the same sizes) the tested collective runs there.
int64_t count_wrong(Op op, comm::Communicator& world, comm::Communicator& tested, std::vector<float>& buffer,
                    std::vector<float>& piece, const Pieces& p, bool use_mirrored, float* device = nullptr,
                    float* device_piece = nullptr) {
  const int n = world.size(), rank = world.rank();
  auto value = [](int r, size_t i) { return static_cast<float>((r + 1) * static_cast<int>(i % 7 + 1)); };
  for (size_t i = 0; i < buffer.size(); ++i)
    buffer[i] = op != Op::kAllgather || (i >= p.my_offset && i < p.my_offset + p.mine) ? value(rank, i) : -1.0f;
  std::fill(piece.begin(), piece.end(), -1.0f);
  const size_t count = buffer.size();
  if (use_mirrored && device) {
    cuda_copy(device, buffer.data(), count * sizeof(float));
    run_tested(op, tested, device, device_piece, count, p);
    cuda_copy(buffer.data(), device, count * sizeof(float));
    if (op == Op::kReduceScatter) cuda_copy(piece.data(), device_piece, p.mine * sizeof(float));
  } else if (use_mirrored) {
    run_tested(op, tested, buffer.data(), piece.data(), count, p);
  } else {
    run_mpi(op, buffer.data(), piece.data(), count, p);
  }
  int64_t wrong = 0;
  const float ranks = static_cast<float>(n * (n + 1) / 2);
  switch (op) {
    case Op::kAllreduce:
      for (size_t i = 0; i < count; ++i) wrong += buffer[i] != ranks * value(0, i);
      break;
    case Op::kReduceScatter:
      for (size_t j = 0; j < p.mine; ++j) wrong += piece[j] != ranks * value(0, p.my_offset + j);
      break;
    case Op::kAllgather:
      for (int r = 0; r < n; ++r)
        for (size_t j = 0; j < p.counts[static_cast<size_t>(r)]; ++j) {
          const size_t i = static_cast<size_t>(p.offsets[static_cast<size_t>(r)]) + j;
          wrong += buffer[i] != value(r, i);
        }
      break;
  }
  return world.allreduce_value(wrong, comm::ReduceOp::kSum);
}

}  // namespace

int bench_allreduce(int& argc, char**& argv, const Args& args) {
  po::options_description desc("mirrored bench allreduce options");
  desc.add_options()("help,h", "print this help")(
      "min_bytes", po::value<int64_t>()->default_value(1024), "smallest message")(
      "max_bytes", po::value<int64_t>()->default_value(int64_t{64} << 20), "largest message (sizes double)")(
      "iters", po::value<int>()->default_value(20), "timed iterations per size")(
      "warmup", po::value<int>()->default_value(5), "untimed iterations per size")(
      "json", po::value<std::string>(), "also write the rows as JSON lines to this file")(
      "device", po::value<std::string>()->default_value("cpu"),
      "cpu: the MPI communicator on host buffers; cuda: NCCL on device buffers (one GPU per rank)");
  // The spelling of earlier versions, kept out of --help: every other flag has underscores.
  po::options_description deprecated;
  deprecated.add_options()("min-bytes", po::value<int64_t>(), "")("max-bytes", po::value<int64_t>(), "");
  po::options_description accepted;
  accepted.add(desc).add(deprecated);
  po::variables_map values;
  try {
    po::store(po::command_line_parser(args).options(accepted).run(), values);
    po::notify(values);
  } catch (const po::error& e) {
    throw InputError(str_cat("bench allreduce: ", e.what(), " (mirrored bench allreduce --help)"), ExitCode::kUsage);
  }
  if (values.count("help")) {
    std::printf("usage: mirrored bench allreduce [options]\n");
    std::cout << desc << "\n";
    return 0;
  }
  auto bytes_flag = [&](const char* name, const char* old_name) {
    if (!values.count(old_name)) return values[name].as<int64_t>();
    if (!values[name].defaulted())
      throw InputError(str_cat("bench allreduce: --", name, " and --", old_name, " given together"), ExitCode::kUsage);
    if (process_identity().rank == 0)
      rank_warning(str_cat("bench allreduce: --", old_name, " is deprecated; use --", name));
    return values[old_name].as<int64_t>();
  };
  const int64_t min_bytes = bytes_flag("min_bytes", "min-bytes"), max_bytes = bytes_flag("max_bytes", "max-bytes");
  const int iters = values["iters"].as<int>(), warmup = values["warmup"].as<int>();
  if (min_bytes < 4 || max_bytes < min_bytes || iters < 1 || warmup < 0)
    throw InputError("bench allreduce: expected 4 <= --min_bytes <= --max_bytes, --iters >= 1, --warmup >= 0",
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
  chief_print(str_cat("# mirrored bench allreduce: ", n, " ranks, float32 sum, ", iters, " iters, ", warmup,
                      " warmup; time averaged over ranks, best of ", kRounds, " alternating rounds"));
  chief_print("# size: the whole buffer (reduce-scatter input, all-gather output); busbw = algbw x 2(n-1)/n "
              "(all-reduce) or (n-1)/n (reduce-scatter, all-gather)");

  std::vector<Row> rows;
  std::vector<float> buffer(static_cast<size_t>(max_bytes / 4));  // touched once, reused for all sizes
  std::fill(buffer.begin(), buffer.end(), 1.0f);
  std::vector<float> piece(buffer.size() / static_cast<size_t>(n) + 1, 0.0f);
  Tensor device_buffer, device_piece;
  if (on_gpu) {
    device_buffer = Tensor({static_cast<int64_t>(buffer.size())}, DType::kF32, runtime.device());
    device_piece = Tensor({static_cast<int64_t>(piece.size())}, DType::kF32, runtime.device());
  }
  float* tested_data = on_gpu ? device_buffer.data<float>() : buffer.data();
  float* tested_piece = on_gpu ? device_piece.data<float>() : piece.data();
  int64_t total_wrong = 0;
  for (const Op op : kOps) {
    const double bus = bus_factor(op, n);
    chief_print(str_cat("#                                  mirrored ", op_name(op), " (", tested.backend(),
                        on_gpu ? ", device" : "", ")    ", mpi_call(op), " (host)"));
    chief_print("#       size      count   type     time   algbw   busbw  #wrong      time   algbw   busbw  #wrong  ratio");
    chief_print("#        (B)   (elements)          (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)          algbw");
    for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
      Row row;
      row.op = op;
      row.bytes = bytes;
      row.count = bytes / 4;
      const auto count = static_cast<size_t>(row.count);
      const Pieces pieces = pieces_of(count, n, world.rank());
      std::vector<float> view(buffer.begin(), buffer.begin() + row.count);
      float* data = buffer.data();
      // Alternate the two in rounds and keep each one's best round, so a burst of load on a
      // shared machine cannot favour whichever ran first.
      row.mirrored_us = row.mpi_us = 1e300;
      for (int round = 0; round < kRounds; ++round) {
        row.mirrored_us = std::min(row.mirrored_us, time_us(world, warmup, iters, [&] {
          run_tested(op, tested, tested_data, tested_piece, count, pieces);
        }));
        row.mpi_us = std::min(row.mpi_us, time_us(world, warmup, iters, [&] {
          run_mpi(op, data, piece.data(), count, pieces);
        }));
      }
      row.wrong = count_wrong(op, world, tested, view, piece, pieces, true, on_gpu ? tested_data : nullptr,
                              on_gpu ? tested_piece : nullptr);
      row.mpi_wrong = count_wrong(op, world, tested, view, piece, pieces, false);
      // Either column wrong fails the run: a broken MPI underneath is as fatal as a broken
      // communicator, and the MPI column is the reference the ratio is read against.
      total_wrong += row.wrong + row.mpi_wrong;
      rows.push_back(row);
      const double algbw = static_cast<double>(bytes) / row.mirrored_us / 1e3;
      const double mpi_algbw = static_cast<double>(bytes) / row.mpi_us / 1e3;
      char line[256];
      std::snprintf(line, sizeof(line), "%12lld %10lld  float %9.1f %7.2f %7.2f %7lld %9.1f %7.2f %7.2f %7lld %6.2f",
                    static_cast<long long>(bytes), static_cast<long long>(row.count), row.mirrored_us, algbw,
                    algbw * bus, static_cast<long long>(row.wrong), row.mpi_us, mpi_algbw, mpi_algbw * bus,
                    static_cast<long long>(row.mpi_wrong), algbw / mpi_algbw);
      chief_print(line);
    }
  }
  chief_print(str_cat("# out of bounds values : ", total_wrong, " ", total_wrong ? "FAILED" : "OK"));
  for (const Op op : kOps) {
    double sum_busbw = 0, sum_ratio_1mb = 0;
    int count = 0, rows_1mb = 0;
    for (const auto& row : rows) {
      if (row.op != op) continue;
      sum_busbw += static_cast<double>(row.bytes) / row.mirrored_us / 1e3 * bus_factor(op, n);
      ++count;
      if (row.bytes >= (1 << 20)) {
        sum_ratio_1mb += row.mpi_us / row.mirrored_us;
        ++rows_1mb;
      }
    }
    char summary[200];
    std::snprintf(summary, sizeof(summary),
                  "# avg bus bandwidth    : %.3f GB/s;  mirrored/MPI algbw from 1 MB: %.3f  (%s)",
                  count ? sum_busbw / count : 0.0, rows_1mb ? sum_ratio_1mb / rows_1mb : 0.0, op_name(op));
    chief_print(summary);
  }
  if (values.count("json") && world.rank() == 0) {
    io::JsonlWriter json(values["json"].as<std::string>(), false);
    for (const auto& row : rows)
      json.write({{"op", std::string(op_name(row.op))},
                  {"bytes", row.bytes},
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
