// The engine's one SHA-256 (core/digest.hpp: of bytes and of a file) and its one trim
// (core/text.hpp).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "digest.hpp"
#include "text.hpp"

namespace fs = std::filesystem;

TEST_CASE("sha256: of bytes (the NIST vectors) and of a file, the same digest") {
  CHECK(cs::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(cs::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string bytes(3 << 20, 'x');  // over the file reader's 1 MiB piece
  const fs::path f = fs::temp_directory_path() / ("cs-digest-" + std::to_string(getpid()));
  std::ofstream(f, std::ios::binary) << bytes;
  std::string hex, why;
  unsigned long long size = 0;
  REQUIRE(cs::sha256_file(f.string(), &hex, &size, &why));
  CHECK(hex == cs::sha256_hex(bytes));
  CHECK(size == bytes.size());
  fs::remove(f);
  CHECK_FALSE(cs::sha256_file(f.string(), &hex, &size, &why));
  CHECK(why == "cannot open " + f.string());
}

TEST_CASE("trim: white space off both ends, a view into the text") {
  CHECK(cs::trim("  1-3, 5 \t\r\n") == "1-3, 5");
  CHECK(cs::trim("\v\f>=1.2\n") == ">=1.2");
  CHECK(cs::trim(" \t ").empty());
  CHECK(cs::trim("").empty());
  CHECK(cs::trim("a b") == "a b");
}
