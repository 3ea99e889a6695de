#include "mirrored/io/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "mirrored/core/strings.h"

namespace mirrored::io {
namespace {

constexpr double kPlotWidth = kChartWidth - kPlotLeft - kPlotRight;
constexpr double kPlotHeight = kChartHeight - kPlotTop - kPlotBottom;
// Colours that stay apart for the common forms of colour blindness (Okabe and Ito).
constexpr const char* kPalette[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9"};
constexpr int kMaxTicks = 60;

std::string coordinate(double value) { return fixed(value, 2); }

// A tick's label: as many decimals as the step needs; thousands and millions shortened
// (52k) once the labels would be long.
std::string tick_label(double value, double step, double largest) {
  const auto decimals = [](double s) { return s >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(s) - 1e-9)); };
  if (std::abs(value) < step * 1e-9) return "0";  // no "-0", no "0k"
  if (largest >= 1e7 && step >= 1e6) return fixed(value / 1e6, decimals(step / 1e6)) + "M";
  if (largest >= 1e4 && step >= 1e3) return fixed(value / 1e3, decimals(step / 1e3)) + "k";
  return fixed(value, decimals(step));
}

struct Extent {
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    low = std::min(low, v);
    high = std::max(high, v);
  }
  bool empty() const { return low > high; }
};

// Maps data values onto the plot area along the axis its ticks span.
struct Axis {
  std::vector<double> ticks;
  double to_pixels(double value, double start, double length) const {
    return start + (value - ticks.front()) / (ticks.back() - ticks.front()) * length;
  }
};

void append_frame_and_title(std::string& svg, const LineChart& chart) {
  svg += str_cat("<svg class=\"chart\" width=\"", kChartWidth, "\" height=\"", kChartHeight, "\" viewBox=\"0 0 ",
                 kChartWidth, " ", kChartHeight, "\" font-family=\"sans-serif\" role=\"img\" aria-label=\"", xml_escape(chart.title), "\">\n");
  svg += str_cat("<title>", xml_escape(chart.title), "</title>\n");
  svg += str_cat("<text x=\"", kPlotLeft, "\" y=\"18\" font-size=\"14\" font-weight=\"bold\">", xml_escape(chart.title),
                 "</text>\n");
  svg += str_cat("<rect x=\"", kPlotLeft, "\" y=\"", kPlotTop, "\" width=\"", kPlotWidth, "\" height=\"", kPlotHeight,
                 "\" fill=\"none\" stroke=\"#888\"/>\n");
  svg += str_cat("<text x=\"", coordinate(kPlotLeft + kPlotWidth / 2), "\" y=\"", kChartHeight - 6,
                 "\" font-size=\"12\" text-anchor=\"middle\">", xml_escape(chart.x_label), "</text>\n");
  svg += str_cat("<text x=\"14\" y=\"", coordinate(kPlotTop + kPlotHeight / 2), "\" font-size=\"12\" text-anchor=\"middle\" "
                 "transform=\"rotate(-90 14 ", coordinate(kPlotTop + kPlotHeight / 2), ")\">", xml_escape(chart.y_label),
                 "</text>\n");
}

void append_ticks(std::string& svg, const Axis& x, const Axis& y) {
  const double x_step = x.ticks[1] - x.ticks[0], y_step = y.ticks[1] - y.ticks[0];
  const double x_largest = std::max(std::abs(x.ticks.front()), std::abs(x.ticks.back()));
  const double y_largest = std::max(std::abs(y.ticks.front()), std::abs(y.ticks.back()));
  for (const double tick : x.ticks) {
    const std::string px = coordinate(x.to_pixels(tick, kPlotLeft, kPlotWidth));
    svg += str_cat("<line x1=\"", px, "\" y1=\"", kPlotTop, "\" x2=\"", px, "\" y2=\"", kPlotTop + kPlotHeight,
                   "\" stroke=\"#e4e4e4\"/><text x=\"", px, "\" y=\"", kPlotTop + kPlotHeight + 16,
                   "\" font-size=\"11\" text-anchor=\"middle\">", tick_label(tick, x_step, x_largest), "</text>\n");
  }
  for (const double tick : y.ticks) {
    // The y axis grows upwards: its first tick is at the bottom of the plot.
    const std::string py = coordinate(y.to_pixels(tick, kPlotTop + kPlotHeight, -kPlotHeight));
    svg += str_cat("<line x1=\"", kPlotLeft, "\" y1=\"", py, "\" x2=\"", kPlotLeft + kPlotWidth, "\" y2=\"", py,
                   "\" stroke=\"#e4e4e4\"/><text x=\"", kPlotLeft - 6, "\" y=\"", py,
                   "\" dy=\"4\" font-size=\"11\" text-anchor=\"end\">", tick_label(tick, y_step, y_largest), "</text>\n");
  }
}

