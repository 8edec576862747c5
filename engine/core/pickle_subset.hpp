#pragma once
// A bounded reader of the pickle subset PyTorch's Flight Recorder writes (pickle_str in
// torch/csrc/distributed/c10d/TraceUtils.h over FlightRecorder::dump_dict: a dict of dicts,
// lists, tuples, str, int, float, bool and None, protocol 2 and later), turned into JSON text.
//
// It never runs anything: the opcodes that build objects or name Python code (GLOBAL,
// STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT*, PERSID, BINPERSID, buffers)
// are refused, as is every opcode outside the subset. Depth, node count, string length and the
// size of the output are bounded (a memo reference that repeats a subtree counts each time, so
// a "billion laughs" pickle ends at the node limit). Every refusal is an InputError (exit 1)
// naming the byte offset and the opcode.
#include <cstddef>
#include <string>
#include <string_view>

namespace cs {

struct PickleLimits {
  size_t max_depth = 64;           // nesting of containers
  size_t max_nodes = 5'000'000;    // values written, memo repeats included (20 000 entries with stacks: ~3M)
  size_t max_output = 512u << 20;  // bytes of JSON text
  size_t max_string = 64u << 20;   // one str or bytes value
};

// The pickle in `data` as JSON text: dict -> object (str and int keys only), list/tuple/set ->
// array, str/bytes -> string (bytes as latin-1), int -> number (within int64), float -> number
// (NaN and infinities -> null), bool, None -> null.
std::string pickle_subset_to_json(std::string_view data, const PickleLimits& limits = {});

// The deepest nesting of [ and { in JSON text (outside strings), counting stops at `stop_at`;
// when it stops there and `stopped_at` is given, *stopped_at is the byte where it did.
size_t json_nesting_depth(std::string_view text, size_t stop_at, size_t* stopped_at = nullptr);

}  // namespace cs
