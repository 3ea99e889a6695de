// Text corpora beyond plain files: .gz and .zst read streaming (whole, several members or
// frames, truncated, damaged, a bomb), directories walked as data from strangers (sorted,
// symlinks and other files skipped and named), .jsonl records' fields (errors with file and
// line), and the import of all of them giving the tokens of the plain concatenation, in one
// file or in shards.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "error_matchers.h"
#include "mirrored/core/error.h"
#include "mirrored/data/decompressing_reader.h"
#include "mirrored/data/document_reader.h"
#include "mirrored/data/text_import.h"
#include "mirrored/data/text_sources.h"
#include "mirrored/data/token_file.h"
#include "mirrored/io/hdf5.h"
#include "mirrored/io/jsonl_reader.h"
#include "temp_dir.h"

namespace mirrored::data {
namespace {

namespace fs = std::filesystem;
using mirrored::testing::expect_mentions;
using mirrored::testing::message_of;
using mirrored::testing::TempDir;

std::string gzip_of(const std::string& text) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&stream, static_cast<uLong>(text.size())) + 64, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

std::string zstd_of(const std::string& text, int level = 3) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const size_t size = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), level);
  EXPECT_FALSE(ZSTD_isError(size));
  out.resize(size);
  return out;
}

std::string write_file(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string read_all(const std::string& path) {
  DecompressingReader reader(path, /*follow_symlinks=*/false);
  std::string text;
  std::vector<uint8_t> buffer(1000);  // small: many calls, output split across them
  while (const size_t got = reader.read(buffer.data(), buffer.size())) text.append(buffer.begin(), buffer.begin() + got);
  return text;
}

// Text with some variety (so the compressors do not collapse it), `bytes` long.
std::string sample_text(size_t bytes, int seed) {
  std::string text;
  for (size_t i = 0; text.size() < bytes; ++i) text += str_cat("line ", i * 7919 + seed, " of sample ", seed, "\n");
  text.resize(bytes);
  return text;
}

// `text` as the inside of a JSON string.
std::string json_escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '"' || c == '\\') out += std::string("\\") + c;
    else out += c;
  }
  return out;
}

std::string tokens_of(const std::string& path) {
  const std::vector<uint8_t> bytes = io::H5File(path, io::H5File::Access::kRead).read_u8(kTokensDataset);
  return std::string(bytes.begin(), bytes.end());
}

TEST(DecompressingReader, GzipAndZstdGiveTheTextBackAcrossMembersAndFrames) {
  TempDir dir;
  const std::string a = sample_text(300000, 1), b = sample_text(5000, 2);
  EXPECT_EQ(read_all(write_file(dir.file("one.gz"), gzip_of(a))), a);
  EXPECT_EQ(read_all(write_file(dir.file("two.GZ"), gzip_of(a) + gzip_of(b))), a + b);  // `cat a.gz b.gz`
  EXPECT_EQ(read_all(write_file(dir.file("one.zst"), zstd_of(a))), a);
  EXPECT_EQ(read_all(write_file(dir.file("two.zst"), zstd_of(a) + zstd_of(b, 19))), a + b);
  EXPECT_EQ(read_all(write_file(dir.file("plain.txt"), a)), a);
  EXPECT_EQ(read_all(write_file(dir.file("empty.gz"), "")), "");

  DecompressingReader reader(dir.file("one.zst"), false);
  std::vector<uint8_t> buffer(1 << 20);
  while (reader.read(buffer.data(), buffer.size()) > 0) {
  }
  EXPECT_EQ(reader.bytes_given(), a.size());
  EXPECT_EQ(reader.file_bytes_read(), fs::file_size(dir.file("one.zst")));
}

