// engine/core/file_digest.cpp: what a host's hash cache accepts as an entry. The cache's use
// (hashed once per file version, a cache others can write ignored, processes at once) is tested
// through exe_info in test_topology.cpp.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "file_digest.hpp"

namespace fs = std::filesystem;

namespace {

const char* kShaAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

// A file "abc" and an empty cache directory, removed at the end of the scope.
struct HashedFile {
  fs::path dir = fs::temp_directory_path() / ("cs_file_digest_test_" + std::to_string(getpid()));
  std::string file = (dir / "abc").string(), cache = (dir / "cache").string();
  HashedFile() {
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(file, std::ios::binary) << "abc";
  }
  ~HashedFile() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // Replaces the text of the (one) cache entry.
  void write_entry(const std::string& text) const {
    for (const auto& e : fs::directory_iterator(cache))
      if (e.path().extension() != ".lock") std::ofstream(e.path(), std::ios::binary | std::ios::trunc) << text;
  }
};

}  // namespace

TEST_CASE("sha256_file_cached: an entry is its hash, white space around it allowed", "[topology]") {
  HashedFile f;
  const cs::FileDigest first = cs::sha256_file_cached(f.file, f.cache, 0);
  REQUIRE(first.ok);
  CHECK(first.sha256 == kShaAbc);
  CHECK(first.from == "computed");
  CHECK(first.size == 3);
  const std::string other(64, 'a');  // a hash the file does not have: read, not recomputed
  f.write_entry(" \t" + other + " \r\n");
  CHECK(cs::sha256_file_cached(f.file, f.cache, 0).sha256 == other);
  CHECK(cs::sha256_file_cached(f.file, f.cache, 0).from == "host cache");
  for (const std::string& bad :
       {other + "0\n", other + " x\n", other.substr(1) + "\n", "A" + other.substr(1), std::string()}) {
    f.write_entry(bad);
    const cs::FileDigest d = cs::sha256_file_cached(f.file, f.cache, 0);
    CHECK(d.sha256 == kShaAbc);  // recomputed, and stored again
    CHECK(d.from == "computed");
  }
}

TEST_CASE("sha256_file_cached: a file that cannot be read says why", "[topology]") {
  HashedFile f;
  const cs::FileDigest d = cs::sha256_file_cached(f.file + ".missing", f.cache, 0);
  CHECK_FALSE(d.ok);
  CHECK(d.why == "cannot open " + f.file + ".missing");
}
