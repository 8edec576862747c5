// The pickle subset of the Flight Recorder's dump, read by a small stack machine (opcodes as
// CPython's Lib/pickletools.py documents them). See pickle_subset.hpp for what is accepted.
#include "pickle_subset.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "error.hpp"

namespace cs {

namespace {

// A value of the reader, 8 bytes: a tag in the low 4 bits, the rest its payload (a small int, an
// index into one of the reader's stores, or a string's place). Nothing is allocated per value:
// ints, None, bools and strings of the data live in the word itself.
using V = uint64_t;
enum Tag : uint64_t {
  kNone = 0,
  kFalse = 1,
  kTrue = 2,
  kInt = 3,    // payload: a signed 60-bit int
  kBig = 4,    // payload: index into Reader::bigs_ (ints beyond 60 bits)
  kReal = 5,   // payload: index into Reader::reals_
  kData = 6,   // payload: offset (33 bits) and length (27 bits) of a str in the data
  kArena = 7,  // payload: the same in Reader::arena_ (bytes values, as UTF-8)
  kList = 8,   // payload: index into Reader::boxes_
  kDict = 9,
  kMark = 10,
  kHole = 11,  // a memo slot never stored
};
constexpr int kTagBits = 4;
constexpr uint64_t kLenBits = 27;
Tag tag(V v) { return static_cast<Tag>(v & 0xf); }
uint64_t payload(V v) { return v >> kTagBits; }
V make_v(Tag t, uint64_t p) { return (p << kTagBits) | t; }
V make_str(Tag t, uint64_t off, uint64_t len) { return make_v(t, (off << kLenBits) | len); }
uint64_t str_off(V v) { return payload(v) >> kLenBits; }
uint64_t str_len(V v) { return payload(v) & ((uint64_t{1} << kLenBits) - 1); }

// Memory of the reader's blocks straight from the kernel (mmap), so that it is given back when
// the reader ends: from malloc, freed blocks of this size stay in the process (glibc raises its
// mmap threshold after the first free) and triage's peak grows with every dump read.
struct Unmap {
  size_t bytes;
  void operator()(void* p) const { ::munmap(p, bytes); }
};

// A growing array in blocks of 64K elements: no reallocation (so no copy of it and its double at
// once), and its bytes known at every step.
template <class T>
class Blocks {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  static constexpr size_t kBlock = 1u << 16;
  size_t size() const { return n_; }
  size_t bytes() const { return blocks_.size() * kBlock * sizeof(T); }
  // The bytes one more push_back may take.
  size_t next_bytes() const { return n_ % kBlock == 0 ? kBlock * sizeof(T) : 0; }
  T& operator[](size_t i) { return blocks_[i / kBlock].get()[i % kBlock]; }
  const T& operator[](size_t i) const { return blocks_[i / kBlock].get()[i % kBlock]; }
  void push_back(const T& v) {
    if (n_ % kBlock == 0 && n_ / kBlock == blocks_.size()) {
      void* p = ::mmap(nullptr, kBlock * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      blocks_.emplace_back(static_cast<T*>(p), Unmap{kBlock * sizeof(T)});
    }
    (*this)[n_++] = v;
  }
  T& back() { return (*this)[n_ - 1]; }
  void resize_down(size_t n) { n_ = n; }

 private:
  std::vector<std::unique_ptr<T, Unmap>> blocks_;
  size_t n_ = 0;
};

// A list or dict: its items (dict: key, value, key, value ...) are runs of Reader::items_.
struct Box {
  uint32_t first = UINT32_MAX, last = UINT32_MAX;  // runs (indexes into Reader::runs_)
  uint32_t count = 0;                              // items (dict: entries)
};
struct Run {
  uint64_t start;
  uint32_t n;
  uint32_t next = UINT32_MAX;
};

[[noreturn]] void refuse(size_t at, const std::string& what) {
  throw InputError("pickle: " + what + " at byte " + std::to_string(at));
}

std::string opname(unsigned char op) {
  char buf[32];
  if (op >= 0x20 && op < 0x7f)
    std::snprintf(buf, sizeof buf, "0x%02x '%c'", op, op);
  else
    std::snprintf(buf, sizeof buf, "0x%02x", op);
  return buf;
}

// Names of the opcodes that load or build Python objects: refused with a message that says why.
const char* code_opcode(unsigned char op) {
  switch (op) {
    case 'c':
      return "GLOBAL";
    case 0x93:
      return "STACK_GLOBAL";
    case 'R':
      return "REDUCE";
    case 'b':
      return "BUILD";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 0x81:
      return "NEWOBJ";
    case 0x92:
      return "NEWOBJ_EX";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 'P':
      return "PERSID";
    case 'Q':
      return "BINPERSID";
    case 0x96:
      return "BYTEARRAY8";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
    default:
      return nullptr;
  }
}

class Reader {
 public:
  Reader(std::string_view d, const PickleLimits& l)
      : d_(d), lim_(l), max_memory_(l.max_memory ? l.max_memory : 3 * d.size() + (40u << 20)) {}

