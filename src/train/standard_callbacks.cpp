#include "mirrored/core/strings.h"
#include "mirrored/train/standard_callbacks.h"

#include <algorithm>
#include <cstdio>

#include "mirrored/checkpoint/run_directory.h"
#include "mirrored/core/log.h"
#include "mirrored/io/params_file.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::train {
namespace {
// The evaluation on one console line.
std::string eval_text(const EvalResult& eval) {
  if (eval.kind == EvalKind::kLanguageModel)
    return str_cat("val_loss ", fixed(eval.loss, 4), "  perplexity ", fixed(eval.perplexity(), 3), "  bits/byte ",
                   fixed(eval.bits_per_byte(), 4));
  return str_cat("test_loss ", fixed(eval.loss, 4), "  test_acc ", fixed(eval.accuracy, 4));
}
}  // namespace

void MetricsLogger::on_log(TrainContext& ctx, const LogPoint& point) {
  io::JsonRecord record{{"kind", std::string("train")},
                        {"step", point.step},
                        {"epoch", point.epoch + 1},
                        {"loss", point.loss},
                        {"lr", point.lr},
                        {"samples_per_sec", point.samples_per_sec}};
  if (point.tokens_per_sec) record.emplace_back("tokens_per_sec", *point.tokens_per_sec);
  record.emplace_back("comm_ms", point.comm_ms);
  record.emplace_back("exposed_comm_ms", point.exposed_comm_ms);
  record.emplace_back("world_size", point.world_size);
  if (point.grad_norm) record.emplace_back("grad_norm", *point.grad_norm);
  ctx.run_dir.log_metrics(record);
  if (point.rank_scores.empty()) return;
  // Every rank's straggler score per phase (mirrored info --ranks reads them back), then a
  // record per straggler.
  double lowest = 1.0;
  for (const auto& rank : point.rank_scores) lowest = std::min(lowest, lowest_score(rank).score);
  io::JsonRecord ranks{{"kind", std::string("rank_scores")}, {"step", point.step}, {"lowest", lowest}};
  for (int p = 0; p < kScoredPhases; ++p) {
    std::vector<double> scores;
    for (const auto& rank : point.rank_scores) scores.push_back(rank[static_cast<size_t>(p)]);
    ranks.emplace_back(scored_phase_name(p), std::move(scores));
  }
  ctx.run_dir.log_metrics(ranks);
  const auto& placements = ctx.strategy.runtime().cluster().placements();
  for (const auto& flag : point.stragglers) {
    const std::string host =
        static_cast<size_t>(flag.rank) < placements.size() ? placements[static_cast<size_t>(flag.rank)].host : "";
    ctx.run_dir.log_metrics({{"kind", std::string("straggler")},
                             {"step", point.step},
                             {"rank", static_cast<int64_t>(flag.rank)},
                             {"host", host},
                             {"phase", std::string(scored_phase_name(flag.phase))},
                             {"score", flag.score}});
  }
}

void MetricsLogger::on_evaluate(TrainContext& ctx, const EvalPoint& point) {
  io::JsonRecord record = {{"kind", std::string("eval")}, {"step", point.step}, {"epoch", point.epoch + 1}};
  append_eval_fields(record, point.eval);
  ctx.run_dir.log_metrics(record);
}

void ConsoleLogger::on_train_begin(TrainContext& ctx) {
  // The chief's share is the largest, the last rank's the smallest: a shrunk world, or
  // virtual replicas that do not divide over the ranks, split the batch unevenly.
  const int replicas = ctx.strategy.num_replicas_in_sync();
  const distribute::BatchPlan plan = ctx.strategy.batch_plan(ctx.config.batch_size);
  const int64_t most = plan.samples_of(0).size(), fewest = plan.samples_of(replicas - 1).size();
  chief_info(str_cat("mirrored train: ", replicas, " replica(s) x ", most == fewest ? str_cat(most) : str_cat(most, " or ", fewest),
                     " = global batch ", ctx.config.batch_size,
                     ", ", ctx.steps_per_epoch, " steps/epoch, ", ctx.model.parameters().numel(), " parameters, ",
                     kernels::cpu_threads(), " thread(s)/rank"));
  chief_verbose(ctx.model.module().summary());
}

void ConsoleLogger::on_evaluate(TrainContext& ctx, const EvalPoint& point) {
  if (ctx.config.eval_every > 0) chief_info(str_cat("step ", point.step, "  ", eval_text(point.eval)));
}

void ConsoleLogger::on_epoch_end(TrainContext& ctx, const EpochEnd& end) {
  // With eval_every > 0 an epoch may end before the first evaluation: nothing to show yet.
  const std::string eval = end.eval.samples > 0 ? str_cat(eval_text(end.eval), "  ") : std::string();
  if (ctx.config.model == config::ModelKind::kGpt) {
    // A language model: tokens, and its epoch only where the run spans one (a run cut
    // short inside its first epoch is labelled by its steps).
    const bool spans = ctx.total_steps >= ctx.steps_per_epoch;
    const int64_t epochs = (ctx.total_steps + ctx.steps_per_epoch - 1) / std::max<int64_t>(ctx.steps_per_epoch, 1);
    chief_info(str_cat(spans ? str_cat("epoch ", end.epoch + 1, "/", epochs) : str_cat("steps 1-", ctx.total_steps),
                       "  loss ", fixed(end.train_loss, 4), "  ", eval,
                       fixed(end.samples_per_sec * static_cast<double>(ctx.config.gpt_context), 0), " tokens/s  ",
                       fixed(end.seconds, 2), " s"));
    return;
  }
  chief_info(str_cat("epoch ", end.epoch + 1, "/", ctx.config.epochs, "  loss ", fixed(end.train_loss, 4), "  ", eval,
                     fixed(end.samples_per_sec, 0), " samples/s  ", fixed(end.seconds, 2), " s"));
}

void ConsoleLogger::on_train_end(TrainContext& ctx, const TrainSummary& summary) {
  const std::string result = summary.final_eval.kind == EvalKind::kLanguageModel
                                 ? str_cat("final ", eval_text(summary.final_eval))
                                 : str_cat("final test accuracy: ", fixed(summary.final_test_accuracy, 4));
  const bool tokens = ctx.config.model == config::ModelKind::kGpt;
  chief_print(str_cat(result, "  (", summary.steps, " steps, ",
                      tokens ? str_cat(fixed(summary.samples_per_sec * static_cast<double>(ctx.config.gpt_context), 0),
                                       " tokens/s")
                             : str_cat(fixed(summary.samples_per_sec, 0), " samples/s"),
                      " over ",
                      ctx.strategy.num_replicas_in_sync(), " replica(s))"));
}

void FinalParametersWriter::on_train_end(TrainContext& ctx, const TrainSummary&) {
  if (ctx.strategy.is_chief()) io::save_parameters(ctx.run_dir.file("final.h5"), ctx.model.parameters());
}

}  // namespace mirrored::train
