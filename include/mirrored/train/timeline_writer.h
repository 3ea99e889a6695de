#pragma once
#include <string>

#include "mirrored/comm/communicator.h"
#include "mirrored/core/timeline.h"

namespace mirrored::train {

// Collective: gathers every rank's spans and the chief writes one Chrome trace JSON file
// with one process (pid) per rank.
void write_timeline(const std::string& path, const Timeline& timeline, comm::Communicator& comm);

}  // namespace mirrored::train