TEST(DecompressingReader, TruncatedAndDamagedStreamsNameTheFile) {
  TempDir dir;
  const std::string text = sample_text(200000, 3);
  const std::string gz = gzip_of(text), zst = zstd_of(text);
  const std::string cut_gz = write_file(dir.file("cut.txt.gz"), gz.substr(0, gz.size() / 2));
  expect_mentions(message_of<InputError>([&] { read_all(cut_gz); }), {"'" + cut_gz + "'", "truncated gzip"});
  // Only the 8-byte trailer (CRC-32, length) missing: still truncated, not silently short.
  const std::string no_trailer = write_file(dir.file("trailer.gz"), gz.substr(0, gz.size() - 8));
  expect_mentions(message_of<InputError>([&] { read_all(no_trailer); }), {"trailer.gz", "truncated gzip"});
  const std::string cut_zst = write_file(dir.file("cut.zst"), zst.substr(0, zst.size() - 3));
  expect_mentions(message_of<InputError>([&] { read_all(cut_zst); }), {"'" + cut_zst + "'", "truncated zstd"});

  std::string flipped = gz;
  flipped[gz.size() - 6] ^= 0x55;  // in the stored CRC-32
  expect_mentions(message_of<InputError>([&] { read_all(write_file(dir.file("bad.gz"), flipped)); }),
                  {"bad.gz", "damaged gzip data"});
  expect_mentions(message_of<InputError>([&] { read_all(write_file(dir.file("tail.gz"), gz + "junk after it")); }),
                  {"tail.gz", "damaged gzip data"});
  expect_mentions(message_of<InputError>([&] { read_all(write_file(dir.file("plain.zst"), text)); }),
                  {"plain.zst", "damaged zstd data"});

  // A frame declaring a 256 MiB window (zstd --long=28, streamed: the size unknown up front,
  // so the window is not shrunk to it) is refused before any of it is held.
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_windowLog, 28);
  std::string wide(ZSTD_compressBound(text.size()) + 1024, '\0');
  ZSTD_outBuffer out{wide.data(), wide.size(), 0};
  ZSTD_inBuffer in{text.data(), text.size(), 0};
  ZSTD_compressStream2(context, &out, &in, ZSTD_e_continue);
  while (ZSTD_compressStream2(context, &out, &in, ZSTD_e_end) != 0) {
  }
  wide.resize(out.pos);
  ZSTD_freeCCtx(context);
  expect_mentions(message_of<InputError>([&] { read_all(write_file(dir.file("wide.zst"), wide)); }),
                  {"wide.zst", "window above 128 MiB"});
}

TEST(DecompressingReader, ABombIsRefusedByWhatWasRead) {
  TempDir dir;
  // 16 MiB of zeros compress to well under a KiB in zstd (run-length blocks), far beyond 1100:1.
  const std::string bomb = write_file(dir.file("bomb.txt.zst"), zstd_of(std::string(16 << 20, '\0'), 1));
  ASSERT_LT(fs::file_size(bomb), 8000u);
  expect_mentions(message_of<InputError>([&] { read_all(bomb); }), {"bomb.txt.zst", "decompression bomb"});
}

TEST(DecompressingReader, SymlinksAndOtherFilesAreRefusedWhenNotFollowing) {
  TempDir dir;
  const std::string target = write_file(dir.file("target.txt"), "text");
  fs::create_symlink(target, dir.file("link.txt"));
  expect_mentions(message_of<InputError>([&] { DecompressingReader(dir.file("link.txt"), false); }),
                  {"link.txt", "a symlink (not followed)"});
  DecompressingReader followed(dir.file("link.txt"), true);  // named by the user: followed
  ASSERT_EQ(::mkfifo(dir.file("fifo.txt").c_str(), 0600), 0);
  expect_mentions(message_of<InputError>([&] { DecompressingReader(dir.file("fifo.txt"), true); }),
                  {"fifo.txt", "not a regular file"});
  expect_mentions(message_of<InputError>([&] { DecompressingReader(dir.file("none.gz"), true); }),
                  {"none.gz", "does not exist"});
}

TEST(TextSources, ADirectoryIsWalkedInPathOrderSkippingWhatIsNotText) {
  TempDir dir;
  const std::string root = dir.file("corpus");
  write_file(root + "/b.txt", "b");
  write_file(root + "/a/z.md", "z");
  write_file(root + "/a.txt", "a");
  write_file(root + "/c.JSONL.ZST", "");
  write_file(root + "/notes.pdf", "pdf");
  write_file(root + "/d/e.txt.gz", "");
  fs::create_symlink(root + "/b.txt", root + "/link.txt");
  fs::create_directory_symlink(dir.path(), root + "/loop");  // not entered
  ASSERT_EQ(::mkfifo((root + "/pipe.txt").c_str(), 0600), 0);

  const TextSources sources = find_text_sources({root});
  std::vector<std::string> relative;
  for (const TextSource& file : sources.files) {
    relative.push_back(fs::path(file.path).lexically_relative(root).generic_string());
    EXPECT_TRUE(file.walked);
  }
  // "a.txt" < "a/z.md": byte order of the whole relative path ('.' 0x2E before '/' 0x2F).
  EXPECT_EQ(relative, (std::vector<std::string>{"a.txt", "a/z.md", "b.txt", "c.JSONL.ZST", "d/e.txt.gz"}));
  EXPECT_EQ(sources.files[3].format, TextFormat::kJsonl);
  const std::string summary = describe_skipped(sources.skipped);
  expect_mentions(summary, {"4 skipped", "2 a symlink", "link.txt", "loop", "1 not a regular file", "pipe.txt",
                            "1 not .txt/.md/.jsonl[.gz|.zst]", "notes.pdf"});

  const std::string empty = dir.file("nothing");
  write_file(empty + "/x.html", "x");
  expect_mentions(message_of<InputError>([&] { find_text_sources({empty}); }),
                  {"nothing", "no .txt, .md or .jsonl file", "1 skipped", "x.html"});
}