// The path of one series: M to its first point (and to the first after a gap), then L to
// each next point, or for a staircase H to the next x and V to its y.
std::string series_path(const ChartSeries& series, const Axis& x, const Axis& y) {
  std::string d;
  bool pen_down = false;
  for (const ChartPoint& point : series.points) {
    if (!std::isfinite(point.x) || !std::isfinite(point.y)) {
      pen_down = false;
      continue;
    }
    const std::string px = coordinate(x.to_pixels(point.x, kPlotLeft, kPlotWidth));
    const std::string py = coordinate(y.to_pixels(point.y, kPlotTop + kPlotHeight, -kPlotHeight));
    if (!d.empty()) d += ' ';
    if (!pen_down) d += str_cat("M", px, " ", py);
    else if (series.steps) d += str_cat("H", px, " V", py);
    else d += str_cat("L", px, " ", py);
    pen_down = true;
  }
  return d;
}

void append_series(std::string& svg, const LineChart& chart, const Axis& x, const Axis& y) {
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const ChartSeries& series = chart.series[i];
    const char* colour = kPalette[i % std::size(kPalette)];
    const std::string d = series_path(series, x, y);
    if (!d.empty())
      svg += str_cat("<path d=\"", d, "\" fill=\"none\" stroke=\"", colour, "\" stroke-width=\"1.5\"/>\n");
    if (!series.dots) continue;
    for (const ChartPoint& point : series.points)
      if (std::isfinite(point.x) && std::isfinite(point.y))
        svg += str_cat("<circle cx=\"", coordinate(x.to_pixels(point.x, kPlotLeft, kPlotWidth)), "\" cy=\"",
                       coordinate(y.to_pixels(point.y, kPlotTop + kPlotHeight, -kPlotHeight)), "\" r=\"3\" fill=\"",
                       colour, "\"/>\n");
  }
}

// Vertical dashed lines; their labels stack downwards so close events stay readable.
void append_markers(std::string& svg, const LineChart& chart, const Axis& x) {
  for (size_t i = 0; i < chart.markers.size(); ++i) {
    const std::string px = coordinate(x.to_pixels(chart.markers[i].x, kPlotLeft, kPlotWidth));
    svg += str_cat("<line x1=\"", px, "\" y1=\"", kPlotTop, "\" x2=\"", px, "\" y2=\"", kPlotTop + kPlotHeight,
                   "\" stroke=\"#b00\" stroke-dasharray=\"4 3\"/><text x=\"", px, "\" y=\"",
                   kPlotTop + 12 + static_cast<double>(i % 8) * 13, "\" dx=\"3\" font-size=\"11\" fill=\"#b00\">",
                   xml_escape(chart.markers[i].label), "</text>\n");
  }
}

// One entry per named series, left to right after the title's half of the top line.
void append_legend(std::string& svg, const LineChart& chart) {
  double at = kPlotLeft + kPlotWidth / 2;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    if (chart.series[i].name.empty()) continue;
    svg += str_cat("<rect x=\"", coordinate(at), "\" y=\"10\" width=\"12\" height=\"3\" fill=\"",
                   kPalette[i % std::size(kPalette)], "\"/><text x=\"", coordinate(at + 16),
                   "\" y=\"16\" font-size=\"11\">", xml_escape(chart.series[i].name), "</text>\n");
    at += 30 + 6.5 * static_cast<double>(chart.series[i].name.size());
  }
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> axis_ticks(double low, double high, int target, double min_step) {
  if (!(high > low)) {
    const double half = low == 0 ? 1 : std::abs(low) / 2;
    low -= half;
    high += half;
  }
  const double raw = (high - low) / std::max(target, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double residual = raw / magnitude;
  const double step =
      std::max(min_step, magnitude * (residual <= 1 ? 1 : residual <= 2 ? 2 : residual <= 5 ? 5 : 10));
  const double first = std::floor(low / step + 1e-9), last = std::ceil(high / step - 1e-9);
  const int count = std::min(static_cast<int>(last - first), kMaxTicks);
  std::vector<double> ticks;
  for (int i = 0; i <= count; ++i) ticks.push_back((first + i) * step);
  return ticks;
}

std::string render_svg(const LineChart& chart) {
  Extent xs, ys;
  for (const ChartSeries& series : chart.series)
    for (const ChartPoint& point : series.points)
      if (std::isfinite(point.x) && std::isfinite(point.y)) {
        xs.add(point.x);
        ys.add(point.y);
      }
  std::string svg;
  append_frame_and_title(svg, chart);
  if (xs.empty()) {
    svg += str_cat("<text x=\"", coordinate(kPlotLeft + kPlotWidth / 2), "\" y=\"",
                   coordinate(kPlotTop + kPlotHeight / 2), "\" font-size=\"13\" text-anchor=\"middle\" fill=\"#666\">"
                   "no data</text>\n</svg>\n");
    return svg;
  }
  for (const ChartMarker& marker : chart.markers) xs.add(marker.x);
  if (chart.y_from_zero) ys.add(0);
  const Axis x{axis_ticks(xs.low, xs.high, 6)}, y{axis_ticks(ys.low, ys.high, 5, chart.y_integers ? 1 : 0)};
  append_ticks(svg, x, y);
  append_markers(svg, chart, x);
  append_series(svg, chart, x, y);
  append_legend(svg, chart);
  svg += "</svg>\n";
  return svg;
}

}  // namespace mirrored::io
