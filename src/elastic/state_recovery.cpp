#include "mirrored/elastic/state_recovery.h"

#include <algorithm>

#include "mirrored/checkpoint/checkpoint_store.h"
#include "mirrored/core/error.h"
#include "mirrored/core/fingerprint.h"
#include "mirrored/elastic/shard_recovery.h"

namespace mirrored::elastic {
namespace {

// Every float of a checkpoint in one vector (parameters, buffers, optimizer state), in the
// order the model lays them out: the same on every replica.
std::vector<float> flatten(const io::Checkpoint& checkpoint) {
  std::vector<float> values;
  for (const auto* tensors : {&checkpoint.params, &checkpoint.buffers, &checkpoint.optimizer_state})
    for (const auto& tensor : *tensors) values.insert(values.end(), tensor.values.begin(), tensor.values.end());
  return values;
}

void unflatten(const std::vector<float>& values, io::Checkpoint& checkpoint) {
  size_t at = 0;
  for (auto* tensors : {&checkpoint.params, &checkpoint.buffers, &checkpoint.optimizer_state})
    for (auto& tensor : *tensors) {
      std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(at), tensor.values.size(), tensor.values.begin());
      at += tensor.values.size();
    }
  MIRRORED_CHECK(at == values.size(), "recovered state holds ", values.size(), " values, the model ", at);
}

// Replicated state (every survivor holds all of it): the last completed step is the most
// any survivor finished. A survivor that completed the interrupted step's all-reduce
// before the failure reached it holds that step's update, which is the one every replica
// would have applied; every survivor holding that step must hold the same bits
// (choose_replicated_holder). Returns the step; `state` (the writer's) is the state of that
// step.
int64_t recover_replicated(comm::Communicator& world, const Membership& membership,
                           const config::TrainConfig& config,
                           const std::optional<checkpoint::ReplicaSnapshot>& snapshot, int writer,
                           io::Checkpoint& state) {
  std::vector<float> values;
  if (snapshot) values = flatten(snapshot->checkpoint);
  const auto steps = world.allgather_value<int64_t>(snapshot ? snapshot->checkpoint.step : -1);
  const auto fingerprints = world.allgather_value<int64_t>(
      static_cast<int64_t>(fingerprint_bytes(values.data(), values.size() * sizeof(float))));
  const ReplicatedHolder holder = choose_replicated_holder(steps, fingerprints);
  if (!holder.disagreeing.empty())
    throw Error(ExitCode::kTooFewReplicas,
                str_cat("after losing ", describe_lost(membership), ": the survivors that completed step ", holder.step,
                        " hold different parameters or optimizer state (rank(s) ", join(holder.disagreeing, ", "),
                        " differ from rank ", holder.donor, "): an all-reduce returned a wrong sum when the peer "
                        "failed. Nothing was written; the newest checkpoint in ", checkpoint::checkpoint_dir(config),
                        " is intact: start the job again to resume from it (exit ",
                        static_cast<int>(ExitCode::kTooFewReplicas), ")"),
                true);
  const int64_t step = holder.step;
  const int donor = holder.donor;
  const bool writes = world.rank() == writer;
  if (writes) state = snapshot->checkpoint;
  if (donor == writer) return step;
  int64_t counters[2] = {0, 0};
  if (world.rank() == donor) {
    counters[0] = static_cast<int64_t>(values.size());
    counters[1] = snapshot->checkpoint.optimizer_steps;
  }
  world.broadcast(counters, 2, donor);
  values.resize(static_cast<size_t>(counters[0]));
  world.broadcast(values.data(), values.size(), donor);
  if (writes) {
    unflatten(values, state);
    state.optimizer_steps = counters[1];
  }
  return step;
}

// What every rank needs to know of the sharded state, from the writer: a spare just called
// in holds no snapshot.
struct ShardedLayout {
  int64_t shards = 0;
  int64_t numel = 0;          // parameter floats
  int64_t state_tensors = 0;  // optimizer state tensors
  int64_t keeper_distance = 0;
};

ShardedLayout layout_from_writer(comm::Communicator& world, const checkpoint::ReplicaSnapshot* snapshot, int writer) {
  int64_t values[4] = {0, 0, 0, 0};
  if (world.rank() == writer) {
    values[0] = snapshot->shards;
    for (const auto& param : snapshot->checkpoint.params) values[1] += static_cast<int64_t>(param.values.size());
    values[2] = static_cast<int64_t>(snapshot->checkpoint.optimizer_state.size());
    values[3] = snapshot->keeper_distance;
  }
  world.broadcast(values, 4, writer);
  return {values[0], values[1], values[2], values[3]};
}

// Sharded state: the newest step at which every shard survives on some survivor, as its
// owner's live or previous copy or its keeper's (distribute/shard_copies.h); each shard's holder
// sends it to the writer, which puts the whole state together. When a shard's owner and
// keeper are both lost, nothing is written: the run ends, naming them. `snapshot`: none on
// a spare just called in, which holds no copy.
int64_t recover_sharded(comm::Communicator& world, const Membership& membership,
                        const config::TrainConfig& config, const checkpoint::ReplicaSnapshot* snapshot, int writer,
                        io::Checkpoint& state) {
  const ShardedLayout layout = layout_from_writer(world, snapshot, writer);
  const int shards = static_cast<int>(layout.shards);
  // Every survivor's copies, as (shard, step, optimizer steps) triples.
  constexpr size_t kMaxPieces = 3;
  std::vector<int64_t> mine(3 * kMaxPieces, -1);
  const size_t pieces = snapshot ? snapshot->pieces.size() : 0;
  MIRRORED_CHECK(pieces <= kMaxPieces, pieces, " shard copies on one replica");
  for (size_t i = 0; i < pieces; ++i) {
    const distribute::ShardPiece& piece = snapshot->pieces[i];
    mine[3 * i] = piece.shard;
    mine[1 + 3 * i] = piece.step;
    mine[2 + 3 * i] = piece.optimizer_steps;
  }
  std::vector<int64_t> all(mine.size() * static_cast<size_t>(world.size()));
  world.allgather(mine.data(), all.data(), mine.size(), comm::DataType::kI64);
  std::vector<std::vector<HeldPiece>> held(static_cast<size_t>(world.size()));
  for (size_t r = 0; r < held.size(); ++r)
    for (size_t i = 0; i < kMaxPieces; ++i) {
      const int64_t* triple = &all[r * mine.size() + 3 * i];
      if (triple[0] >= 0) held[r].push_back({static_cast<int>(triple[0]), triple[1]});
    }
  const ShardHolders choice = choose_shard_holders(held, shards);
  if (choice.step < 0) {
    const auto distance = static_cast<int>(layout.keeper_distance);
    std::string lost;
    for (const int shard : choice.lost_shards) {
      const int keeper = (shard + distance) % shards;
      const auto host_of = [&](int rank) {
        for (const auto& entry : membership.lost)
          if (entry.rank == rank) return entry.host;
        for (const auto& entry : membership.replaced)
          if (entry.rank == rank) return entry.host;
        return std::string("?");
      };
      lost += str_cat(lost.empty() ? "" : "; ", "shard ", shard, ": its owner rank ", shard, " (", host_of(shard),
                      ") and its keeper rank ", keeper, " (", host_of(keeper), ")");
    }
    if (lost.empty()) lost = "no step at which every shard survives";
    throw Error(ExitCode::kTooFewReplicas,
                str_cat("lost both copies of sharded optimizer state: ", lost,
                        ". Nothing was written; the newest checkpoint in ", checkpoint::checkpoint_dir(config),
                        " is intact: start the job again to resume from it (exit ",
                        static_cast<int>(ExitCode::kTooFewReplicas), ")"),
                true);
  }
  // The holders send their pieces to the writer, shard by shard.
  const bool writes = world.rank() == writer;
  StateAssembly assembly(distribute::ShardPlan::make(layout.numel, shards, true),
                         static_cast<int>(layout.state_tensors));
  int64_t optimizer_steps = 0;
  std::vector<float> values;
  for (int shard = 0; shard < shards; ++shard) {
    const int holder = choice.holder[static_cast<size_t>(shard)];
    values.assign(assembly.piece_floats(shard), 0.0f);
    if (world.rank() == holder)
      for (const auto& piece : snapshot->pieces)
        if (piece.shard == shard && piece.step == choice.step) values = piece.values;
    world.broadcast(values.data(), values.size(), holder);
    if (writes) assembly.place(shard, values);
    for (size_t i = 0; i < kMaxPieces; ++i) {
      const int64_t* triple = &all[static_cast<size_t>(holder) * mine.size() + 3 * i];
      if (triple[0] == shard && triple[1] == choice.step) optimizer_steps = triple[2];
    }
  }
  if (writes) {
    state = snapshot->checkpoint;
    size_t at = 0;
    for (auto& param : state.params) {
      std::copy_n(assembly.params().begin() + static_cast<std::ptrdiff_t>(at), param.values.size(), param.values.begin());
      at += param.values.size();
    }
    for (size_t i = 0; i < state.optimizer_state.size(); ++i) state.optimizer_state[i].values = assembly.state()[i];
    state.optimizer_steps = optimizer_steps;
  }
  return choice.step;
}

}  // namespace

