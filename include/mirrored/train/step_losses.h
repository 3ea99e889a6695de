#pragma once
// This replica's training losses of one epoch, left on the device where the loss kernel
// wrote them (one float per micro-batch, DDP-style: no host wait in the step). The host reads
// them only where it reports them (log points, the progress bar's redraws, the NaN guard's
// messages); each value crosses to the host once, so reading often costs no more traffic.
#include <cstdint>
#include <vector>

#include "mirrored/core/tensor.h"

namespace mirrored::train {

class StepLosses {
 public:
  StepLosses() = default;
  // Room for `steps` steps of `micro_batches` losses each, on `device`.
  StepLosses(Device device, int micro_batches, int64_t steps);

  // Forgets what was read: a new epoch writes its steps from index 0 again.
  void restart();
  // Where step `index` of the epoch writes its micro-batch losses: f32 [micro_batches].
  Tensor slots(int64_t index) const;
  // This replica's loss of step `index`: its micro-batch losses summed in float, divided by
  // their count (what train_step always reported). The first read of a step waits for it.
  float loss(int64_t index);
  // The sum, in double, of the losses of steps [from, to).
  double sum(int64_t from, int64_t to);

 private:
  void read_until(int64_t to);

  Tensor device_;              // [steps, micro_batches]
  int micro_batches_ = 1;
  int64_t steps_ = 0;
  std::vector<float> host_;    // step losses [0, read_) already on the host
  int64_t read_ = 0;
};

// A step's loss from its micro-batch losses (f32 [K], any device; waits for a GPU).
float step_loss(const Tensor& micro_losses);

}  // namespace mirrored::train
