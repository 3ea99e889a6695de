#include "mirrored/train/timeline_writer.h"

#include <sstream>

#include "mirrored/core/error.h"
#include "mirrored/core/file_replacement.h"

namespace mirrored::train {

void write_timeline(const std::string& path, const Timeline& timeline, comm::Communicator& comm) {
  const auto per_rank = comm.allgather_strings(timeline.trace_events(comm.rank()));
  if (comm.rank() != 0) return;
  std::ostringstream out;
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  for (int rank = 0; rank < comm.size(); ++rank) {
    // Name each process after its rank so the viewer shows "rank 0", "rank 1", ...
    out << (first ? "" : ",\n") << R"({"name":"process_name","ph":"M","pid":)" << rank
        << R"(,"args":{"name":"rank )" << rank << "\"}}";
    first = false;
    const std::string& events = per_rank[static_cast<size_t>(rank)];
    if (!events.empty()) out << ",\n" << events;
  }
  out << "\n]}\n";
  replace_file(path, out.str());
}

}  // namespace mirrored::train