ReplicatedHolder choose_replicated_holder(const std::vector<int64_t>& steps, const std::vector<int64_t>& fingerprints) {
  MIRRORED_CHECK(steps.size() == fingerprints.size(), steps.size(), " steps but ", fingerprints.size(),
                 " fingerprints");
  ReplicatedHolder holder;
  if (steps.empty()) return holder;
  holder.step = *std::max_element(steps.begin(), steps.end());
  if (holder.step < 0) return holder;
  holder.donor = static_cast<int>(std::find(steps.begin(), steps.end(), holder.step) - steps.begin());
  for (size_t rank = 0; rank < steps.size(); ++rank)
    if (steps[rank] == holder.step && fingerprints[rank] != fingerprints[static_cast<size_t>(holder.donor)])
      holder.disagreeing.push_back(static_cast<int>(rank));
  return holder;
}

RecoveredState recover_state(comm::Communicator& world, const Membership& membership,
                             const config::TrainConfig& config,
                             const std::optional<checkpoint::ReplicaSnapshot>& snapshot, bool called_in) {
  // Who holds what: the shards the state was cut into (0: replicated), -1 without state,
  // kCalledIn for a spare that has just taken a lost rank's place (it holds none by design).
  constexpr int64_t kCalledIn = -2;
  const auto shards = world.allgather_value<int64_t>(called_in ? kCalledIn : snapshot ? snapshot->shards : -1);
  // The writer puts the state together: the lowest rank holding some (the chief, unless a
  // spare took the chief's place).
  const auto first_holder = std::find_if(shards.begin(), shards.end(), [](int64_t s) { return s >= 0; });
  const bool sharded = *std::max_element(shards.begin(), shards.end()) > 0;
  // A sharded state needs every survivor's copies; a replicated one only the writer's.
  const bool all_have_state =
      std::none_of(shards.begin(), shards.end(), [](int64_t s) { return s == -1; });
  RecoveredState recovered;
  if (first_holder == shards.end() || (sharded && !all_have_state)) return recovered;
  const int writer = static_cast<int>(first_holder - shards.begin());
  const std::optional<checkpoint::ReplicaSnapshot> none;
  const auto& held = called_in ? none : snapshot;
  io::Checkpoint& state = recovered.checkpoint;
  recovered.step = sharded ? recover_sharded(world, membership, config, held ? &*held : nullptr, writer, state)
                           : recover_replicated(world, membership, config, held, writer, state);
  recovered.writes = world.rank() == writer;
  if (recovered.writes) {
    state.step = recovered.step;
    state.epoch = recovered.step / state.steps_per_epoch;
    state.step_in_epoch = recovered.step % state.steps_per_epoch;
  }
  return recovered;
}

}  // namespace mirrored::elastic
