// The pickle subset of Flight Recorder dumps (engine/core/pickle_subset.hpp): what protocol 2-5
// pickles of plain data become, and the refusals (code, malformed, unbounded input).
#include <catch2/catch.hpp>
#include <string>

#include "error.hpp"
#include "pickle_subset.hpp"

using cs::pickle_subset_to_json;

namespace {
std::string b(std::initializer_list<int> bytes) {
  std::string s;
  for (int x : bytes) s.push_back(static_cast<char>(x));
  return s;
}
std::string refusal(const std::string& data, const cs::PickleLimits& lim = {}) {
  try {
    pickle_subset_to_json(data, lim);
  } catch (const cs::InputError& e) {
    return e.what();
  }
  return "(accepted)";
}
}  // namespace

TEST_CASE("pickle subset: plain data as Python's pickle.dumps(protocol=2) writes it", "[pickle]") {
  // pickle.dumps({"version": "2.10", "n": [1, -2, 300, 70000, 2**40], "t": ("a", "b"), "x": None,
  //               "ok": True, "f": 0.5}, protocol=2)
  const std::string p =
      b({0x80, 0x02, '}', 'q', 0x00, '(', 'X', 7, 0, 0, 0}) + "version" + b({'q', 1, 'X', 4, 0, 0, 0}) + "2.10" +
      b({'q', 2, 'X', 1, 0, 0, 0}) + "n" +
      b({'q',  3,    ']',  'q',  4, '(', 'K', 1, 'J', 0xfe, 0xff, 0xff, 0xff, 'M', 0x2c, 0x01, 'J', 0x70,
         0x11, 0x01, 0x00, 0x8a, 6, 0,   0,   0, 0,   0,    1,    'e',  'X',  1,   0,    0,    0}) +
      "t" + b({'q', 5, 'X', 1, 0, 0, 0}) + "a" + b({'q', 6, 'X', 1, 0, 0, 0}) + "b" +
      b({'q', 7, 0x86, 'q', 8, 'X', 1, 0, 0, 0}) + "x" + b({'q', 9, 'N', 'X', 2, 0, 0, 0}) + "ok" +
      b({'q', 10, 0x88, 'X', 1, 0, 0, 0}) + "f" + b({'q', 11, 'G', 0x3f, 0xe0, 0, 0, 0, 0, 0, 0, 'u', '.'});
  CHECK(pickle_subset_to_json(p) ==
        R"({"version":"2.10","n":[1,-2,300,70000,1099511627776],"t":["a","b"],"x":null,"ok":true,"f":0.5})");
}

TEST_CASE("pickle subset: memo references repeat the value", "[pickle]") {
  // ["s", <memo 0>]: X 's' BINPUT 0 ... as pickle writes a repeated string
  const std::string p = b({0x80, 0x02, ']', 'q', 1, '(', 'X', 1, 0, 0, 0, 's', 'q', 0, 'h', 0, 'e', '.'});
  CHECK(pickle_subset_to_json(p) == R"(["s","s"])");
}

TEST_CASE("pickle subset: code and malformed input are refused", "[pickle]") {
  CHECK_THAT(refusal(b({0x80, 0x02, 'c'}) + "os\nsystem\n" + b({'R', '.'})), Catch::Contains("opcode GLOBAL"));
  CHECK_THAT(refusal(b({0x80, 0x04, 0x93, '.'})), Catch::Contains("opcode STACK_GLOBAL"));
  CHECK_THAT(refusal(b({0x80, 0x02, ')', 'b', '.'})), Catch::Contains("opcode BUILD"));
  CHECK_THAT(refusal(b({0x80, 0x02, ']'})), Catch::Contains("truncated"));
  CHECK_THAT(refusal(b({0x80, 0x02, 'X', 10, 0, 0, 0, 'a', '.'})), Catch::Contains("truncated"));
  CHECK_THAT(refusal(b({0x80, 0x02, 'a', '.'})), Catch::Contains("empty stack"));
  CHECK_THAT(refusal(b({0x80, 0x02, 'h', 3, '.'})), Catch::Contains("never stored"));
  CHECK_THAT(refusal(b({0x80, 0x02, ']', ']', '.'})), Catch::Contains("malformed stack"));
  CHECK_THAT(refusal("(dp0\n."), Catch::Contains("no protocol header"));
  CHECK_THAT(refusal(""), Catch::Contains("empty"));
  CHECK_THAT(refusal(b({0x80, 0x02, 0x8a, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, '.'})), Catch::Contains("beyond 64 bits"));
  CHECK_THAT(refusal(b({0x80, 0x02, '}', ']', 'N', 's', '.'})), Catch::Contains("not a str or an int"));
}

