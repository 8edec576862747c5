// Message sizes as users write them (binary multiples, like nccl-tests -b/-e).
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "size.hpp"

namespace {
constexpr uint64_t K = 1024, M = K * K, G = M * K, T = G * K;
}

TEST_CASE("parse_size: plain bytes and binary suffixes", "[size]") {
  CHECK(cs::parse_size("8") == uint64_t{8});
  CHECK(cs::parse_size("0") == uint64_t{0});
  CHECK(cs::parse_size("64K") == 64 * K);
  CHECK(cs::parse_size("1M") == M);
  CHECK(cs::parse_size("2G") == 2 * G);
  CHECK(cs::parse_size("1T") == T);
  CHECK(cs::parse_size("3M") == uint64_t{3145728});
  CHECK(cs::parse_size("100B") == uint64_t{100});
}

TEST_CASE("parse_size: KB, KiB, lowercase and surrounding spaces", "[size]") {
  CHECK(cs::parse_size("64KB") == 64 * K);
  CHECK(cs::parse_size("64KiB") == 64 * K);
  CHECK(cs::parse_size("64k") == 64 * K);
  CHECK(cs::parse_size("64kb") == 64 * K);
  CHECK(cs::parse_size("64kib") == 64 * K);
  CHECK(cs::parse_size("1m") == M);
  CHECK(cs::parse_size("2g") == 2 * G);
  CHECK(cs::parse_size("1t") == T);
  CHECK(cs::parse_size("4MiB") == 4 * M);
  CHECK(cs::parse_size("  128M ") == 128 * M);
  CHECK(cs::parse_size("\t8\n") == uint64_t{8});
}

TEST_CASE("parse_size: rejects what is not a size", "[size]") {
  for (const char* bad :
       {"", " ", "abc", "-1", "+1", "1X", "1KK", "K", "1.5M", "1 K", "0x10", "1KiBB", "1Bi", "12a", "1e3"}) {
    INFO("'" << bad << "'");
    CHECK_FALSE(cs::parse_size(bad).has_value());
  }
}

TEST_CASE("parse_size: rejects overflow", "[size]") {
  CHECK(cs::parse_size("18446744073709551615") == UINT64_MAX);  // the largest that fits
  CHECK_FALSE(cs::parse_size("18446744073709551616").has_value());
  CHECK_FALSE(cs::parse_size("99999999999999999999").has_value());
  CHECK_FALSE(cs::parse_size("17179869184G").has_value());  // 2^34 * 2^30 = 2^64
  CHECK(cs::parse_size("17179869183G") == (uint64_t{17179869183} << 30));
  CHECK_FALSE(cs::parse_size("16777216T").has_value());  // 2^24 * 2^40 = 2^64
  CHECK(cs::parse_size("16777215T") == uint64_t{16777215} * T);
}

TEST_CASE("format_size: exact binary multiples get a suffix", "[size]") {
  CHECK(cs::format_size(0) == "0");
  CHECK(cs::format_size(8) == "8");
  CHECK(cs::format_size(1000) == "1000");
  CHECK(cs::format_size(1024) == "1K");
  CHECK(cs::format_size(65536) == "64K");
  CHECK(cs::format_size(3145728) == "3M");
  CHECK(cs::format_size(1536) == "1536");  // 1.5K is not exact
  CHECK(cs::format_size(2 * G) == "2G");
  CHECK(cs::format_size(T) == "1T");
  CHECK(cs::format_size(1024 * T) == "1024T");
}

TEST_CASE("format_size and parse_size round trip", "[size]") {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{8}, uint64_t{1023}, K, K + 1, 3 * K, 1536 * K, M,
                     5 * M, 6 * G, 3 * T, 4096 * T, UINT64_MAX, UINT64_MAX - 1023}) {
    INFO(v);
    CHECK(cs::parse_size(cs::format_size(v)) == v);
  }
  for (int shift = 0; shift < 64; ++shift) {
    const uint64_t v = uint64_t{1} << shift;
    INFO("2^" << shift);
    CHECK(cs::parse_size(cs::format_size(v)) == v);
  }
}
