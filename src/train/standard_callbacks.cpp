#include "mirrored/train/standard_callbacks.h"

#include <cstdio>

#include "mirrored/core/log.h"
#include "mirrored/io/params_file.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/train/run_directory.h"

namespace mirrored::train {
namespace {
std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}
}  // namespace

void MetricsLogger::on_log(TrainContext& ctx, const LogPoint& point) {
  io::JsonRecord record{{"kind", std::string("train")},
                        {"step", point.step},
                        {"epoch", point.epoch + 1},
                        {"loss", point.loss},
                        {"lr", point.lr},
                        {"samples_per_sec", point.samples_per_sec},
                        {"comm_ms", point.comm_ms},
                        {"exposed_comm_ms", point.exposed_comm_ms}};
  if (point.grad_norm) record.emplace_back("grad_norm", *point.grad_norm);
  ctx.run_dir.log_metrics(record);
}

void MetricsLogger::on_epoch_end(TrainContext& ctx, const EpochEnd& end) {
  ctx.run_dir.log_metrics({{"kind", std::string("eval")},
                           {"step", end.step},
                           {"epoch", end.epoch + 1},
                           {"test_loss", end.eval.loss},
                           {"test_accuracy", end.eval.accuracy},
                           {"test_samples", end.eval.samples}});
}

void ConsoleLogger::on_train_begin(TrainContext& ctx) {
  chief_info(str_cat("mirrored train: ", ctx.strategy.num_replicas_in_sync(), " replica(s) x ",
                     ctx.strategy.per_replica_batch(ctx.config.batch_size), " = global batch ", ctx.config.batch_size,
                     ", ", ctx.steps_per_epoch, " steps/epoch, ", ctx.model.parameters().numel(), " parameters, ",
                     kernels::cpu_threads(), " thread(s)/rank"));
  chief_verbose(ctx.model.module().summary());
}

void ConsoleLogger::on_epoch_end(TrainContext& ctx, const EpochEnd& end) {
  chief_info(str_cat("epoch ", end.epoch + 1, "/", ctx.config.epochs, "  loss ", fixed(end.train_loss, 4),
                     "  test_loss ", fixed(end.eval.loss, 4), "  test_acc ", fixed(end.eval.accuracy, 4), "  ",
                     fixed(end.samples_per_sec, 0), " samples/s  ", fixed(end.seconds, 2), " s"));
}

void ConsoleLogger::on_train_end(TrainContext& ctx, const TrainSummary& summary) {
  chief_print(str_cat("final test accuracy: ", fixed(summary.final_test_accuracy, 4), "  (", summary.steps,
                      " steps, ", fixed(summary.samples_per_sec, 0), " samples/s over ",
                      ctx.strategy.num_replicas_in_sync(), " replica(s))"));
}

void FinalParametersWriter::on_train_end(TrainContext& ctx, const TrainSummary&) {
  if (ctx.strategy.is_chief()) io::save_parameters(ctx.run_dir.file("final.h5"), ctx.model.parameters());
}

}  // namespace mirrored::train
