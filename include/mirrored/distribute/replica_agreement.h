#pragma once
// The first collective of a job checks that every replica was started the same way: the
// same model (every parameter's name, shape and offset), the same gradient buckets, the same
// precision, sharding and reduction options. Ranks started differently (an MPMD launch with
// another model.hidden on one rank, a stale binary, a different config file on one node)
// would otherwise broadcast parameters of different sizes, or issue collectives that never
// match, and hang until the collective timeout. Instead every rank stops within seconds
// with one message naming the first rank that differs from the chief and what differs.
//
// Compared once, as a 64-bit fingerprint of a text description (one all-gather); only when
// fingerprints differ are the descriptions themselves exchanged to name the difference.
#include <string>
#include <vector>

#include "mirrored/comm/communicator.h"
#include "mirrored/core/precision.h"
#include "mirrored/distribute/gradient_reducer.h"
#include "mirrored/nn/parameter_arena.h"

namespace mirrored::distribute {

// "key: value" lines, one per thing that must agree, in a fixed order.
std::vector<std::string> describe_replica(const nn::ParameterArena& arena, const ReducerOptions& reducer,
                                          int accumulate_steps, Precision precision);

// The first line where `other` differs from `chief` as "what: chief's value vs other's
// value", or "" when they are the same.
std::string first_difference(const std::vector<std::string>& chief, const std::vector<std::string>& other);

// Collective over `comm`: returns when every rank's `description` equals the chief's;
// otherwise throws the same usage error (exit 2) on every rank, naming the lowest rank that
// differs and its first differing line.
void require_same_replicas(const std::vector<std::string>& description, comm::Communicator& comm);

}  // namespace mirrored::distribute
