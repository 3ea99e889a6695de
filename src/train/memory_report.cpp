#include "mirrored/train/memory_report.h"

#include <algorithm>

#include "mirrored/core/log.h"
#include "mirrored/core/strings.h"

namespace mirrored::train {

MemoryFootprint memory_footprint(distribute::DistributedModel& model, optim::Optimizer& optimizer) {
  const int64_t arena_bytes = model.parameters().numel() * static_cast<int64_t>(sizeof(float));
  // Gradients: the arena and the buffers its communication uses.
  return {arena_bytes, arena_bytes + model.reducer().buffer_bytes(), optimizer.state_bytes()};
}

MemoryFootprint report_memory(comm::Communicator& comm, const MemoryFootprint& mine) {
  const auto params = comm.allgather_value(mine.param_bytes);
  const auto grads = comm.allgather_value(mine.grad_bytes);
  const auto state = comm.allgather_value(mine.optimizer_state_bytes);
  for (size_t r = 0; r < params.size(); ++r)
    chief_info(str_cat("memory rank ", r, ": parameters ", params[r], " B, gradients ", grads[r],
                       " B, optimizer state ", state[r], " B"));
  return {*std::max_element(params.begin(), params.end()), *std::max_element(grads.begin(), grads.end()),
          *std::max_element(state.begin(), state.end())};
}

io::JsonRecord memory_record(const MemoryFootprint& footprint) {
  return {{"kind", std::string("memory")},
          {"param_bytes", footprint.param_bytes},
          {"grad_bytes", footprint.grad_bytes},
          {"optimizer_state_bytes", footprint.optimizer_state_bytes}};
}

}  // namespace mirrored::train
