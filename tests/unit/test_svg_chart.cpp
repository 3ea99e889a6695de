// io/svg_chart.h: the exact geometry of a tiny chart, escaping, and the empty chart.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "mirrored/io/svg_chart.h"

namespace mirrored::io {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The plot area is x 72..624 (552 px), y 30..254 (224 px): the axes of these points run
// 0..20 (ticks every 5) and 0..1 (ticks every 0.2).
LineChart tiny(bool steps) {
  return {"tiny", "step", "loss", {{"a", {{0, 0}, {10, 1}, {20, 0.5}}, steps, false}}, {}, false};
}

TEST(SvgChart, TicksAtOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_EQ(axis_ticks(0, 20, 6), (std::vector<double>{0, 5, 10, 15, 20}));
  EXPECT_EQ(axis_ticks(3, 97, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  const std::vector<double> small = axis_ticks(0.12, 0.31, 4);  // step 0.05: 0.10 .. 0.35
  ASSERT_EQ(small.size(), 6u);
  EXPECT_NEAR(small.front(), 0.10, 1e-12);
  EXPECT_NEAR(small.back(), 0.35, 1e-12);
  // One value: widened by half its size each way, then ticked (step 1: 1..5).
  EXPECT_EQ(axis_ticks(3, 3, 5), (std::vector<double>{1, 2, 3, 4, 5}));
  EXPECT_EQ(axis_ticks(0, 0, 4), (std::vector<double>{-1, -0.5, 0, 0.5, 1}));
  EXPECT_EQ(axis_ticks(0, 2, 5, 1), (std::vector<double>{0, 1, 2}));  // counts: whole numbers
}

TEST(SvgChart, LinePathHasExactCoordinates) {
  const std::string svg = render_svg(tiny(false));
  EXPECT_NE(svg.find("<path d=\"M72.00 254.00 L348.00 30.00 L624.00 142.00\""), std::string::npos) << svg;
  // Ticks: five along x, six along y, each a grid line and a label.
  EXPECT_NE(svg.find(">15</text>"), std::string::npos);
  EXPECT_NE(svg.find(">0.6</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<line "), 5u + 6u);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_EQ(svg.find("http"), std::string::npos);  // no namespace or other reference: inline in HTML
}

TEST(SvgChart, StaircaseAndGapsAndMarkers) {
  EXPECT_NE(render_svg(tiny(true)).find("d=\"M72.00 254.00 H348.00 V30.00 H624.00 V142.00\""), std::string::npos);
  LineChart gap = tiny(false);
  gap.series[0].points[1].y = std::numeric_limits<double>::quiet_NaN();
  // y now spans 0..0.5 (step 0.1): 0.5 is at the top.
  EXPECT_NE(render_svg(gap).find("d=\"M72.00 254.00 M624.00 30.00\""), std::string::npos) << render_svg(gap);
  LineChart marked = tiny(false);
  marked.markers.push_back({5, "shrink 2\u21921"});
  const std::string svg = render_svg(marked);
  EXPECT_NE(svg.find("<line x1=\"210.00\" y1=\"30\" x2=\"210.00\" y2=\"254\" stroke=\"#b00\""), std::string::npos) << svg;
  EXPECT_NE(svg.find(">shrink 2\u21921</text>"), std::string::npos);
}

TEST(SvgChart, EscapesEveryText) {
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  LineChart chart = tiny(false);
  chart.title = "<script>alert(1)</script>";
  chart.series[0].name = "x\" onload=\"y";
  chart.markers.push_back({5, "<img src=x>"});
  chart.x_label = "&";
  const std::string svg = render_svg(chart);
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_EQ(svg.find("<img"), std::string::npos);
  EXPECT_EQ(svg.find("\" onload"), std::string::npos);
  EXPECT_NE(svg.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">&amp;</text>"), std::string::npos);
}

TEST(SvgChart, EmptySeriesSaysNoData) {
  const LineChart empty{"Loss", "step", "loss", {{"training loss", {}, false, false}}, {{3, "shrink"}}, false};
  const std::string svg = render_svg(empty);
  EXPECT_NE(svg.find(">no data</text>"), std::string::npos);
  EXPECT_EQ(svg.find("<path"), std::string::npos);
  EXPECT_EQ(svg.find("<line"), std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  const LineChart no_series{"Loss", "step", "loss", {}, {}, false};
  EXPECT_NE(render_svg(no_series).find("no data"), std::string::npos);
}

TEST(SvgChart, LargeValuesGetShortLabels) {
  const LineChart chart{"t", "step", "samples/s", {{"s", {{0, 0}, {1, 52000}}, false, false}}, {}, true};
  const std::string svg = render_svg(chart);
  EXPECT_NE(svg.find(">60k</text>"), std::string::npos) << svg;
}

}  // namespace
}  // namespace mirrored::io
