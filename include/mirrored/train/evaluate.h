#pragma once
#include <cstdint>

#include "mirrored/distribute/distributed_token_dataset.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/io/jsonl_writer.h"

namespace mirrored::train {

enum class EvalKind { kClassification, kLanguageModel };

struct EvalResult {
  EvalKind kind = EvalKind::kClassification;
  double loss = 0.0;      // mean over every sample of the set (language model: every token)
  double accuracy = 0.0;  // classification: top-1 over samples; language model: next-token top-1
  int64_t samples = 0;    // every sample (window) once, summed over replicas
  // Language model: the scored tokens, and the UTF-8 bytes they decode to (equal for byte
  // tokens), summed over replicas.
  int64_t tokens = 0;
  int64_t bytes = 0;
  // Language model: exp(loss) per token, and the summed loss in bits over the bytes the
  // tokens decode to, so byte and subword models compare on one scale.
  double perplexity() const;
  double bits_per_byte() const;
};

// Data-parallel evaluation: each replica scores its share, then sums are reduced.
EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model,
                    distribute::EvalDataset& data);
// The same over fixed validation windows: the loss is the mean over every scored token.
EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model,
                    distribute::TokenEvalDataset& data);

// The result's fields as metrics.jsonl eval records and `mirrored eval --json` name them:
// test_loss, test_accuracy, test_samples; for a language model val_loss, perplexity,
// bits_per_byte, val_windows.
void append_eval_fields(io::JsonRecord& record, const EvalResult& result);

}  // namespace mirrored::train