  size_t max_memory() const { return max_memory_; }

  V run() {
    while (true) {
      if (pos_ >= d_.size()) refuse(pos_, "truncated: the data ends before STOP");
      const size_t at = pos_;
      const unsigned char op = static_cast<unsigned char>(d_[pos_++]);
      if (const char* name = code_opcode(op))
        refuse(at, std::string("opcode ") + name + " (" + opname(op) +
                       ") loads or builds Python objects; only dicts, lists, tuples, str, int, float, bool "
                       "and None are read (this is not a Flight Recorder dump, or it was tampered with)");
      switch (op) {
        case 0x80:  // PROTO
          if (u8(at) < 2) refuse(at, "protocol below 2");
          break;
        case 0x95:
          take(at, 8);
          break;   // FRAME: a length hint only
        case '.':  // STOP
          if (stack_.size() != 1 || !marks_.empty()) refuse(at, "STOP with a malformed stack");
          if (tag(stack_[0]) == kMark) refuse(at, "STOP on a MARK");
          return stack_[0];
        default:
          if (!push_value(at, op)) build(at, op);
      }
    }
  }

  // What a value holds, for the walk.
  std::string_view text_of(V v) const {
    if (tag(v) == kData) return d_.substr(str_off(v), str_len(v));
    // the block that holds the offset: the last whose start is not after it
    const uint64_t off = str_off(v);
    const size_t b =
        static_cast<size_t>(std::upper_bound(arena_start_.begin(), arena_start_.end(), off) - arena_start_.begin()) - 1;
    return std::string_view(arena_[b]).substr(off - arena_start_[b], str_len(v));
  }
  int64_t big(V v) const { return bigs_[payload(v)]; }
  double real(V v) const { return reals_[payload(v)]; }
  const Box& box(V v) const { return boxes_[payload(v)]; }
  // Calls f(item) for each item of a box, in order (a dict's keys and values alternate).
  template <class F>
  void each_item(const Box& b, F&& f) const {
    for (uint32_t r = b.first; r != UINT32_MAX; r = runs_[r].next)
      for (uint32_t k = 0; k < runs_[r].n; ++k) f(items_[runs_[r].start + k]);
  }

 private:
  // The opcodes that push one value. False when `op` is none of them.
  bool push_value(size_t at, unsigned char op) {
    switch (op) {
      case 'N':
        push_new(at, make_v(kNone, 0));
        break;
      case 0x88:
        push_new(at, make_v(kTrue, 0));
        break;  // NEWTRUE
      case 0x89:
        push_new(at, make_v(kFalse, 0));
        break;     // NEWFALSE
      case 'J': {  // BININT: signed 4 bytes
        const auto v = static_cast<int32_t>(le(at, 4));
        push_new(at, integer(at, v));
        break;
      }
      case 'K':
        push_new(at, integer(at, static_cast<int64_t>(u8(at))));
        break;  // BININT1
      case 'M':
        push_new(at, integer(at, static_cast<int64_t>(le(at, 2))));
        break;  // BININT2
      case 0x8a:
        long_int(at, u8(at));
        break;      // LONG1
      case 0x8b: {  // LONG4
        const uint64_t n = le(at, 4);
        if (n > 8) refuse(at, "LONG4 of " + std::to_string(n) + " bytes: integers beyond 64 bits are refused");
        long_int(at, static_cast<size_t>(n));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian double
        const std::string_view b = take(at, 8);
        uint64_t bits = 0;
        for (unsigned char c : b) bits = (bits << 8) | c;
        double v;
        std::memcpy(&v, &bits, sizeof v);
        grow(at, reals_.next_bytes());
        reals_.push_back(v);
        push_new(at, make_v(kReal, reals_.size() - 1));
        break;
      }
      case 'X':
        push_new(at, text(at, le(at, 4), false));
        break;  // BINUNICODE
      case 0x8c:
        push_new(at, text(at, u8(at), false));
        break;  // SHORT_BINUNICODE
      case 0x8d:
        push_new(at, text(at, le(at, 8), false));
        break;  // BINUNICODE8
      case 'T':
      case 'B':
        push_new(at, text(at, le(at, 4), true));
        break;  // BINSTRING, BINBYTES
      case 'U':
      case 'C':
        push_new(at, text(at, u8(at), true));
        break;  // SHORT_BINSTRING, SHORT_BINBYTES
      case 0x8e:
        push_new(at, text(at, le(at, 8), true));
        break;  // BINBYTES8
      case '}':
        push(at, container(at, kDict));
        break;  // EMPTY_DICT
      case ']':
      case ')':
      case 0x8f:
        push(at, container(at, kList));
        break;  // EMPTY_LIST, EMPTY_TUPLE, EMPTY_SET
      default:
        return false;
    }
    return true;
  }

