// --reference-run FILE: a digest of every checked output, saved by one run and compared by the
// next, so that two runs, two versions or two libraries (ferry-perf against mpi-perf, the same sweep)
// can be shown to agree bit for bit.
//
// Vocabulary. A run records when its rank's file does not exist yet and compares when it does.
// Each rank keeps its own file, FILE.rank<R>: ranks on different hosts need not share a filesystem.
// One line per checked output, keyed by what produced it:
//   <key> <elements> <hash of chunk 0> <hash of chunk 1> ... [= <the output's bytes in hex>]
// key: collective/type/op/root/size/placement/check number/rank, no spaces. A chunk is
// kChunkElems elements; its hash is 64 bits over the elements' bytes. Outputs of at most
// kFullBytes, and every output with --reference-run-full, also keep their bytes, so a mismatch
// names the first differing element with the expected and the received bits; a larger output
// names its first differing chunk (the element range), and running that size again with
// --reference-run-full names the element.
//
// A recording run writes FILE.rank<R>.tmp and renames it at the end, so a run that fails leaves
// no reference behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

#include "ferry/status.hpp"
#include "ferry/types.hpp"

namespace ferry::perf {

/// --reference-inputs spread: element g of `rank`'s input of check run `seed`, for a reduction of
/// a floating type: a random sign and significand times a power of two spread over many binades
/// (fewer for the narrow types, so that no sum overflows), so that the rounding of every partial
/// result, and with it the result's bits, depends on the order the ranks are combined in.
void fillSpreadInput(DataType type, int rank, uint64_t seed, void* data, size_t count);

class ReferenceRun {
 public:
  /// Elements per hashed chunk.
  static constexpr size_t kChunkElems = 4096;
  /// Outputs up to this size keep their bytes in the file.
  static constexpr size_t kFullBytes = 64 * 1024;

  /// Opens rank `rank`'s file of `path`: reads it where it exists (compare), else starts one
  /// (record). `full`: keep every output's bytes.
  static Result<ReferenceRun> open(const std::string& path, int rank, bool full);
  ReferenceRun(ReferenceRun&& other) noexcept;
  ReferenceRun& operator=(ReferenceRun&&) = delete;
  ~ReferenceRun();

  bool recording() const { return out_ != nullptr; }
  /// The file this rank reads or writes.
  const std::string& path() const { return path_; }

  /// Records or compares one output of `count` elements of `eltSize` bytes. Returns 0 when
  /// recorded or equal; on a mismatch the number of differing elements (of differing chunks where
  /// the file kept only hashes), and `message` says where the first difference is.
  uint64_t check(const std::string& key, const void* out, size_t count, size_t eltSize, std::string& message);
  /// Recording: completes the file (renames it into place). Comparing: nothing.
  Status finish();

 private:
  ReferenceRun() = default;

  std::string path_;
  bool full_ = false;
  std::FILE* out_ = nullptr;                     // recording: the temporary file
  std::map<std::string, std::string> expected_;  // comparing: key -> the rest of its line
};

}  // namespace ferry::perf
