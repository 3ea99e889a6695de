#include "mirrored/app/run_report.h"

#include <cmath>
#include <limits>

#include "mirrored/core/strings.h"
#include "mirrored/io/svg_chart.h"

namespace mirrored::app {
namespace {

using io::xml_escape;

constexpr const char* kStyle =
    "body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}"
    "h1{font-size:20px}h2{font-size:16px;margin-top:28px}"
    "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
    "th{background:#f3f3f3}.charts{display:flex;flex-wrap:wrap;gap:16px}"
    "figure{margin:0}figcaption{font-size:12px;color:#555;max-width:640px}pre{font-size:12px;background:#f8f8f8;padding:8px}";

// Every k-th point (and the last) when there are more than kMaxChartPoints.
std::vector<io::ChartPoint> thinned(const std::vector<io::ChartPoint>& points, size_t* stride) {
  *stride = points.size() <= kMaxChartPoints ? 1 : (points.size() + kMaxChartPoints - 1) / kMaxChartPoints;
  if (*stride == 1) return points;
  std::vector<io::ChartPoint> out;
  for (size_t i = 0; i < points.size(); i += *stride) out.push_back(points[i]);
  if ((points.size() - 1) % *stride != 0) out.push_back(points.back());
  return out;
}

std::string duration(double seconds) {
  if (seconds < 60) return fixed(seconds, 1) + " s";
  const auto whole = static_cast<int64_t>(std::llround(seconds));
  if (whole < 3600) return str_cat(whole / 60, " min ", whole % 60, " s");
  return str_cat(whole / 3600, " h ", (whole % 3600) / 60, " min");
}

std::string config_or(const RunRecords& records, const std::string& key, const std::string& otherwise = "-") {
  const std::string* value = records.config_value(key);
  return value && !value->empty() ? *value : otherwise;
}

// "gpt (4 layers, 4 heads, width 128, context 64)" from the resolved configuration.
std::string model_summary(const RunRecords& records) {
  const std::string model = config_or(records, "model");
  if (model == "gpt")
    return str_cat("gpt (", config_or(records, "gpt.layers"), " layers, ", config_or(records, "gpt.heads"),
                   " heads, width ", config_or(records, "gpt.width"), ", context ", config_or(records, "gpt.context"), ")");
  if (model == "mlp") return str_cat("mlp (hidden ", config_or(records, "model.hidden"), ")");
  if (model == "cnn") return str_cat("cnn (channels ", config_or(records, "cnn.channels"), ", fc ", config_or(records, "cnn.fc"), ")");
  if (model == "resnet")
    return str_cat("resnet (channels ", config_or(records, "resnet.channels"), ", ", config_or(records, "resnet.blocks"),
                   " blocks per stage)");
  return model;
}

std::string row(const std::string& name, const std::string& value) {
  return str_cat("<tr><th>", xml_escape(name), "</th><td>", xml_escape(value), "</td></tr>\n");
}

std::string header_table(const RunRecords& records) {
  std::string html = "<table>\n";
  html += row("model", model_summary(records));
  if (!records.train.empty()) {
    const int64_t first = records.train.front().world_size, last = records.train.back().world_size;
    html += row("world size", first == last ? str_cat(first, " replica(s)")
                                            : str_cat(first, " replica(s) at the start, ", last, " at the end"));
    const std::string limit = config_or(records, "max_steps", "0");
    html += row("steps", str_cat(records.train.back().step, " (max_steps ", limit, ", epochs ", config_or(records, "epochs"), ")"));
    html += row("final training loss", fixed(records.train.back().loss, 4));
  } else {
    html += row("steps", "no training record yet");
  }
  if (!records.eval.empty()) {
    const EvalRecord& eval = records.eval.back();
    std::string text = str_cat(eval.perplexity ? "validation loss " : "test loss ", fixed(eval.loss, 4));
    if (eval.accuracy) text += str_cat(", accuracy ", fixed(*eval.accuracy, 4));
    if (eval.perplexity) text += str_cat(", perplexity ", fixed(*eval.perplexity, 3));
    html += row("final evaluation", str_cat(text, " (step ", eval.step, ")"));
  }
  html += row("optimizer", str_cat(config_or(records, "optimizer"), ", lr ", config_or(records, "lr"), ", batch ",
                                   config_or(records, "batch_size"), " (global), precision ", config_or(records, "precision")));
  html += row("wall time", records.wall_s ? str_cat(duration(*records.wall_s), " (first start to the last record)") : "-");
  html += row("membership events", str_cat(records.membership.size()));
  html += row("straggler records", str_cat(records.stragglers.size()));
  return html + "</table>\n";
}

std::string figure(const io::LineChart& chart, const std::string& caption) {
  return str_cat("<figure>\n", io::render_svg(chart), "<figcaption>", xml_escape(caption), "</figcaption>\n</figure>\n");
}

std::string thinning_note(size_t stride) {
  return stride > 1 ? str_cat(" Drawn from one log point in ", stride, " and the last.") : std::string();
}

std::string loss_chart(const RunRecords& records) {
  io::LineChart chart{"Loss", "step", "loss", {}, {}, false};
  std::vector<io::ChartPoint> train, eval;
  for (const TrainRecord& r : records.train) train.push_back({static_cast<double>(r.step), r.loss});
  for (const EvalRecord& r : records.eval) eval.push_back({static_cast<double>(r.step), r.loss});
  size_t stride = 1, eval_stride = 1;
  chart.series.push_back({"training loss", thinned(train, &stride), false, false});
  const bool language_model = !records.eval.empty() && records.eval.front().perplexity.has_value();
  chart.series.push_back({language_model ? "validation loss" : "test loss", thinned(eval, &eval_stride), false, true});
  return figure(chart, str_cat("Training loss: the mean over each log interval (rank 0's replica batch); ",
                               language_model ? "validation" : "test", " loss at each evaluation.",
                               thinning_note(std::max(stride, eval_stride))));
}

std::string event_label(const MembershipEvent& event) {
  return str_cat(event.kind, " ", event.world_before, "\u2192", event.world_after);
}

std::string throughput_chart(const RunRecords& records) {
  bool tokens = false;
  for (const TrainRecord& r : records.train) tokens = tokens || r.tokens_per_sec.has_value();
  const std::string unit = tokens ? "tokens/s" : "samples/s";
  io::LineChart chart{"Throughput", "step", unit, {}, {}, true};
  std::vector<io::ChartPoint> points;
  for (const TrainRecord& r : records.train)
    points.push_back({static_cast<double>(r.step),
                      tokens ? r.tokens_per_sec.value_or(std::numeric_limits<double>::quiet_NaN()) : r.samples_per_sec});
  for (const MembershipEvent& event : records.membership)
    chart.markers.push_back({static_cast<double>(event.step), event_label(event)});
  size_t stride = 1;
  chart.series.push_back({unit + " over all replicas", thinned(points, &stride), false, false});
  return figure(chart, str_cat(unit, " over all replicas in each log interval; dashed lines mark membership events.",
                               thinning_note(stride)));
}

std::string world_chart(const RunRecords& records) {
  io::LineChart chart{"World size", "step", "replicas", {}, {}, true, true};
  std::vector<io::ChartPoint> points;
  size_t next_event = 0;
  for (const TrainRecord& r : records.train) {
    // The world changes at an event's step, before the next log point shows it.
    for (; next_event < records.membership.size() && records.membership[next_event].step < r.step; ++next_event)
      points.push_back({static_cast<double>(records.membership[next_event].step),
                        static_cast<double>(records.membership[next_event].world_after)});
    points.push_back({static_cast<double>(r.step), static_cast<double>(r.world_size)});
  }
  for (const MembershipEvent& event : records.membership)
    chart.markers.push_back({static_cast<double>(event.step), event_label(event)});
  size_t stride = 1;
  chart.series.push_back({"", thinned(points, &stride), true, false});
  return figure(chart, str_cat("Replicas in the job at each log point; dashed lines mark membership events "
                               "(shrink: ranks lost; replaced: lost ranks taken over by spares; grown: the world "
                               "restored).",
                               thinning_note(stride)));
}

std::string membership_table(const RunRecords& records) {
  if (records.membership.empty()) return "<p>No membership events: the world did not change.</p>\n";
  std::string html = "<table>\n<tr><th>step</th><th>event</th><th>world</th><th>who</th><th>recovery</th></tr>\n";
  for (const MembershipEvent& e : records.membership)
    html += str_cat("<tr><td>", e.step, "</td><td>", xml_escape(e.kind), "</td><td>", e.world_before, " \u2192 ",
                    e.world_after, "</td><td>", xml_escape(e.detail), "</td><td>",
                    e.recovery_s ? fixed(*e.recovery_s, 2) + " s" : "-", "</td></tr>\n");
  return html + "</table>\n";
}

std::string straggler_table(const RunRecords& records) {
  if (records.stragglers.empty())
    return "<p>No straggler records: no rank stayed below straggler.threshold for straggler.window log points.</p>\n";
  std::string html = "<table>\n<tr><th>step</th><th>rank</th><th>host</th><th>phase</th><th>score</th></tr>\n";
  for (const StragglerRecord& s : records.stragglers)
    html += str_cat("<tr><td>", s.step, "</td><td>", s.rank, "</td><td>", xml_escape(s.host), "</td><td>",
                    xml_escape(s.phase), "</td><td>", fixed(s.score, 2), "</td></tr>\n");
  return html + "</table>\n";
}

std::string ranks_table(const RunRecords& records) {
  if (records.ranks.empty()) return "<p>No ranks.jsonl.</p>\n";
  std::string html = "<table>\n<tr><th>rank</th><th>host</th><th>pid</th></tr>\n";
  for (const RankPlace& r : records.ranks)
    html += str_cat("<tr><td>", r.rank, "</td><td>", xml_escape(r.host), "</td><td>", r.pid, "</td></tr>\n");
  return html + "</table>\n";
}

std::string config_block(const RunRecords& records) {
  if (records.config.empty()) return "<p>No config.ini.</p>\n";
  std::string text;
  for (const auto& [key, value] : records.config) text += str_cat(key, " = ", value, "\n");
  return str_cat("<details><summary>config.ini (", records.config.size(), " keys)</summary>\n<pre>", xml_escape(text),
                 "</pre></details>\n");
}

}  // namespace

std::string run_report_html(const RunRecords& records) {
  const std::string title = str_cat("mirrored report: ", records.run_dir);
  std::string html = str_cat("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>",
                             xml_escape(title), "</title>\n<style>", kStyle, "</style>\n</head>\n<body>\n<h1>",
                             xml_escape(title), "</h1>\n");
  html += header_table(records);
  if (records.unfinished_lines > 0)
    html += str_cat("<p>The run is still writing: ", records.unfinished_lines,
                    " unfinished line at the end of metrics.jsonl was left out.</p>\n");
  html += "<h2>Charts</h2>\n<div class=\"charts\">\n";
  html += loss_chart(records) + throughput_chart(records) + world_chart(records);
  html += "</div>\n<h2>Membership events</h2>\n" + membership_table(records);
  html += "<h2>Straggler records</h2>\n" + straggler_table(records);
  html += "<h2>Ranks (ranks.jsonl)</h2>\n" + ranks_table(records);
  html += "<h2>Configuration</h2>\n" + config_block(records);
  return html + "</body>\n</html>\n";
}

}  // namespace mirrored::app