  // The opcodes that build containers, move the stack and use the memo; any other is refused.
  void build(size_t at, unsigned char op) {
    switch (op) {
      case '(':  // MARK
        if (marks_.size() >= lim_.max_depth * 4) refuse(at, "too many nested MARKs");
        marks_.push_back(stack_.size());
        break;
      case '0':
        pop(at);
        break;  // POP
      case '1':
        stack_.resize_down(pop_mark(at));
        break;  // POP_MARK
      case '2':
        push(at, top(at));
        break;  // DUP
      case 't':
      case 'l':
      case 0x91: {  // TUPLE, LIST, FROZENSET: items since the mark
        const size_t m = pop_mark(at);
        const V c = container(at, kList);
        append(at, c, m, stack_.size() - m);
        stack_.resize_down(m);
        push(at, c);
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        const size_t k = op - 0x84u;
        if (stack_.size() < k + base()) refuse(at, "TUPLE" + std::to_string(k) + " on a short stack");
        const size_t m = stack_.size() - k;
        for (size_t j = m; j < stack_.size(); ++j)
          if (tag(stack_[j]) == kMark) refuse(at, "a MARK inside a tuple");
        const V c = container(at, kList);
        append(at, c, m, k);
        stack_.resize_down(m);
        push(at, c);
        break;
      }
      case 'd': {  // DICT: key/value pairs since the mark
        const size_t m = pop_mark(at);
        if ((stack_.size() - m) % 2) refuse(at, "DICT with an odd number of items");
        const V c = container(at, kDict);
        set_items(at, c, m);
        push(at, c);
        break;
      }
      case 'a': {  // APPEND
        const size_t m = stack_.size() - 1;
        if (stack_.size() < base() + 2) refuse(at, "an opcode on an empty stack");
        append(at, list_below(at, m), m, 1);
        stack_.resize_down(m);
        break;
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        const size_t m = pop_mark(at);
        if (stack_.size() - m > 0)
          append(at, list_below(at, m), m, stack_.size() - m);
        else
          list_below(at, m);
        stack_.resize_down(m);
        break;
      }
      case 's': {  // SETITEM
        if (stack_.size() < base() + 3) refuse(at, "an opcode on an empty stack");
        const size_t m = stack_.size() - 2;
        set_items(at, dict_below(at, m), m);
        break;
      }
      case 'u': {  // SETITEMS
        const size_t m = pop_mark(at);
        if ((stack_.size() - m) % 2) refuse(at, "SETITEMS with an odd number of items");
        set_items(at, dict_below(at, m), m);
        break;
      }
      case 'q':
        memo_put(at, u8(at));
        break;  // BINPUT
      case 'r':
        memo_put(at, le(at, 4));
        break;  // LONG_BINPUT
      case 0x94:
        memo_put(at, memo_count_);
        break;  // MEMOIZE
      case 'h':
        memo_get(at, u8(at));
        break;  // BINGET
      case 'j':
        memo_get(at, le(at, 4));
        break;  // LONG_BINGET
      default:
        refuse(at, "opcode " + opname(op) + " is not in the subset a Flight Recorder dump uses");
    }
  }

 public:
  // Memory: every store's growth is counted before it happens.
  size_t held() const {
    size_t a = 0;
    for (const auto& s : arena_) a += s.capacity();
    return stack_.bytes() + items_.bytes() + runs_.bytes() + boxes_.bytes() + memo_.bytes() + bigs_.bytes() +
           reals_.bytes() + a;
  }

