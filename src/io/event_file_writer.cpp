#include "mirrored/io/event_file_writer.h"

#include <chrono>
#include <ctime>
#include <filesystem>

#include "mirrored/core/error.h"
#include "mirrored/core/process.h"
#include "mirrored/io/crc32c.h"
#include "mirrored/io/protobuf_writer.h"

namespace mirrored::io {
namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void append_u32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

}  // namespace

std::string encode_tfrecord(std::string_view data) {
  std::string record;
  const uint64_t length = data.size();
  for (int i = 0; i < 8; ++i) record.push_back(static_cast<char>((length >> (8 * i)) & 0xFFu));
  append_u32(record, mask_crc32c(crc32c(record.data(), 8)));
  record.append(data);
  append_u32(record, mask_crc32c(crc32c(data.data(), data.size())));
  return record;
}

std::string encode_file_version_event(double wall_time) {
  return ProtoWriter().fixed64(1, wall_time).bytes(3, "brain.Event:2").str();
}

std::string encode_scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars) {
  ProtoWriter summary;
  for (const auto& scalar : scalars) summary.message(1, ProtoWriter().bytes(1, scalar.tag).fixed32(2, scalar.value));
  return ProtoWriter().fixed64(1, wall_time).varint(2, static_cast<uint64_t>(step)).message(5, summary).str();
}

EventFileWriter::EventFileWriter(const std::string& directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error)
    throw Error(ExitCode::kFailure, str_cat("cannot create TensorBoard directory '", directory, "': ", error.message()));
  const double now = unix_seconds();
  path_ = (std::filesystem::path(directory) /
           str_cat("events.out.tfevents.", static_cast<int64_t>(now), ".", local_hostname()))
              .string();
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw Error(ExitCode::kFailure, str_cat("cannot create TensorBoard event file '", path_, "'"));
  write_record(encode_file_version_event(now));
}

void EventFileWriter::add_scalars(int64_t step, const std::vector<Scalar>& scalars) {
  write_record(encode_scalars_event(unix_seconds(), step, scalars));
}

void EventFileWriter::write_record(std::string_view data) {
  const std::string record = encode_tfrecord(data);
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  out_.flush();
  if (!out_) throw Error(ExitCode::kFailure, str_cat("cannot write TensorBoard event file '", path_, "'"));
}

}  // namespace mirrored::io
