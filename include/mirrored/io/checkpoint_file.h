#pragma once
// The checkpoint file: everything a run needs to continue bit-identically, in one HDF5 file.
//   root attributes  format = "mirrored-checkpoint", format_version, step, epoch,
//                    step_in_epoch, steps_per_epoch, world_size, optimizer,
//                    optimizer_steps, config (the resolved INI), params, buffers and
//                    optimizer_state (tensor names, one a line, in order), crc32
//   /params/<name>     float32, the parameter's shape (the layout of final.h5)
//   /buffers/<name>    float32, state that is not trained (batch norm running statistics)
//   /optimizer/<name>  float32 [numel], the optimizer's state (momentum, moments) in the
//                      logical layout: element i belongs to element i of the flat
//                      parameter arena, whatever the world size and optimizer.shard of the
//                      run that wrote it (a sharded run gathers it shard by shard), so any
//                      world size and either setting resumes it. Version 2 files already
//                      had this layout, so sharding needed no new format version.
// Version 1 files had no buffers; they are still read (with none).
// crc32 (zlib) covers every tensor's name, shape and bytes and every attribute above, so
// a flipped bit anywhere in the payload or a truncated file is caught before any value is
// used. Files are written atomically: a temporary file in the same directory, fsync, rename,
// fsync of the directory; a crash leaves either the old set of files or the new one.
//
// There is no RNG state to store: the data order is a function of (seed, epoch) and the
// position in the epoch, and weights are only drawn at initialisation.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mirrored/core/tensor.h"

namespace mirrored::io {

inline constexpr int64_t kCheckpointFormatVersion = 2;
inline constexpr int64_t kOldestReadableCheckpointVersion = 1;

struct CheckpointTensor {
  std::string name;
  Shape shape;
  std::vector<float> values;
  // crc32_ieee of `values`' bytes, where whatever filled them checksummed them on the way
  // (a background checkpoint's snapshot, as it copies), so that checkpoint_crc32 joins it
  // (crc32_ieee_combine) instead of reading the values again; empty: computed from
  // `values`. Whoever changes `values` afterwards resets it.
  std::optional<uint32_t> values_crc = std::nullopt;
};

struct Checkpoint {
  int64_t format_version = kCheckpointFormatVersion;
  int64_t step = 0;              // steps completed
  int64_t epoch = 0;             // the next step to run is (epoch, step_in_epoch)
  int64_t step_in_epoch = 0;
  int64_t steps_per_epoch = 0;
  int64_t world_size = 1;        // replicas that wrote it (resuming on another count is allowed)
  std::string optimizer;         // "sgd", "adam", "adamw"
  int64_t optimizer_steps = 0;
  std::string config;            // resolved INI text of the run that wrote it
  std::vector<CheckpointTensor> params;
  std::vector<CheckpointTensor> buffers;
  std::vector<CheckpointTensor> optimizer_state;
};

// zlib crc32 over the payload, as stored in the file's crc32 attribute.
uint32_t checkpoint_crc32(const Checkpoint& checkpoint);

// Atomic write (see above): through a unique temporary beside `path`
// (core/file_replacement.h). Throws Error(kCheckpoint) naming the path on any failure.
void write_checkpoint(const std::string& path, const Checkpoint& checkpoint);

// Removes the temporaries of checkpoint writes in `dir` whose writer died (a crash, a
// SIGKILL mid-write), and nothing else: not another program's file, not a write in
// progress. Returns how many.
size_t remove_abandoned_checkpoint_temporaries(const std::string& dir);

// Reads and verifies: format, version, the list of tensors, shapes against sizes, crc32.
// Any problem (missing, truncated, not HDF5, another format version, checksum mismatch)
// is an InputError(kCheckpoint) that names the file and what is wrong.
Checkpoint read_checkpoint(const std::string& path);

}  // namespace mirrored::io
