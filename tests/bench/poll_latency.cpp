// How the way a rank waits for a nonblocking all-reduce changes its time: the mlp's
// gradient (235146 floats, 0.9 MB) all-reduced with MPI_Allreduce, with MPI_Iallreduce +
// MPI_Wait, with MPI_Iallreduce + an MPI_Test spin, and with the polling wait mirrored uses
// (200 tests, then sleeps between tests: comm/communicator.cpp). Medians over 200 calls,
// the slowest rank's. Raw MPI, no mirrored code: build and run it with
//   tests/bench/poll_latency.sh [NP]
#include <mpi.h>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
#include <algorithm>
using Clock = std::chrono::steady_clock;
static double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  int provided; MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int n = 235146; std::vector<float> buf(n, 1.0f);
  const int iters = 200;
  auto run = [&](const char* name, auto body) {
    std::vector<double> t;
    for (int i = 0; i < iters + 10; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now(); body(); double dt = now() - t0;
      if (i >= 10) t.push_back(dt);
    }
    std::sort(t.begin(), t.end());
    double med = t[t.size()/2];
    double all; MPI_Reduce(&med, &all, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) std::printf("%-40s median %.3f ms (max over ranks)\n", name, all * 1e3);
  };
  run("MPI_Allreduce (blocking)", [&] { MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); });
  run("MPI_Iallreduce + MPI_Wait", [&] { MPI_Request r; MPI_Iallreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r); MPI_Wait(&r, MPI_STATUS_IGNORE); });
  run("MPI_Iallreduce + test spin", [&] { MPI_Request r; MPI_Iallreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r); int f = 0; while (!f) MPI_Test(&r, &f, MPI_STATUS_IGNORE); });
  for (int us : {50, 10}) {
    char name[64]; std::snprintf(name, 64, "Iallreduce + 200 spins, then %dus sleeps", us);
    run(name, [&] { MPI_Request r; MPI_Iallreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r); int f = 0; for (int s = 0; !f; ++s) { MPI_Test(&r, &f, MPI_STATUS_IGNORE); if (!f && s > 200) std::this_thread::sleep_for(std::chrono::microseconds(us)); } });
  }
  MPI_Finalize();
}
