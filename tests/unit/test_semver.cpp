// Versions and the `requires` ranges recipes declare.
#include <catch2/catch.hpp>
#include <string>

#include "error.hpp"
#include "semver.hpp"

namespace {

cs::Version V(const char* text) {
  auto v = cs::parse_version(text);
  REQUIRE(v.has_value());
  return *v;
}

}  // namespace

TEST_CASE("parse_version: 1, 1.2, 1.2.3", "[semver]") {
  CHECK(V("1").v == std::array<int, 3>{1, 0, 0});
  CHECK(V("1.2").v == std::array<int, 3>{1, 2, 0});
  CHECK(V("1.2.3").v == std::array<int, 3>{1, 2, 3});
  CHECK(V("10.20.30").v == std::array<int, 3>{10, 20, 30});
  CHECK(V(" 0.1.0 ").v == std::array<int, 3>{0, 1, 0});
  CHECK(V("0.1.0").str() == "0.1.0");
  CHECK(V("2").str() == "2.0.0");
}

TEST_CASE("parse_version: rejects malformed versions", "[semver]") {
  for (const char* bad :
       {"", "a", "1.", ".1", "1..2", "1.2.3.4", "1.x", "v1.0", "-1", "1.2-rc1", "1,2", "99999999999"}) {
    INFO("'" << bad << "'");
    CHECK_FALSE(cs::parse_version(bad).has_value());
  }
}

TEST_CASE("versions order numerically, not as text", "[semver]") {
  CHECK(V("0.10.0") > V("0.9.0"));
  CHECK(V("1.0") == V("1.0.0"));
  CHECK(V("1.2.3") < V("1.2.4"));
  CHECK(V("2") > V("1.99.99"));
}

TEST_CASE("version_satisfies: ranges", "[semver]") {
  const char* range = ">=0.1, <1.0";
  CHECK(cs::version_satisfies(V("0.1.0"), range));
  CHECK(cs::version_satisfies(V("0.9.9"), range));
  CHECK(cs::version_satisfies(V("0.10.0"), range));
  CHECK_FALSE(cs::version_satisfies(V("0.0.9"), range));
  CHECK_FALSE(cs::version_satisfies(V("1.0.0"), range));
  CHECK_FALSE(cs::version_satisfies(V("1.0.1"), range));

  CHECK(cs::version_satisfies(V("0.1.0"), "=0.1.0"));
  CHECK(cs::version_satisfies(V("0.1.0"), "==0.1.0"));
  CHECK(cs::version_satisfies(V("0.1"), "=0.1.0"));
  CHECK_FALSE(cs::version_satisfies(V("0.1.1"), "=0.1.0"));

  CHECK(cs::version_satisfies(V("0.1.0"), "0.1.0"));  // a bare version means =
  CHECK_FALSE(cs::version_satisfies(V("0.2.0"), "0.1.0"));

  CHECK(cs::version_satisfies(V("0.1.1"), ">0.1"));
  CHECK(cs::version_satisfies(V("0.2.0"), ">0.1"));
  CHECK_FALSE(cs::version_satisfies(V("0.1.0"), ">0.1"));
  CHECK_FALSE(cs::version_satisfies(V("0.0.9"), ">0.1"));

  CHECK(cs::version_satisfies(V("1.2.3"), "<=1.2.3"));
  CHECK(cs::version_satisfies(V("1.2.2"), "<=1.2.3"));
  CHECK(cs::version_satisfies(V("0.99"), "<=1.2.3"));
  CHECK_FALSE(cs::version_satisfies(V("1.2.4"), "<=1.2.3"));
  CHECK_FALSE(cs::version_satisfies(V("1.3"), "<=1.2.3"));

  CHECK(cs::version_satisfies(V("0.3.0"), " >= 0.3 ,  < 1.0 "));        // spaces anywhere
  CHECK_FALSE(cs::version_satisfies(V("0.5.0"), ">=0.3, <1.0, >0.6"));  // every term must hold
  CHECK(cs::version_satisfies(V("0.7.0"), ">=0.3, <1.0, >0.6"));
  CHECK_FALSE(cs::version_satisfies(V("0.5.0"), ">=0.6, <0.4"));  // an empty range
}

TEST_CASE("version_satisfies: malformed ranges throw InputError", "[semver]") {
  const cs::Version v = V("0.1.0");
  for (const char* bad : {"", " ", ">=", ">=0.1,", ",<1.0", ">=0.1,,<1.0", "~0.1", "^0.1", "=>0.1", ">>0.1", "abc",
                          ">=0.1 <1.0", ">=x.y", "0.1.0.0", "!=0.1"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_AS(cs::version_satisfies(v, bad), cs::InputError);
  }
  try {
    cs::version_satisfies(v, ">=0.1, <one");
    FAIL("no exception");
  } catch (const cs::InputError& e) {
    CHECK(e.code() == cs::ExitCode::bad_input);
    CHECK_THAT(e.what(), Catch::Contains("<one"));
  }
}
