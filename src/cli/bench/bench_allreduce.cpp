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

#include "../commands.h"
#include "mirrored/core/cuda_memory.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/process.h"
#include "mirrored/core/tensor.h"
#include "mirrored/core/timer.h"
#include "mirrored/core/file_replacement.h"
#include "mirrored/io/jsonl_writer.h"
#include "mirrored/runtime/runtime.h"

namespace mirrored::cli {
namespace po = boost::program_options;
namespace {

constexpr int kRounds = 3;

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

// Element i of rank r's input: (r + 1) * (i % 7 + 1), so every sum is exact in float.
float rank_value(int r, size_t i) { return static_cast<float>((r + 1) * static_cast<int>(i % 7 + 1)); }

// Elements of `data`, the sums for elements [begin, end) of the buffer, off the exact answer.
int64_t wrong_sums(const float* data, size_t begin, size_t end, int n) {
  const float ranks = static_cast<float>(n * (n + 1) / 2);
  int64_t wrong = 0;
  for (size_t i = begin; i < end; ++i) wrong += data[i - begin] != ranks * rank_value(0, i);
  return wrong;
}

// One collective measured: the project's communicator and Open MPI's own call on the same
// buffers, and its exact answer. Sizes are the whole buffer (nccl-tests' convention): a
// reduce-scatter reads `count` elements per rank and leaves each rank its piece; an
// all-gather assembles `count` elements from pieces. `data` holds `count` elements and
// `piece` this rank's share.
struct Collective {
  const char* name;
  const char* mpi_call;  // the block forms where the ranks divide the count, the "v" forms elsewhere
  double bus_per_alg;    // busbw = algbw x this x (n-1)/n (nccl-tests): 2 for all-reduce, 1 for the halves
  bool input_is_own_piece;  // all-gather: each rank contributes its piece, the rest of its input is -1
  void (*tested)(comm::Communicator& comm, float* data, float* piece, const Pieces& p);
  void (*mpi)(float* data, float* piece, const Pieces& p);
  int64_t (*wrong)(const float* data, const float* piece, const Pieces& p, int n);
};

size_t total(const Pieces& p) { return static_cast<size_t>(p.offsets.back()) + p.counts.back(); }

const Collective kCollectives[] = {
    {"allreduce", "MPI_Allreduce", 2.0, false,
     [](comm::Communicator& comm, float* data, float*, const Pieces& p) {
       comm.allreduce(data, total(p), comm::ReduceOp::kSum);
     },
     [](float* data, float*, const Pieces& p) {
       MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(total(p)), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
     },
     [](const float* data, const float*, const Pieces& p, int n) { return wrong_sums(data, 0, total(p), n); }},
    {"reduce_scatter", "MPI_Reduce_scatter(_block)", 1.0, false,
     [](comm::Communicator& comm, float* data, float* piece, const Pieces& p) {
       comm.reduce_scatter(data, piece, p.counts, comm::DataType::kF32, comm::ReduceOp::kSum);
     },
     [](float* data, float* piece, const Pieces& p) {
       if (p.equal)
         MPI_Reduce_scatter_block(data, piece, p.mpi_counts.front(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
       else
         MPI_Reduce_scatter(data, piece, p.mpi_counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
     },
     [](const float*, const float* piece, const Pieces& p, int n) {
       return wrong_sums(piece, p.my_offset, p.my_offset + p.mine, n);
     }},
    {"allgather", "MPI_Allgather(v), in place", 1.0, true,
     [](comm::Communicator& comm, float* data, float*, const Pieces& p) {
       comm.allgather_inplace(data, p.counts, comm::DataType::kF32);
     },
     [](float* data, float*, const Pieces& p) {
       if (p.equal)
         MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, p.mpi_counts.front(), MPI_FLOAT, MPI_COMM_WORLD);
       else
         MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, p.mpi_counts.data(), p.offsets.data(), MPI_FLOAT,
                        MPI_COMM_WORLD);
     },
     [](const float* data, const float*, const Pieces& p, int n) {
       int64_t wrong = 0;
       for (int r = 0; r < n; ++r)
         for (size_t j = 0; j < p.counts[static_cast<size_t>(r)]; ++j) {
           const size_t i = static_cast<size_t>(p.offsets[static_cast<size_t>(r)]) + j;
           wrong += data[i] != rank_value(r, i);
         }
       return wrong;
     }},
};

double bus_factor(const Collective& op, int n) { return n <= 1 ? 1.0 : op.bus_per_alg * (n - 1) / n; }

struct Row {
  const Collective* op = nullptr;
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

// Rank-filled inputs (an all-gather's input is each rank's own piece, the rest -1), one
// call, and the elements off the exact answer over all ranks. With `device` (device
// buffers of the same sizes) the tested collective runs there.
int64_t count_wrong(const Collective& op, comm::Communicator& world, comm::Communicator& tested,
                    std::vector<float>& buffer, std::vector<float>& piece, const Pieces& p, bool use_mirrored,
                    float* device = nullptr, float* device_piece = nullptr) {
  const int rank = world.rank();
  for (size_t i = 0; i < buffer.size(); ++i)
    buffer[i] = !op.input_is_own_piece || (i >= p.my_offset && i < p.my_offset + p.mine) ? rank_value(rank, i) : -1.0f;
  std::fill(piece.begin(), piece.end(), -1.0f);
  const size_t count = buffer.size();
  if (use_mirrored && device) {
    cuda_copy(device, buffer.data(), count * sizeof(float));
    op.tested(tested, device, device_piece, p);
    cuda_copy(buffer.data(), device, count * sizeof(float));
    cuda_copy(piece.data(), device_piece, p.mine * sizeof(float));
  } else if (use_mirrored) {
    op.tested(tested, buffer.data(), piece.data(), p);
  } else {
    op.mpi(buffer.data(), piece.data(), p);
  }
  return world.allreduce_value(op.wrong(buffer.data(), piece.data(), p, world.size()), comm::ReduceOp::kSum);
}

struct AllreduceBenchOptions {
  int64_t min_bytes = 0, max_bytes = 0;
  int iters = 0, warmup = 0;
  std::string json;  // empty: no JSON rows
  bool on_gpu = false;
};

// False on --help (printed).
bool parse_bench_options(const Args& args, AllreduceBenchOptions& out) {
  po::options_description desc("mirrored bench allreduce options");
  std::string device;
  desc.add_options()("help,h", "print this help")(
      "min_bytes", po::value<int64_t>()->default_value(1024), "smallest message")(
      "max_bytes", po::value<int64_t>()->default_value(int64_t{64} << 20), "largest message (sizes double)")(
      "iters", po::value(&out.iters)->default_value(20), "timed iterations per size")(
      "warmup", po::value(&out.warmup)->default_value(5), "untimed iterations per size")(
      "json", po::value(&out.json), "also write the rows as JSON lines to this file")(
      "device", po::value(&device)->default_value("cpu"),
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
    return false;
  }
  auto bytes_flag = [&](const char* name, const char* old_name) {
    if (!values.count(old_name)) return values[name].as<int64_t>();
    if (!values[name].defaulted())
      throw InputError(str_cat("bench allreduce: --", name, " and --", old_name, " given together"), ExitCode::kUsage);
    if (process_identity().rank == 0)
      rank_warning(str_cat("bench allreduce: --", old_name, " is deprecated; use --", name));
    return values[old_name].as<int64_t>();
  };
  out.min_bytes = bytes_flag("min_bytes", "min-bytes");
  out.max_bytes = bytes_flag("max_bytes", "max-bytes");
  if (out.min_bytes < 4 || out.max_bytes < out.min_bytes || out.iters < 1 || out.warmup < 0)
    throw InputError("bench allreduce: expected 4 <= --min_bytes <= --max_bytes, --iters >= 1, --warmup >= 0",
                     ExitCode::kUsage);
  if (device != "cpu" && device != "cuda")
    throw InputError(str_cat("bench allreduce: --device '", device, "': expected cpu or cuda"), ExitCode::kUsage);
  out.on_gpu = device == "cuda";
  return true;
}

// The buffers every size reuses: host ones for MPI (and the tested communicator on a CPU),
// device ones of the same sizes for it on a GPU.
struct Buffers {
  std::vector<float> host, piece;
  Tensor device, device_piece;
  float* tested_data = nullptr;
  float* tested_piece = nullptr;
};

Buffers make_buffers(const AllreduceBenchOptions& options, int n, Device device) {
  Buffers b;
  b.host.assign(static_cast<size_t>(options.max_bytes / 4), 1.0f);  // touched once
  b.piece.assign(b.host.size() / static_cast<size_t>(n) + 1, 0.0f);
  b.tested_data = b.host.data();
  b.tested_piece = b.piece.data();
  if (options.on_gpu) {
    b.device = Tensor({static_cast<int64_t>(b.host.size())}, DType::kF32, device);
    b.device_piece = Tensor({static_cast<int64_t>(b.piece.size())}, DType::kF32, device);
    b.tested_data = b.device.data<float>();
    b.tested_piece = b.device_piece.data<float>();
  }
  return b;
}

// One row: both columns timed in alternating rounds (each keeps its best, so a burst of load
// on a shared machine cannot favour whichever ran first), then both checked.
Row measure(const Collective& op, int64_t bytes, const AllreduceBenchOptions& options, comm::Communicator& world,
            comm::Communicator& tested, Buffers& b) {
  Row row;
  row.op = &op;
  row.bytes = bytes;
  row.count = bytes / 4;
  const Pieces pieces = pieces_of(static_cast<size_t>(row.count), world.size(), world.rank());
  row.mirrored_us = row.mpi_us = 1e300;
  for (int round = 0; round < kRounds; ++round) {
    row.mirrored_us = std::min(row.mirrored_us, time_us(world, options.warmup, options.iters, [&] {
      op.tested(tested, b.tested_data, b.tested_piece, pieces);
    }));
    row.mpi_us = std::min(row.mpi_us, time_us(world, options.warmup, options.iters, [&] {
      op.mpi(b.host.data(), b.piece.data(), pieces);
    }));
  }
  std::vector<float> view(b.host.begin(), b.host.begin() + row.count);
  row.wrong = count_wrong(op, world, tested, view, b.piece, pieces, true, options.on_gpu ? b.tested_data : nullptr,
                          options.on_gpu ? b.tested_piece : nullptr);
  row.mpi_wrong = count_wrong(op, world, tested, view, b.piece, pieces, false);
  return row;
}

void print_header(const Collective& op, const comm::Communicator& tested, bool on_gpu) {
  chief_print(str_cat("#                                  mirrored ", op.name, " (", tested.backend(),
                      on_gpu ? ", device" : "", ")    ", op.mpi_call, " (host)"));
  chief_print("#       size      count   type     time   algbw   busbw  #wrong      time   algbw   busbw  #wrong  ratio");
  chief_print("#        (B)   (elements)          (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)          algbw");
}

void print_row(const Row& row, int n) {
  const double bus = bus_factor(*row.op, n);
  const double algbw = static_cast<double>(row.bytes) / row.mirrored_us / 1e3;
  const double mpi_algbw = static_cast<double>(row.bytes) / row.mpi_us / 1e3;
  char line[256];
  std::snprintf(line, sizeof(line), "%12lld %10lld  float %9.1f %7.2f %7.2f %7lld %9.1f %7.2f %7.2f %7lld %6.2f",
                static_cast<long long>(row.bytes), static_cast<long long>(row.count), row.mirrored_us, algbw,
                algbw * bus, static_cast<long long>(row.wrong), row.mpi_us, mpi_algbw, mpi_algbw * bus,
                static_cast<long long>(row.mpi_wrong), algbw / mpi_algbw);
  chief_print(line);
}

void print_summary(const std::vector<Row>& rows, int64_t total_wrong, int n) {
  chief_print(str_cat("# out of bounds values : ", total_wrong, " ", total_wrong ? "FAILED" : "OK"));
  for (const Collective& op : kCollectives) {
    double sum_busbw = 0, sum_ratio_1mb = 0;
    int count = 0, rows_1mb = 0;
    for (const auto& row : rows) {
      if (row.op != &op) continue;
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
                  count ? sum_busbw / count : 0.0, rows_1mb ? sum_ratio_1mb / rows_1mb : 0.0, op.name);
    chief_print(summary);
  }
}

void write_json(const std::string& path, const std::vector<Row>& rows, int n, const std::string& backend) {
  std::string lines;
  for (const auto& row : rows)
    lines += io::to_json({{"op", std::string(row.op->name)},
                {"bytes", row.bytes},
                {"count", row.count},
                {"ranks", static_cast<int64_t>(n)},
                {"backend", backend},
                {"mirrored_us", row.mirrored_us},
                {"mpi_us", row.mpi_us},
                {"algbw_gbs", static_cast<double>(row.bytes) / row.mirrored_us / 1e3},
                {"mpi_algbw_gbs", static_cast<double>(row.bytes) / row.mpi_us / 1e3},
                {"wrong", row.wrong},
                {"mpi_wrong", row.mpi_wrong}}) + "\n";
  replace_file(path, lines);
}

}  // namespace

int bench_allreduce(int& argc, char**& argv, const Args& args) {
  AllreduceBenchOptions options;
  if (!parse_bench_options(args, options)) return 0;
  runtime::Runtime runtime(argc, argv,
                              {runtime::Launch::kMpi,
                               options.on_gpu ? runtime::DeviceChoice::kCuda : runtime::DeviceChoice::kCpu});
  auto& world = runtime.world();
  // The communicator under test: NCCL on device buffers with --device cuda (the MPI column
  // stays on host buffers of the same size, the path a CPU job would take).
  auto& tested = runtime.device_communicator();
  const int n = world.size();
  chief_print(str_cat("# mirrored bench allreduce: ", n, " ranks, float32 sum, ", options.iters, " iters, ",
                      options.warmup, " warmup; time averaged over ranks, best of ", kRounds, " alternating rounds"));
  chief_print("# size: the whole buffer (reduce-scatter input, all-gather output); busbw = algbw x 2(n-1)/n "
              "(all-reduce) or (n-1)/n (reduce-scatter, all-gather)");
  Buffers buffers = make_buffers(options, n, runtime.device());
  std::vector<Row> rows;
  int64_t total_wrong = 0;
  for (const Collective& op : kCollectives) {
    print_header(op, tested, options.on_gpu);
    for (int64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= 2) {
      rows.push_back(measure(op, bytes, options, world, tested, buffers));
      // Either column wrong fails the run: a broken MPI underneath is as fatal as a broken
      // communicator, and the MPI column is the reference the ratio is read against.
      total_wrong += rows.back().wrong + rows.back().mpi_wrong;
      print_row(rows.back(), n);
    }
  }
  print_summary(rows, total_wrong, n);
  if (!options.json.empty() && world.rank() == 0) write_json(options.json, rows, n, tested.backend());
  return total_wrong == 0 ? 0 : static_cast<int>(ExitCode::kFailure);
}

}  // namespace mirrored::cli
