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
#include <cstdint>
#include <string>
#include <string_view>

namespace cs {

struct PickleLimits {
  size_t max_depth = 64;           // nesting of containers
  size_t max_nodes = 5'000'000;    // values made, and values reported once memo repeats are expanded
  size_t max_output = 512u << 20;  // bytes of JSON text
  size_t max_string = 64u << 20;   // one str or bytes value
  // Bytes the reader may hold besides the data (its values, containers, memo and the bytes
  // values as UTF-8); 0: three times the data's size plus 40 MiB. Counted as it grows, refused
  // before; what is left of it is the walk's (PickleEvents::start).
  size_t max_memory = 0;
};

// What a walk of a decoded pickle reports, in document order: a value is a leaf, or a
// begin_list ... end_list / begin_dict (key value)* end_dict around its items. Floats that
// are not finite are reported as null; int keys as their decimal text.
class PickleEvents {
 public:
  virtual ~PickleEvents() = default;
  // Before the first value: the bytes the reader holds, and its max_memory.
  virtual void start(size_t /*reader_bytes*/, size_t /*max_memory*/) {}
  virtual void null() = 0;
  virtual void boolean(bool v) = 0;
  virtual void integer(int64_t v) = 0;
  virtual void real(double v) = 0;
  virtual void text(std::string_view v) = 0;
  virtual void begin_list(size_t n) = 0;
  virtual void end_list() = 0;
  virtual void begin_dict(size_t n) = 0;
  virtual void key(std::string_view k) = 0;
  virtual void end_dict() = 0;
};

// Reads the pickle in `data` (its opcodes into compact values: 8 bytes a value, strings left
// in `data`) and reports it to `out`: dict, list/tuple/set, str/bytes (bytes as latin-1, in
// UTF-8), int (within int64), float, bool, None. Every limit is checked before the memory is
// taken; `out` may throw to stop the walk (its own limits).
void pickle_subset_walk(std::string_view data, PickleEvents& out, const PickleLimits& limits = {});

// The pickle in `data` as JSON text: dict -> object (str and int keys only), list/tuple/set ->
// array, str/bytes -> string, int -> number, float -> number (NaN and infinities -> null),
// bool, None -> null.
std::string pickle_subset_to_json(std::string_view data, const PickleLimits& limits = {});

// The deepest nesting of [ and { in JSON text (outside strings), counting stops at `stop_at`;
// when it stops there and `stopped_at` is given, *stopped_at is the byte where it did.
size_t json_nesting_depth(std::string_view text, size_t stop_at, size_t* stopped_at = nullptr);

}  // namespace cs
