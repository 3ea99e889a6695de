#pragma once
// data.train / data.test as one dataset stored in several files (shards): a file, a
// comma-separated list of files, or a glob over the file names of one folder ('*' any run
// of characters, '?' one), in any mix. The shards are read in the order given, each glob's
// matches sorted by name, so the same spelling always gives the same dataset.
#include <string>
#include <vector>

namespace mirrored::data {

// The files `spec` names, in order. A spec naming an existing file is that file, commas
// and all. A glob's folder may not itself hold wildcards; it matches regular files only
// (a symlink planted in a shared folder is not followed) and must match at least one.
// InputError naming the spec and the part at fault (an empty entry, no match, a folder
// that cannot be listed, the same file twice).
std::vector<std::string> expand_shards(const std::string& spec);

// Whether `spec` names more than one file or holds a wildcard: the readers' cue to expand.
bool names_shards(const std::string& spec);

// The first file `spec` names, or `spec` itself when it names none (a glob matching
// nothing): for the readers that need one file's attributes (the tokenizer of a set).
std::string first_shard(const std::string& spec);

}  // namespace mirrored::data
