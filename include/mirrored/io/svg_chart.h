#pragma once
// Line charts as inline SVG (mirrored report's pictures of a run): one or more series of
// (x, y) points over a linear x and y axis with ticks at 1, 2 or 5 times a power of ten,
// a legend, and labelled vertical markers (membership events). Text is XML-escaped, so a
// series or marker named by a run's records cannot add markup. No scripts, no external
// references: the SVG shows the same offline in any browser.
//
// Geometry (fixed, so tests can state coordinates exactly): the chart is kChartWidth x
// kChartHeight; the plot area spans x from kPlotLeft to kChartWidth - kPlotRight and y
// from kPlotTop to kChartHeight - kPlotBottom. Each axis runs from the tick at or below
// the smallest value to the tick at or above the largest (a single value v gets v - 1 to
// v + 1 when v is 0, else v -/+ |v|/2 before the ticks are chosen). Coordinates are
// written with two decimals.
#include <string>
#include <string_view>
#include <vector>

namespace mirrored::io {

inline constexpr double kChartWidth = 640, kChartHeight = 300;
inline constexpr double kPlotLeft = 72, kPlotRight = 16, kPlotTop = 30, kPlotBottom = 46;

// & < > " ' as entities: safe in element text and in attribute values.
std::string xml_escape(std::string_view text);

struct ChartPoint {
  double x = 0, y = 0;
};

struct ChartSeries {
  std::string name;
  std::vector<ChartPoint> points;  // in increasing x; a non-finite y breaks the line there
  bool steps = false;              // drawn as a staircase (a value that holds until the next point)
  bool dots = false;               // each point also drawn as a dot (sparse series: evaluations)
};

struct ChartMarker {
  double x = 0;
  std::string label;
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<ChartSeries> series;
  std::vector<ChartMarker> markers;
  bool y_from_zero = false;  // the y axis starts at 0 (throughput, world size)
  bool y_integers = false;   // y ticks at whole numbers only (counts: the world size)
};

// Tick values covering [low, high]: about `target` of them at a step of 1, 2 or 5 times a
// power of ten, from the multiple of the step at or below `low` to the one at or above
// `high`, the step at least `min_step`. low == high is widened as described above.
std::vector<double> axis_ticks(double low, double high, int target, double min_step = 0);

// The chart as one <svg> element. A chart with no finite point says "no data" in its plot
// area and draws no lines.
std::string render_svg(const LineChart& chart);

}  // namespace mirrored::io