TEST(JsonlRecords, TheFieldsStringIsTheDocument) {
  EXPECT_EQ(io::json_string_field(R"({"id": 1, "meta": {"a": [1, {"b": null}], "c": true}, "text": "caf\u00e9\n"})",
                                  "text", "f:1"),
            "caf\xc3\xa9\n");
  expect_mentions(message_of<InputError>([] { io::json_string_field(R"({"body": "x"})", "text", "f.jsonl:7"); }),
                  {"f.jsonl:7", "no field 'text'"});
  expect_mentions(message_of<InputError>([] { io::json_string_field(R"({"text": 12})", "text", "f.jsonl:8"); }),
                  {"f.jsonl:8", "'text' is a number", "expected a string"});
  expect_mentions(message_of<InputError>([] { io::json_string_field(R"({"text": ["a"]})", "text", "f:9"); }),
                  {"f:9", "'text' is an array"});
  expect_mentions(message_of<InputError>([] { io::json_string_field(R"({"text": "a", "text": "b"})", "text", "f:2"); }),
                  {"f:2", "appears twice"});
  expect_mentions(message_of<InputError>([] { io::json_string_field(R"({"text": "a)", "text", "f:3"); }),
                  {"f:3", "not a JSON record at column"});
  expect_mentions(message_of<InputError>([] { io::json_string_field(R"({"text": "a"} x)", "text", "f:4"); }),
                  {"f:4", "the end of the line"});
  std::string deep = R"({"text": "a", "x": )" + std::string(40, '[') + std::string(40, ']') + "}";
  expect_mentions(message_of<InputError>([&] { io::json_string_field(deep, "text", "f:5"); }), {"f:5", "nested at most"});
}

TEST(JsonlRecords, ErrorsInACompressedFileNameItsLine) {
  TempDir dir;
  const std::string path =
      write_file(dir.file("docs.jsonl.gz"), gzip_of("{\"text\": \"one\"}\n\n{\"text\": \"two\"}\r\n{\"txt\": \"three\"}\n"));
  std::vector<uint8_t> corpus;
  expect_mentions(message_of<InputError>([&] { append_documents({path, TextFormat::kJsonl}, "text", corpus); }),
                  {path + ":4", "no field 'text'"});
  expect_mentions(message_of<InputError>([&] { append_documents({path, TextFormat::kJsonl}, "", corpus); }),
                  {path, "--field NAME"});

  const std::string good = write_file(dir.file("good.jsonl"), "{\"text\": \"one\\n\"}\n\n{\"text\": \"two\"}");
  corpus.clear();
  const DocumentReadStats stats = append_documents({good, TextFormat::kJsonl}, "text", corpus);
  EXPECT_EQ(std::string(corpus.begin(), corpus.end()), "one\ntwo");
  EXPECT_EQ(stats.documents, 2);
}

TEST(JsonlRecords, RecordsAcrossBufferBoundariesAndLongerThanABuffer) {
  TempDir dir;
  // Records of 300 KB and one of 1.5 MiB: lines cut by the 1 MiB read buffer, and a line
  // longer than the buffer. An error on the last line still names its number.
  std::string jsonl, expected;
  for (int i = 0; i < 8; ++i) {
    const std::string text = sample_text(i == 5 ? (3u << 19) : 300000u, i);
    jsonl += "{\"text\": \"" + json_escaped(text) + "\", \"n\": " + std::to_string(i) + "}\n";
    expected += text;
  }
  const std::string good = write_file(dir.file("long.jsonl.zst"), zstd_of(jsonl));
  std::vector<uint8_t> corpus;
  EXPECT_EQ(append_documents({good, TextFormat::kJsonl}, "text", corpus).documents, 8);
  EXPECT_TRUE(std::string(corpus.begin(), corpus.end()) == expected);
  const std::string bad = write_file(dir.file("bad.jsonl"), jsonl + "{\"text\": null}\n");
  expect_mentions(message_of<InputError>([&] { append_documents({bad, TextFormat::kJsonl}, "text", corpus); }),
                  {bad + ":9", "'text' is null"});
}

// The corpus of the tests below: documents written plainly, compressed, and as records.
struct MixedCorpus {
  std::string root, plain;  // the folder, and one file of the same documents concatenated
};

MixedCorpus write_mixed_corpus(const TempDir& dir) {
  const std::string root = dir.file("corpus");
  const std::string one = sample_text(40000, 1), two = sample_text(30000, 2), three = "third \"doc\"\n\ttabbed\n";
  const std::string four = sample_text(50000, 4), five = sample_text(20000, 5);
  write_file(root + "/1-plain.txt", one);
  write_file(root + "/2-records.jsonl.gz",
             gzip_of("{\"id\": 1, \"text\": \"" + json_escaped(two) + "\"}\n{\"text\": \"" + json_escaped(three) +
                     "\", \"meta\": {\"tags\": [\"x\"]}}\n"));
  write_file(root + "/3-sub/four.md.zst", zstd_of(four));
  write_file(root + "/3-sub/five.txt.gz", gzip_of(five));
  write_file(root + "/3-sub/empty.txt", "");
  fs::create_symlink(root + "/1-plain.txt", root + "/0-link.txt");
  return {root, write_file(dir.file("plain.txt"), one + two + three + five + four)};
}

TEST(TextImport, ADirectoryOfMixedFilesGivesTheTokensOfThePlainConcatenation) {
  TempDir dir;
  const MixedCorpus corpus = write_mixed_corpus(dir);
  TextImportOptions options;
  options.jsonl_field = "text";
  const TextImportResult walked = import_text({corpus.root}, dir.file("walked"), options);
  const TextImportResult plain = import_text({corpus.plain}, dir.file("plain"), options);
  EXPECT_EQ(walked.total_bytes, plain.total_bytes);
  EXPECT_EQ(tokens_of(walked.train_path), tokens_of(plain.train_path));
  EXPECT_EQ(tokens_of(walked.val_path), tokens_of(plain.val_path));
  EXPECT_EQ(walked.parts.size(), 4u);  // five.txt.gz before four.md.zst: "3-sub/five" < "3-sub/four"
  EXPECT_EQ(walked.corpus.documents, 5);
  expect_mentions(describe_skipped(walked.corpus.skipped), {"2 skipped", "1 a symlink", "0-link.txt", "1 empty", "empty.txt"});
}

TEST(TextImport, ShardsHoldTheTokensOfTheOneFile) {
  TempDir dir;
  const MixedCorpus corpus = write_mixed_corpus(dir);
  TextImportOptions options;
  options.jsonl_field = "text";
  const TextImportResult whole = import_text({corpus.root}, dir.file("whole"), options);
  options.shard_bytes = 40000;
  const TextImportResult sharded = import_text({corpus.root}, dir.file("sharded"), options);
  ASSERT_EQ(sharded.train_shards.size(), 4u);  // 126018 training tokens, 40000 a shard
  EXPECT_EQ(sharded.train_shards[0], dir.file("sharded/train-00000-of-00004.h5"));
  EXPECT_EQ(sharded.train_path, dir.file("sharded/train-*-of-00004.h5"));
  ASSERT_EQ(sharded.val_shards.size(), 1u);
  EXPECT_EQ(sharded.val_path, dir.file("sharded/val.h5"));
  std::string joined;
  for (const std::string& shard : sharded.train_shards) joined += tokens_of(shard);
  EXPECT_EQ(joined, tokens_of(whole.train_path));
  EXPECT_EQ(tokens_of(sharded.val_path), tokens_of(whole.val_path));
  expect_mentions(open_token_file(sharded.train_shards[1]).source, {"tokens [40000, 80000) in shard 2 of 4"});
}

TEST(TextImport, EmptyAndBrokenInputsAreNamed) {
  TempDir dir;
  const std::string empty_gz = write_file(dir.file("empty.txt.gz"), gzip_of(""));
  expect_mentions(message_of<InputError>([&] { import_text({empty_gz}, dir.file("out")); }),
                  {"empty.txt.gz", "the text file is empty"});
  const std::string text = sample_text(5000, 9);
  const std::string cut = write_file(dir.file("d/cut.txt.zst"), zstd_of(text).substr(0, 40));
  expect_mentions(message_of<InputError>([&] { import_text({dir.file("d")}, dir.file("out")); }),
                  {"cut.txt.zst", "truncated zstd"});
  EXPECT_FALSE(fs::exists(dir.file("out/train.h5")));
}

}  // namespace
}  // namespace mirrored::data