TEST_CASE("pickle subset: depth, size and repetition are bounded", "[pickle]") {
  std::string deep = b({0x80, 0x02}) + std::string(100, ']') + std::string(99, 'a') + ".";
  CHECK_THAT(refusal(deep), Catch::Contains("nested deeper than 64"));
  CHECK_THAT(refusal(b({0x80, 0x02, ']', 'q', 0, 'h', 0, 'a', '.'})), Catch::Contains("nested deeper"));  // a cycle
  CHECK_THAT(refusal(b({0x80, 0x02, 'X', 0xff, 0xff, 0xff, 0xff, '.'})), Catch::Contains("a string of 4294967295"));
  cs::PickleLimits lim;
  lim.max_nodes = 50;
  // a list of 10 references to a list of 10 references to a string: 111 values
  std::string laughs = b({0x80, 0x02, 'X', 1, 0, 0, 0, 'a', 'q', 0, '0', '('});
  for (int i = 0; i < 10; ++i) laughs += b({'h', 0});
  laughs += b({'l', 'q', 1, '0', '('});
  for (int i = 0; i < 10; ++i) laughs += b({'h', 1});
  laughs += b({'l', '.'});
  CHECK_THAT(refusal(laughs, lim), Catch::Contains("more than 50 values"));
  CHECK(cs::json_nesting_depth(R"({"a":[[1],"]]]"],"b":{}})", 100) == 3);
  CHECK(cs::json_nesting_depth(std::string(1000, '['), 65) == 65);
}

TEST_CASE("pickle subset: the reader's memory is counted before it is taken", "[pickle]") {
  // 300 000 Nones on the stack (8 bytes each: 2.4 MB) under a 1 MiB limit: refused while reading,
  // before the walk; the same pickle passes with the default limit (3 x its size + 40 MiB).
  const std::string p = b({0x80, 0x02, ']', '('}) + std::string(300000, 'N') + b({'e', '.'});
  cs::PickleLimits lim;
  lim.max_memory = 1u << 20;
  CHECK_THAT(refusal(p, lim), Catch::Contains("reading it needs more than 1 MiB"));
  CHECK(refusal(p) == "(accepted)");
  // values are counted as they are made, not after: the 5th of 4 is refused at its byte
  lim = cs::PickleLimits{};
  lim.max_nodes = 4;
  CHECK_THAT(refusal(b({0x80, 0x02, ']', '(', 'N', 'N', 'N', 'N', 'e', '.'}), lim),
             Catch::Contains("more than 4 values at byte 7"));
}

TEST_CASE("pickle subset: bytes values, big ints and floats keep their values", "[pickle]") {
  // [b"\xe9A", 2**62, -2**62, 1.5, {7: None}] with BINBYTES, LONG1, BINFLOAT and an int key
  const std::string p =
      b({0x80, 0x03, ']', '(', 'C', 2,    0xe9, 'A',  0x8a, 8, 0, 0, 0, 0, 0, 0,   0,   0x40, 0x8a, 8,   0,   0,
         0,    0,    0,   0,   0,   0xc0, 'G',  0x3f, 0xf8, 0, 0, 0, 0, 0, 0, '}', 'K', 7,    'N',  's', 'e', '.'});
  CHECK(pickle_subset_to_json(p) ==
        "[\"\xc3\xa9"
        "A\",4611686018427387904,-4611686018427387904,1.5,{\"7\":null}]");
}
