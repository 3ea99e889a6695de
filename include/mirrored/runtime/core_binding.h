#pragma once
// Ranks on one host each get their own cores, unless the launcher already placed them.
// Without binding, the scheduler moves a rank's threads between cores and lets two
// ranks' threads share one while another core idles; each such collision stalls a step,
// and the other ranks wait for it at the next all-reduce.
//
// kAuto binds every thread of the process (BLAS and OpenMP pools, MPI's, the reducer's
// communication thread, started later, inherits it) to a disjoint run of whole cores
// chosen by local rank, when
//  - every rank on the host found the same affinity mask (so no launcher bound them: a
//    launcher's binding, mpirun --bind-to core or srun --cpu-bind, gives ranks different
//    masks and is left as it is), and
//  - the mask holds at least one core per rank on the host (otherwise the ranks are
//    oversubscribed and no disjoint split exists).
// kOff leaves the mask as the process found it.
#include <string>
#include <vector>

#include "mirrored/comm/communicator.h"
#include "mirrored/runtime/cluster.h"

namespace mirrored::runtime {

enum class BindCores { kAuto, kOff };

struct CoreBinding {
  std::vector<int> found;  // the process's CPUs before binding
  std::vector<int> cpus;   // the CPUs bound to; empty when the mask was left alone
  std::string note;        // "cpus 0-3" or why the mask was left alone
  std::string summary;     // every rank's note on one "core binding: ..." line (bind_cores)
};

// The decision, from this rank's mask, the masks every rank on this host found (this
// rank's included), this rank's index among them, and the mask grouped into cores.
CoreBinding plan_core_binding(BindCores mode, const std::vector<int>& found,
                              const std::vector<std::vector<int>>& host_masks, int local_rank,
                              const std::vector<std::vector<int>>& cores);

// Collective over `world` unless mode is kOff: gathers the masks and binds; the result's
// summary holds every rank's binding on one line, for the command to print where its
// start-up output goes (so --quiet and eval --json stay clean).
CoreBinding bind_cores(BindCores mode, comm::Communicator& world, const Cluster& cluster);

}  // namespace mirrored::runtime
