#pragma once
// TensorBoard event files: DIR/events.out.tfevents.<unix seconds>.<host>, a sequence of
// TFRecords (uint64 length, masked CRC-32C of the length, data, masked CRC-32C of the
// data), each holding one tensorflow.Event protobuf:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
// The first record carries file_version "brain.Event:2", as TensorBoard expects.
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace mirrored::io {

struct Scalar {
  std::string tag;   // "train/loss"; TensorBoard groups charts by the part before '/'
  float value = 0.0f;
};

// The encodings, exposed for tests.
std::string encode_tfrecord(std::string_view data);
std::string encode_file_version_event(double wall_time);
std::string encode_scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars);

class EventFileWriter {
 public:
  // Creates `directory` if needed and a new event file in it. Throws Error naming the path.
  explicit EventFileWriter(const std::string& directory);
  const std::string& path() const { return path_; }
  // One Event with every scalar at `step`, flushed so TensorBoard sees it while training runs.
  void add_scalars(int64_t step, const std::vector<Scalar>& scalars);

 private:
  void write_record(std::string_view data);
  std::string path_;
  std::ofstream out_;
};

}  // namespace mirrored::io
