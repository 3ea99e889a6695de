#pragma once
// This replica's training losses of one epoch, left on the device where the loss kernel
// wrote them (one float per pass: micro-batch x virtual replica, DDP-style: no host wait
// in the step). The host reads
// them only where it reports them (log points, the progress bar's redraws, the NaN guard's
// messages); each value crosses to the host once, so reading often costs no more traffic.
#include <cstdint>
#include <vector>

#include "mirrored/core/tensor.h"

namespace mirrored::train {

class StepLosses {
 public:
  StepLosses() = default;
  // Room for `steps` steps of `passes` losses each, on `device`.
  StepLosses(Device device, int passes, int64_t steps);

  // Forgets what was read: a new epoch writes its steps from index 0 again.
  void restart();
  // Where step `index` of the epoch writes its pass losses: f32 [passes].
  Tensor slots(int64_t index) const;
  // This replica's loss of step `index`: its pass losses summed in float, divided by their
  // count (what train_step always reported). The first read of a step waits for it.
  float loss(int64_t index);
  // The sum, in double, of the losses of steps [from, to).
  double sum(int64_t from, int64_t to);
  // Every pass loss of steps [from, to), in step then pass order: the terms of an exact sum
  // over replicas (reduction = invariant).
  std::vector<double> pass_losses(int64_t from, int64_t to);

 private:
  void read_until(int64_t to);

  Tensor device_;              // [steps, passes]
  int passes_ = 1;
  int64_t steps_ = 0;
  std::vector<float> host_;         // step losses [0, read_) already on the host
  std::vector<float> host_passes_;  // their pass losses
  int64_t read_ = 0;
};

// A step's loss from its pass losses (f32 [passes], any device; waits for a GPU).
float step_loss(const Tensor& pass_losses);

}  // namespace mirrored::train
