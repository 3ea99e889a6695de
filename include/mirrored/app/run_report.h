#pragma once
// `mirrored report`'s page: one self-contained HTML file (inline SVG charts, inline style,
// no scripts, no external reference) that shows a run from its records (app/run_records.h):
//   - a header: model and its shape, world size at the start and the end, steps, final loss
//     and evaluation, optimizer, batch, wall time;
//   - charts against the step: training loss with the evaluations (test or validation
//     loss), throughput (tokens/s for a language model, samples/s otherwise), the world size
//     with each membership event (shrink, replaced, grown) marked;
//   - tables: membership events, straggler records, the current ranks (ranks.jsonl), and the
//     whole resolved configuration.
// Every text taken from the run is escaped. A series longer than kMaxChartPoints is drawn
// from every k-th point (and its last), which the chart's caption says.
#include <cstddef>
#include <string>

#include "mirrored/app/run_records.h"

namespace mirrored::app {

inline constexpr size_t kMaxChartPoints = 2000;

std::string run_report_html(const RunRecords& records);

}  // namespace mirrored::app
