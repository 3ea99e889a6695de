#pragma once
// The gradients of this rank's virtual replicas (reduction = invariant, batch_plan.h), kept
// apart until one exact sum over every virtual replica on every rank.
//
// Each virtual replica's gradient is the same bits on any rank (same samples, same shapes,
// same kernels), and summed with accumulate_steps in micro-batch order, also the same on
// any rank. Adding two of them in float on one rank would make the result depend on which
// ones share a rank, so they are not added here: comm::exact_sum adds them all at once, in
// integers, whatever their spread (one segment, so one grid, per parameter tensor).
//
// The arena's gradient buffer is the working buffer backward accumulates into; it belongs
// to one virtual replica at a time. Switching to another saves it to that replica's slot
// and restores (or zeroes) the next one's. On the host saving and restoring exchange the
// memory behind the arena's gradient with the slot's (Tensor::swap_allocation: the layers'
// gradient views follow), so a switch costs one read of the saved gradient for its
// largest magnitudes, which set the exact sum's grids, and a zeroing: on the host the
// exact sum has done it already, zeroing each slot as it last read it (still in cache); on
// a GPU a switch is a copy.
// Memory is one gradient-sized slot per virtual replica on this rank beyond the first.
#include <cstdint>
#include <vector>

#include "mirrored/comm/communicator.h"
#include "mirrored/comm/exact_sum.h"
#include "mirrored/nn/parameter_arena.h"

namespace mirrored::distribute {

class VirtualReplicaGradients {
 public:
  // `local`: the virtual replicas on this rank; `total`: on all ranks together.
  VirtualReplicaGradients(nn::ParameterArena& arena, int local, int64_t total);

  int local() const { return static_cast<int>(slots_.size()); }
  // After zero_grad(): no virtual replica has a gradient yet.
  void restart();
  // Before a backward pass of local virtual replica `index`: the arena's gradient becomes
  // that replica's running sum.
  void begin(int index);
  // Collective: the arena's gradient becomes `scale` x the sum of every virtual replica's
  // gradient on every rank, the same bits on every rank at any world size. On the arena's
  // device (GPU gradients need a communicator that takes device buffers: NCCL).
  void sum(comm::Communicator& comm, float scale);

 private:
  // The arena's gradient into `replica`'s slot (host: the two exchange memory).
  void set_aside(int replica);
  // `replica`'s slot back into the arena's gradient.
  void take_back(int replica);

  nn::ParameterArena& arena_;
  std::vector<Tensor> slots_;     // slot i: replica i's running sum while another holds the arena
  std::vector<char> started_;     // replica i has had a backward pass since restart()
  // Slot i's memory holds +0 at every value: the exact sum zeroed it as it read it (host).
  std::vector<char> zeroed_;
  int holder_ = -1;               // the replica whose sum is in the arena's gradient
  // Host gradients: largest_[i][s], the largest magnitude's bits in segment s of slot i, found
  // when it was set aside; known_largest_, their maximum over the slots, for the exact sum.
  std::vector<std::vector<uint32_t>> largest_;
  std::vector<uint32_t> known_largest_;
  comm::ExactSum exact_sum_;  // one segment, so one grid, per parameter tensor
};

}  // namespace mirrored::distribute