 private:
  void grow(size_t at, size_t more) {
    if (more && held() + more > max_memory_)
      refuse(at, "reading it needs more than " + std::to_string(max_memory_ >> 20) +
                     " MiB besides the data (three times its size plus 40 MiB: a pickle of tiny values, or "
                     "not a Flight Recorder dump)");
  }

  std::string_view take(size_t at, uint64_t n) {
    if (n > d_.size() - pos_) refuse(at, "truncated: an operand runs past the end of the data");
    std::string_view v = d_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return v;
  }
  uint64_t u8(size_t at) { return static_cast<unsigned char>(take(at, 1)[0]); }
  uint64_t le(size_t at, size_t n) {
    std::string_view b = take(at, n);
    uint64_t v = 0;
    for (size_t k = n; k-- > 0;) v = (v << 8) | static_cast<unsigned char>(b[k]);
    return v;
  }
  V integer(size_t at, int64_t v) {
    constexpr int64_t kSmall = int64_t{1} << 59;
    if (v >= -kSmall && v < kSmall) return make_v(kInt, static_cast<uint64_t>(v) & ((uint64_t{1} << 60) - 1));
    grow(at, bigs_.next_bytes());
    bigs_.push_back(v);
    return make_v(kBig, bigs_.size() - 1);
  }
  void long_int(size_t at, size_t n) {
    if (n > 8) refuse(at, "LONG1 of " + std::to_string(n) + " bytes: integers beyond 64 bits are refused");
    std::string_view b = take(at, n);
    uint64_t v = 0;
    for (size_t k = n; k-- > 0;) v = (v << 8) | static_cast<unsigned char>(b[k]);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(b[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign
    push_new(at, integer(at, static_cast<int64_t>(v)));
  }
  V text(size_t at, uint64_t n, bool latin1) {
    if (n > lim_.max_string)
      refuse(at, "a string of " + std::to_string(n) + " bytes (limit " + std::to_string(lim_.max_string) + ")");
    std::string_view b = take(at, n);
    if (!latin1) return make_str(kData, static_cast<uint64_t>(b.data() - d_.data()), n);
    // bytes: each byte as the code point of that value, in UTF-8 (at most twice as long)
    size_t len = 0;
    for (unsigned char c : b) len += c < 0x80 ? 1 : 2;
    if (arena_.empty() || arena_.back().capacity() - arena_.back().size() < len) {
      const size_t cap = std::max<size_t>(len, 1u << 20);
      grow(at, cap);
      arena_start_.push_back(arena_.empty() ? 0 : arena_start_.back() + arena_.back().size());
      arena_.emplace_back();
      arena_.back().reserve(cap);
    }
    std::string& a = arena_.back();
    const uint64_t off = arena_start_.back() + a.size();
    for (unsigned char c : b) {
      if (c < 0x80) {
        a.push_back(static_cast<char>(c));
      } else {
        a.push_back(static_cast<char>(0xc0 | (c >> 6)));
        a.push_back(static_cast<char>(0x80 | (c & 0x3f)));
      }
    }
    return make_str(kArena, off, len);
  }
  V container(size_t at, Tag t) {
    if (++made_ > lim_.max_nodes) refuse(at, "more than " + std::to_string(lim_.max_nodes) + " values");
    grow(at, boxes_.next_bytes());
    boxes_.push_back(Box{});
    return make_v(t, boxes_.size() - 1);
  }
  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  // A value the pickle makes: counted against max_nodes before it is pushed.
  void push_new(size_t at, V v) {
    if (++made_ > lim_.max_nodes) refuse(at, "more than " + std::to_string(lim_.max_nodes) + " values");
    push(at, v);
  }
  void push(size_t at, V v) {
    if (stack_.size() >= lim_.max_nodes) refuse(at, "the stack grew past the value limit");
    grow(at, stack_.next_bytes());
    stack_.push_back(v);
  }
  V top(size_t at) {
    if (stack_.size() <= base()) refuse(at, "an opcode on an empty stack");
    return stack_.back();
  }
  V pop(size_t at) {
    const V v = top(at);
    stack_.resize_down(stack_.size() - 1);
    return v;
  }
  // Pops the innermost mark; the items since it stay on the stack, from the returned index.
  size_t pop_mark(size_t at) {
    if (marks_.empty()) refuse(at, "no MARK to pop to");
    const size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }
  V below(size_t at, size_t m, Tag t) {
    if (m == 0 || m <= base()) refuse(at, "an opcode on an empty stack");
    const V c = stack_[m - 1];
    if (tag(c) != t)
      refuse(at,
             t == kDict ? "SETITEM(S) on something that is not a dict" : "APPEND(S) on something that is not a list");
    return c;
  }
  V list_below(size_t at, size_t m) { return below(at, m, kList); }
  V dict_below(size_t at, size_t m) { return below(at, m, kDict); }
  // Moves stack_[m, m+n) to the end of box c's items.
  void append(size_t at, V c, size_t m, size_t n) {
    Box& b = boxes_[payload(c)];
    const uint64_t start = items_.size();
    for (size_t j = 0; j < n; ++j) {
      if (tag(stack_[m + j]) == kMark) refuse(at, "a MARK inside a container");
      grow(at, items_.next_bytes());
      items_.push_back(stack_[m + j]);
    }
    if (b.count + n > UINT32_MAX) refuse(at, "a container of more than 2^32 items");
    b.count += static_cast<uint32_t>(n);
    if (b.last != UINT32_MAX && runs_[b.last].start + runs_[b.last].n == start) {
      runs_[b.last].n += static_cast<uint32_t>(n);  // contiguous with its last run
      return;
    }
    grow(at, runs_.next_bytes());
    runs_.push_back(Run{start, static_cast<uint32_t>(n)});
    const auto r = static_cast<uint32_t>(runs_.size() - 1);
    if (b.last == UINT32_MAX)
      b.first = r;
    else
      runs_[b.last].next = r;
    b.last = r;
  }
  // Moves the key/value pairs stack_[m, end) into dict c.
  void set_items(size_t at, V c, size_t m) {
    const size_t n = stack_.size() - m;
    for (size_t j = 0; j < n; j += 2) {
      const Tag k = tag(stack_[m + j]);
      if (k != kData && k != kArena && k != kInt && k != kBig) refuse(at, "a dict key that is not a str or an int");
      if (tag(stack_[m + j + 1]) == kMark) refuse(at, "a MARK as a dict value");
    }
    append(at, c, m, n);
    boxes_[payload(c)].count -= static_cast<uint32_t>(n / 2);  // entries, not items
    stack_.resize_down(m);
  }
  void memo_put(size_t at, uint64_t key) {
    const V v = top(at);
    if (key > memo_.size() + (1u << 16))
      refuse(at, "memo key " + std::to_string(key) + " far beyond the " + std::to_string(memo_.size()) +
                     " stored (a pickler numbers them in order)");
    while (memo_.size() <= key) {
      if (memo_.size() >= lim_.max_nodes) refuse(at, "too many memo entries");
      grow(at, memo_.next_bytes());
      memo_.push_back(make_v(kHole, 0));
    }
    if (tag(memo_[key]) == kHole) ++memo_count_;
    memo_[key] = v;
  }
  void memo_get(size_t at, uint64_t key) {
    if (key >= memo_.size() || tag(memo_[key]) == kHole) refuse(at, "a memo reference to an entry never stored");
    push(at, memo_[key]);
  }

  std::string_view d_;
  const PickleLimits& lim_;
  const size_t max_memory_;
  size_t pos_ = 0;
  size_t made_ = 0;
  size_t memo_count_ = 0;
  Blocks<V> stack_, items_, memo_;
  Blocks<Run> runs_;
  Blocks<Box> boxes_;
  Blocks<int64_t> bigs_;
  Blocks<double> reals_;
  std::vector<std::string> arena_;  // blocks of bytes values as UTF-8; arena_start_: each one's offset
  std::vector<uint64_t> arena_start_;
  std::vector<size_t> marks_;
};

// Walks a read pickle: each value reported once per reference (a memo repeat counts each
// time), depth and count bounded.
class Walker {
 public:
  Walker(const Reader& r, PickleEvents& out, const PickleLimits& l) : r_(r), out_(out), lim_(l) {}
  void value(V v, size_t depth) {
    if (++written_ > lim_.max_nodes)
      throw InputError("pickle: more than " + std::to_string(lim_.max_nodes) +
                       " values once memo references are expanded (a self-repeating pickle?)");
    switch (tag(v)) {
      case kNone:
        out_.null();
        break;
      case kFalse:
      case kTrue:
        out_.boolean(tag(v) == kTrue);
        break;
      case kInt:
        out_.integer(static_cast<int64_t>(v) >> kTagBits);
        break;
      case kBig:
        out_.integer(r_.big(v));
        break;
      case kReal:
        if (std::isfinite(r_.real(v)))
          out_.real(r_.real(v));
        else
          out_.null();
        break;
      case kData:
      case kArena:
        out_.text(r_.text_of(v));
        break;
      case kList:
        nest(depth);
        out_.begin_list(r_.box(v).count);
        r_.each_item(r_.box(v), [&](V item) { value(item, depth + 1); });
        out_.end_list();
        break;
      case kDict:
        dict(v, depth);
        break;
      default:
        throw InputError("pickle: a MARK left inside a value");
    }
  }

 private:
  void dict(V v, size_t depth) {
    nest(depth);
    out_.begin_dict(r_.box(v).count);
    bool is_key = true;
    r_.each_item(r_.box(v), [&](V item) {
      if (is_key) {
        if (tag(item) == kInt || tag(item) == kBig)
          out_.key(std::to_string(tag(item) == kInt ? static_cast<int64_t>(item) >> kTagBits : r_.big(item)));
        else
          out_.key(r_.text_of(item));
      } else {
        value(item, depth + 1);
      }
      is_key = !is_key;
    });
    out_.end_dict();
  }
  void nest(size_t depth) const {
    if (depth >= lim_.max_depth)
      throw InputError("pickle: nested deeper than " + std::to_string(lim_.max_depth) +
                       " levels (a Flight Recorder dump has 5; a self-referencing pickle?)");
  }
  const Reader& r_;
  PickleEvents& out_;
  const PickleLimits& lim_;
  size_t written_ = 0;
};

// JSON text, bounded by max_output.
class JsonOut : public PickleEvents {
 public:
  explicit JsonOut(const PickleLimits& l) : lim_(l) {}
  std::string out;
  void null() override { leaf("null"); }
  void boolean(bool v) override { leaf(v ? "true" : "false"); }
  void integer(int64_t v) override { leaf(std::to_string(v)); }
  void real(double v) override {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    leaf(buf);
  }
  void text(std::string_view v) override {
    sep();
    str(v);
  }
  void begin_list(size_t) override { open('['); }
  void end_list() override { close(']'); }
  void begin_dict(size_t) override { open('{'); }
  void key(std::string_view k) override {
    sep();
    str(k);
    out += ':';
    after_key_ = true;
  }
  void end_dict() override { close('}'); }

 private:
  void check() const {
    if (out.size() > lim_.max_output)
      throw InputError("pickle: the dump expands past " + std::to_string(lim_.max_output >> 20) + " MiB");
  }
  // A comma before every item but the first of its container, none after a key.
  void sep() {
    check();
    if (after_key_)
      after_key_ = false;
    else if (!first_.empty() && !first_.back())
      out += ',';
    if (!first_.empty()) first_.back() = false;
  }
  void leaf(std::string_view s) {
    sep();
    out += s;
  }
  void open(char c) {
    sep();
    out += c;
    first_.push_back(true);
  }
  void close(char c) {
    first_.pop_back();
    out += c;
  }
  void str(std::string_view s) {
    out += '"';
    for (unsigned char c : s) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
    }
    out += '"';
  }
  const PickleLimits& lim_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace

void pickle_subset_walk(std::string_view data, PickleEvents& out, const PickleLimits& limits) {
  if (data.empty()) throw InputError("pickle: the data is empty");
  if (static_cast<unsigned char>(data[0]) != 0x80)
    throw InputError("pickle: no protocol header (0x80) at byte 0: not a pickle of protocol 2 or later");
  if (data.size() >> 33) throw InputError("pickle: more than 8 GiB");
  Reader r(data, limits);
  const V root = r.run();
  out.start(r.held(), r.max_memory());
  Walker(r, out, limits).value(root, 0);
}

std::string pickle_subset_to_json(std::string_view data, const PickleLimits& limits) {
  JsonOut j(limits);
  pickle_subset_walk(data, j, limits);
  return std::move(j.out);
}

size_t json_nesting_depth(std::string_view text, size_t stop_at, size_t* stopped_at) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest >= stop_at) {
        if (stopped_at) *stopped_at = i;
        return deepest;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace cs
