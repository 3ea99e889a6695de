#include "mirrored/comm/mpi_tuning.h"

#include <cstdlib>

namespace mirrored::comm {

const char* choose_nonblocking_allreduce_algorithm() {
  constexpr const char* kVariable = "OMPI_MCA_coll_libnbc_iallreduce_algorithm";
  if (const char* chosen = std::getenv(kVariable); chosen != nullptr && *chosen != '\0') return chosen;
  setenv(kVariable, "ring", 1);
  return "ring";
}

}  // namespace mirrored::comm
