// One test per bound on what a key or a file may cost, and per strictness rule of the
// readers: each refusal is an InputError that names the key or file and says what was
// expected (or the memory the value would take), never a std exception or a huge allocation.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "error_matchers.h"
#include "mirrored/comm/health/flight_recorder.h"
#include "mirrored/config/config.h"
#include "mirrored/core/error.h"
#include "mirrored/data/text_import.h"
#include "mirrored/data/token_dataset.h"
#include "mirrored/data/token_file.h"
#include "mirrored/data/zip_archive.h"
#include "mirrored/io/jsonl_reader.h"
#include "mirrored/io/safetensors.h"
#include "temp_dir.h"
#include "zip_writer.h"

namespace {

using namespace mirrored;
using mirrored::testing::expect_mentions;
using mirrored::testing::message_of;
using mirrored::testing::TempDir;

// --- keys ----------------------------------------------------------------------------------

TEST(InputBounds, TraceCollectivesStatesTheMemoryItWouldTake) {
  EXPECT_EQ(config::parse_train_config({"--trace.collectives", "1000000"}).trace_collectives, 1000000);
  expect_mentions(message_of<InputError>([] { config::parse_train_config({"--trace.collectives", "200000000"}); }),
                  {"trace.collectives = 200000000", "16.4 GiB per rank", "expected 0 to 1000000"});
  // 1e14 would once end in std::bad_alloc.
  expect_mentions(message_of<InputError>([] { config::parse_train_config({"--trace.collectives", "100000000000000"}); }),
                  {"trace.collectives", "PiB per rank"});
  // The library's own guard, for callers that build a recorder without the config.
  expect_mentions(message_of<InputError>([] { comm::FlightRecorder recorder(2000000); }),
                  {"2000000 collectives", "per rank", "trace.collectives"});
}

TEST(InputBounds, CacheMbCannotWrapToNoBound) {
  EXPECT_EQ(config::parse_train_config({"--data.cache_mb", "16777216"}).data_cache_mb, int64_t{1} << 24);
  // 2^44 MiB is 2^64 bytes: shifted into bytes it was 0, "no bound".
  expect_mentions(message_of<InputError>([] { config::parse_train_config({"--data.cache_mb", "17592186044416"}); }),
                  {"data.cache_mb = 17592186044416", "16.0 EiB per rank", "expected 0 to 16777216"});
  expect_mentions(message_of<InputError>([] { config::parse_train_config({"--data.cache_mb", "12000000000000"}); }),
                  {"data.cache_mb", "EiB per rank"});
}

// --- safetensors -----------------------------------------------------------------------------

std::string safetensors(const TempDir& dir, const std::string& name, const std::string& header, size_t data_bytes) {
  const std::string path = dir.file(name);
  std::ofstream out(path, std::ios::binary);
  const uint64_t length = header.size();
  out.write(reinterpret_cast<const char*>(&length), 8);
  out << header << std::string(data_bytes, '\0');
  return path;
}

std::string tensor(const std::string& name, const std::string& shape, uint64_t begin, uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(begin) + "," +
         std::to_string(end) + "]}";
}

std::string safetensors_error(const std::string& path) {
  return message_of<InputError>([&] { io::SafetensorsFile{path}; });
}

TEST(InputBounds, SafetensorsRangesMustTileTheDataExactly) {
  TempDir dir;
  EXPECT_NO_THROW(io::SafetensorsFile(safetensors(dir, "ok.st", "{" + tensor("a", "[4]", 0, 16) + "," +
                                                                    tensor("b", "[2]", 16, 24) + "}", 24)));
  const std::string overlap = safetensors(dir, "overlap.st", "{" + tensor("a", "[4]", 0, 16) + "," + tensor("b", "[4]", 8, 24) + "}", 24);
  expect_mentions(safetensors_error(overlap), {overlap, "tensor b", "[8, 24) overlap tensor a's [0, 16)"});
  const std::string same = safetensors(dir, "same.st", "{" + tensor("a", "[4]", 0, 16) + "," + tensor("b", "[4]", 0, 16) + "}", 16);
  expect_mentions(safetensors_error(same), {same, "overlap"});
  const std::string gap = safetensors(dir, "gap.st", "{" + tensor("a", "[2]", 0, 8) + "," + tensor("b", "[2]", 16, 24) + "}", 24);
  expect_mentions(safetensors_error(gap), {gap, "bytes [8, 16) of the data belong to no tensor"});
  const std::string tail = safetensors(dir, "tail.st", "{" + tensor("a", "[2]", 0, 8) + "}", 12);
  expect_mentions(safetensors_error(tail), {tail, "4 bytes past the last tensor"});
}

TEST(InputBounds, SafetensorsCountsAndSizesCannotWrap) {
  TempDir dir;
  // 2^32 x 2^32 elements is 0 modulo 2^64: it matched an empty range before.
  const std::string count = safetensors(dir, "count.st", "{" + tensor("a", "[4294967296,4294967296]", 0, 0) + "}", 0);
  expect_mentions(safetensors_error(count), {count, "tensor a", "more than 2^64 elements"});
  // 2^62 elements of 4 bytes: the count fits, the byte size does not.
  const std::string bytes = safetensors(dir, "bytes.st", "{" + tensor("a", "[4611686018427387904]", 0, 0) + "}", 0);
  expect_mentions(safetensors_error(bytes), {bytes, "more than 2^64 bytes"});
  std::string shape65 = "[1";
  for (int i = 0; i < 64; ++i) shape65 += ",1";
  const std::string many = safetensors(dir, "many.st", "{" + tensor("a", shape65 + "]", 0, 4) + "}", 4);
  expect_mentions(safetensors_error(many), {many, "more than 64 dimensions"});
}

TEST(InputBounds, SafetensorsJsonEscapesAndNumbersAreInputErrors) {
  TempDir dir;
  const auto header_error = [&](const std::string& name, const std::string& header) {
    return safetensors_error(safetensors(dir, name, header, 0));
  };
  expect_mentions(header_error("u.st", R"({"__metadata__":{"k":"\uZZZZ"}})"), {"u.st", "not valid JSON", "four hex digits"});
  expect_mentions(header_error("lone.st", R"({"__metadata__":{"k":"\ud800x"}})"), {"lone.st", "low surrogate"});
  expect_mentions(header_error("esc.st", R"({"__metadata__":{"k":"\q"}})"), {"esc.st", "\\uXXXX"});
  expect_mentions(header_error("ctl.st", "{\"__metadata__\":{\"k\":\"a\tb\"}}"), {"ctl.st", "control character"});
  expect_mentions(header_error("big.st", "{" + tensor("a", "[99999999999999999999]", 0, 0) + "}"), {"big.st", "an integer"});
  expect_mentions(header_error("neg.st", "{" + tensor("a", "[-1]", 0, 0) + "}"), {"neg.st", "an integer"});
  expect_mentions(header_error("float.st", "{" + tensor("a", "[1.5]", 0, 0) + "}"), {"float.st", "an integer"});
  // Joined surrogates and \u escapes become UTF-8.
  const io::SafetensorsFile ok(safetensors(dir, "ok.st", R"({"__metadata__":{"k":"\u00e9\ud83d\ude00\/"}})", 0));
  EXPECT_EQ(ok.metadata().at("k"), "\xc3\xa9\xf0\x9f\x98\x80/");
}

// Reading a header takes at most 6 bytes per header byte, the header itself included, however
// it is shaped (here: the most tensors, each with 6 dimensions, a header can describe per
// byte); a 21 MB header once took 1.78 GB.
TEST(InputBounds, SafetensorsHeaderMemoryIsBoundedByItsSize) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's shadow memory and redzones grow the peak, so the bound is measured in the plain build";
#endif
  TempDir dir;
  std::string header = "{";
  const int tensors = 200000;
  for (int i = 0; i < tensors; ++i) header += (i ? "," : "") + tensor("t" + std::to_string(i), "[0,0,0,0,0,0]", 0, 0);
  header += "}";
  const std::string path = safetensors(dir, "many.st", header, 0);
  const pid_t child = fork();
  if (child == 0) {
    rusage before{};
    getrusage(RUSAGE_SELF, &before);
    const io::SafetensorsFile file(path);
    rusage after{};
    getrusage(RUSAGE_SELF, &after);
    const double grown = static_cast<double>(after.ru_maxrss - before.ru_maxrss) * 1024.0;
    std::printf("header %zu bytes, %d tensors: peak memory grew by %.1f MB (%.2f x the header)\n", header.size(),
                tensors, grown / 1e6, grown / static_cast<double>(header.size()));
    std::fflush(stdout);
    _exit(file.names().size() == static_cast<size_t>(tensors) && grown < 6.0 * static_cast<double>(header.size()) ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "more than 6 x the header's size (see above)";
}

// --- zip -------------------------------------------------------------------------------------

// A 1 MiB member declaring 1.15 GB (within the 1100:1 ratio a deflate stream can reach):
// refused after inflating what it really holds, without allocating what it declares.
TEST(InputBounds, ZipMembersInflateIntoWhatArrivesNotWhatTheyDeclare) {
  TempDir dir;
  const std::string path = dir.file("liar.zip");
  mirrored::testing::write_zip(path, {{"a.txt", std::string(1 << 20, 'x'), true, 1150000000u}});
  const pid_t child = fork();
  if (child == 0) {
    rusage before{};
    getrusage(RUSAGE_SELF, &before);
    const data::ZipArchive archive(path);
    std::string message;
    try {
      archive.read(archive.members().at(0));
    } catch (const InputError& e) {
      message = e.what();
    }
    rusage after{};
    getrusage(RUSAGE_SELF, &after);
    const long grown_mb = (after.ru_maxrss - before.ru_maxrss) / 1024;
    std::printf("%s (peak memory grew by %ld MB)\n", message.c_str(), grown_mb);
    std::fflush(stdout);
    _exit(message.find("inflates to 1048576 bytes, its directory entry says 1150000000") != std::string::npos &&
                  grown_mb < 64
              ? 0
              : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Past the ratio: refused before anything is inflated.
  mirrored::testing::write_zip(dir.file("ratio.zip"), {{"b.txt", std::string(1000, 'y'), true, 2000000000u}});
  const data::ZipArchive ratio(dir.file("ratio.zip"));
  expect_mentions(message_of<InputError>([&] { ratio.read(ratio.members().at(0)); }),
                  {"ratio.zip", "member b.txt declares 2000000000 bytes"});
  // Inflating past the declared size stops there.
  mirrored::testing::write_zip(dir.file("long.zip"), {{"c.txt", std::string(5000, 'z'), true, 100u}});
  const data::ZipArchive longer(dir.file("long.zip"));
  expect_mentions(message_of<InputError>([&] { longer.read(longer.members().at(0)); }),
                  {"long.zip", "member c.txt inflates to more than the 100 bytes"});
}

TEST(InputBounds, MemberGlobsMatchWithoutBacktracking) {
  const std::string name(63, 'a');
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(data::glob_match("*a*a*a*a*a*a*a*a*a*a*a*b", name));
  EXPECT_FALSE(data::glob_match("**/**/**/**/**/**/**/**/x", "a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/y"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 0.5) << "the glob backtracked (it never ended before)";
  EXPECT_TRUE(data::glob_match("*a*a*a*a*a*a*a*a*a*a*a*", name));
  EXPECT_TRUE(data::glob_match("*b*c", "abxbc"));
  EXPECT_TRUE(data::glob_match("a*b?d*", "axxbcd"));
  EXPECT_FALSE(data::glob_match("a*b?d", "axxbcde"));
  EXPECT_TRUE(data::glob_match("**/x/**/*.md", "p/q/x/r/s.md"));
  EXPECT_TRUE(data::glob_match("**", "a/b/c"));
  EXPECT_FALSE(data::glob_match("**/x", "a/b/c"));
}

// --- JSON records ----------------------------------------------------------------------------

TEST(InputBounds, JsonRecordNumbersAndEscapesAreInputErrors) {
  const auto error = [](const std::string& line) {
    return message_of<InputError>([&] { io::parse_json_object(line, "f.jsonl:1"); });
  };
  expect_mentions(error(R"({"a": "\uZZZZ"})"), {"f.jsonl:1", "column 10", "four hex digits"});
  expect_mentions(error(R"({"a": "\x"})"), {"f.jsonl:1", "\\uXXXX"});
  expect_mentions(error(R"({"a": 99999999999999999999999})"), {"f.jsonl:1", "an integer within 64 bits for 'a'"});
  expect_mentions(error(R"({"a": 1e400})"), {"f.jsonl:1", "within a double's range"});
  expect_mentions(error(R"({"a": nan})"), {"f.jsonl:1", "a number"});
  expect_mentions(error(R"({"a": 0x10})"), {"f.jsonl:1"});
  expect_mentions(error(R"({"a": +1})"), {"f.jsonl:1", "a number"});
  expect_mentions(error(R"({"a": [1, 2,]})"), {"f.jsonl:1"});
  const io::JsonObject ok = io::parse_json_object(R"({"s": "\u00e9\n", "i": -9223372036854775808, "d": 2.5e-3, "n": null})", "x");
  EXPECT_EQ(std::get<std::string>(ok.at("s")), "\xc3\xa9\n");
  EXPECT_EQ(std::get<int64_t>(ok.at("i")), INT64_MIN);
  EXPECT_EQ(std::get<double>(ok.at("d")), 2.5e-3);
  expect_mentions(message_of<InputError>([&] { io::json_integer(ok, "d", "x", 0, 10); }), {"'d' must be an integer"});
  expect_mentions(message_of<InputError>([&] { io::json_integer(ok, "i", "x", 0, 10); }), {"from 0 to 10"});
}

TEST(InputBounds, JsonRecordArraysOfFlatObjectsAreKeptAsText) {
  // A membership record's lost ranks (io::to_json_array), as elastic/membership.cpp writes it.
  const std::string lost = R"([{"rank": 1, "host": "node-b"}, {"rank": 3, "host": "n", "x": null}])";
  const io::JsonRecord written = {{"kind", std::string("membership")}, {"lost", io::JsonText{lost}}};
  const io::JsonObject read = io::parse_json_object(io::to_json(written), "m.jsonl:1");
  EXPECT_EQ(std::get<io::JsonText>(read.at("lost")).text, lost);
  EXPECT_EQ(std::get<std::string>(read.at("kind")), "membership");
  const auto error = [](const std::string& line) {
    return message_of<InputError>([&] { io::parse_json_object(line, "f.jsonl:1"); });
  };
  expect_mentions(error(R"({"a": [{"b": {"c": 1}}]})"), {"f.jsonl:1", "a number or string for 'a': 'b'"});
  expect_mentions(error(R"({"a": [{"b": 1}, 2]})"), {"f.jsonl:1"});
  expect_mentions(error(R"({"a": [{"b": 1})"), {"f.jsonl:1"});
}

// --- token files ----------------------------------------------------------------------------

TEST(InputBounds, ATokenizerModelIsAFileNameInItsOwnFolder) {
  TempDir dir;
  for (const std::string model : {"../../../../etc/passwd", "sub/tokenizer.model", "..", ".", "/etc/passwd"}) {
    data::TokenFileAttributes attributes;
    attributes.tokenizer = "sentencepiece";
    attributes.vocab_size = 300;
    attributes.tokenizer_model = model;
    attributes.tokenizer_sha256 = std::string(64, '0');
    const std::vector<uint16_t> tokens(100, 5);
    const std::string path = dir.file("t.h5");
    data::write_token_file(path, std::span<const uint16_t>(tokens), attributes);
    expect_mentions(message_of<InputError>([&] { data::describe_token_file(path); }),
                    {path, "tokenizer_model = '" + model + "'", "a file in the token file's own folder"});
  }
}

// What was checked is what is read: a file put in the path's place afterwards (a token
// beyond the vocabulary in it) is not what the dataset reads.
TEST(InputBounds, ATokenDatasetReadsTheFileItChecked) {
  TempDir dir;
  data::TokenFileAttributes attributes;
  attributes.tokenizer = "other";
  attributes.vocab_size = 1000;
  const std::vector<uint16_t> good(4096, 7), bad(4096, 999 + 1000);
  data::write_token_file(dir.file("t.h5"), std::span<const uint16_t>(good), attributes);
  data::TokenDataset dataset(dir.file("t.h5"));
  data::write_token_file(dir.file("swap.h5"), std::span<const uint16_t>(bad), attributes);
  std::filesystem::rename(dir.file("swap.h5"), dir.file("t.h5"));
  std::vector<int32_t> read(16);
  dataset.read(100, 16, read.data());
  EXPECT_EQ(read, std::vector<int32_t>(16, 7));
}

}  // namespace
