// The pickle subset of the Flight Recorder's dump, read by a small stack machine (opcodes as
// CPython's Lib/pickletools.py documents them). See pickle_subset.hpp for what is accepted.
#include "pickle_subset.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "error.hpp"

namespace cs {

namespace {

struct Node;
using NodeP = std::shared_ptr<Node>;

struct Node {
  enum Kind { none, boolean, integer, real, text, list, dict, mark } kind = none;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<NodeP> items;                      // list, tuple, set
  std::vector<std::pair<NodeP, NodeP>> entries;  // dict, in insertion order
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
  Reader(std::string_view d, const PickleLimits& l) : d_(d), lim_(l) {}
  // A pickle can make a container hold itself (a memo reference to a list being built, then
  // APPEND): a cycle of shared_ptrs that would never be freed. Every node made is cut loose here.
  ~Reader() {
    for (const NodeP& n : all_) {
      n->items.clear();
      n->entries.clear();
    }
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  NodeP run() {
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
          if (stack_.back()->kind == Node::mark) refuse(at, "STOP on a MARK");
          return stack_.back();
        default:
          if (!push_value(at, op)) build(at, op);
      }
    }
  }

 private:
  // The opcodes that push one value. False when `op` is none of them.
  bool push_value(size_t at, unsigned char op) {
    switch (op) {
      case 'N':
        push(at, make(Node::none));
        break;
      case 0x88:
        push(at, boolean(true));
        break;  // NEWTRUE
      case 0x89:
        push(at, boolean(false));
        break;     // NEWFALSE
      case 'J': {  // BININT: signed 4 bytes
        const auto v = static_cast<int32_t>(le(at, 4));
        push(at, integer(v));
        break;
      }
      case 'K':
        push(at, integer(u8(at)));
        break;  // BININT1
      case 'M':
        push(at, integer(static_cast<int64_t>(le(at, 2))));
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
        auto n = make(Node::real);
        n->f = v;
        push(at, n);
        break;
      }
      case 'X':
        push(at, text(at, le(at, 4), false));
        break;  // BINUNICODE
      case 0x8c:
        push(at, text(at, u8(at), false));
        break;  // SHORT_BINUNICODE
      case 0x8d:
        push(at, text(at, le(at, 8), false));
        break;  // BINUNICODE8
      case 'T':
        push(at, text(at, le(at, 4), true));
        break;  // BINSTRING
      case 'U':
        push(at, text(at, u8(at), true));
        break;  // SHORT_BINSTRING
      case 'B':
        push(at, text(at, le(at, 4), true));
        break;  // BINBYTES
      case 'C':
        push(at, text(at, u8(at), true));
        break;  // SHORT_BINBYTES
      case 0x8e:
        push(at, text(at, le(at, 8), true));
        break;  // BINBYTES8
      case '}':
        push(at, make(Node::dict));
        break;  // EMPTY_DICT
      case ']':
        push(at, make(Node::list));
        break;  // EMPTY_LIST
      case ')':
        push(at, make(Node::list));
        break;  // EMPTY_TUPLE
      case 0x8f:
        push(at, make(Node::list));
        break;  // EMPTY_SET
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
        pop_mark(at);
        break;  // POP_MARK
      case '2':
        push(at, top(at));
        break;  // DUP
      case 't':
      case 'l':
      case 0x91: {  // TUPLE, LIST, FROZENSET: items since the mark
        auto n = make(Node::list);
        n->items = pop_mark(at);
        push(at, n);
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        const size_t k = op - 0x84u;
        if (stack_.size() < k + base()) refuse(at, "TUPLE" + std::to_string(k) + " on a short stack");
        auto n = make(Node::list);
        n->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
        for (const auto& it : n->items)
          if (it->kind == Node::mark) refuse(at, "a MARK inside a tuple");
        stack_.resize(stack_.size() - k);
        push(at, n);
        break;
      }
      case 'd': {  // DICT: key/value pairs since the mark
        auto n = make(Node::dict);
        auto kv = pop_mark(at);
        if (kv.size() % 2) refuse(at, "DICT with an odd number of items");
        for (size_t j = 0; j < kv.size(); j += 2) set_item(at, *n, kv[j], kv[j + 1]);
        push(at, n);
        break;
      }
      case 'a': {  // APPEND
        auto v = pop(at);
        container(at, Node::list)->items.push_back(v);
        break;
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        auto vs = pop_mark(at);
        auto& l = container(at, Node::list)->items;
        l.insert(l.end(), vs.begin(), vs.end());
        break;
      }
      case 's': {  // SETITEM
        auto v = pop(at);
        auto k = pop(at);
        set_item(at, *container(at, Node::dict), k, v);
        break;
      }
      case 'u': {  // SETITEMS
        auto kv = pop_mark(at);
        if (kv.size() % 2) refuse(at, "SETITEMS with an odd number of items");
        auto d = container(at, Node::dict);
        for (size_t j = 0; j < kv.size(); j += 2) set_item(at, *d, kv[j], kv[j + 1]);
        break;
      }
      case 'q':
        memo_put(at, u8(at));
        break;  // BINPUT
      case 'r':
        memo_put(at, le(at, 4));
        break;  // LONG_BINPUT
      case 0x94:
        memo_put(at, memo_.size());
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
  NodeP make(Node::Kind k) {
    if (++made_ > lim_.max_nodes) refuse(pos_, "more than " + std::to_string(lim_.max_nodes) + " values");
    auto n = std::make_shared<Node>();
    n->kind = k;
    all_.push_back(n);
    return n;
  }
  NodeP boolean(bool v) {
    auto n = make(Node::boolean);
    n->b = v;
    return n;
  }
  NodeP integer(int64_t v) {
    auto n = make(Node::integer);
    n->i = v;
    return n;
  }
  void long_int(size_t at, size_t n) {
    if (n > 8) refuse(at, "LONG1 of " + std::to_string(n) + " bytes: integers beyond 64 bits are refused");
    std::string_view b = take(at, n);
    uint64_t v = 0;
    for (size_t k = n; k-- > 0;) v = (v << 8) | static_cast<unsigned char>(b[k]);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(b[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign
    push(at, integer(static_cast<int64_t>(v)));
  }
  NodeP text(size_t at, uint64_t n, bool latin1) {
    if (n > lim_.max_string)
      refuse(at, "a string of " + std::to_string(n) + " bytes (limit " + std::to_string(lim_.max_string) + ")");
    std::string_view b = take(at, n);
    auto node = make(Node::text);
    if (!latin1) {
      node->s.assign(b);
    } else {  // bytes: each byte as the code point of that value
      for (unsigned char c : b) {
        if (c < 0x80) {
          node->s.push_back(static_cast<char>(c));
        } else {
          node->s.push_back(static_cast<char>(0xc0 | (c >> 6)));
          node->s.push_back(static_cast<char>(0x80 | (c & 0x3f)));
        }
      }
    }
    return node;
  }
  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(size_t at, NodeP n) {
    if (stack_.size() >= lim_.max_nodes) refuse(at, "the stack grew past the value limit");
    stack_.push_back(std::move(n));
  }
  NodeP top(size_t at) {
    if (stack_.size() <= base()) refuse(at, "an opcode on an empty stack");
    return stack_.back();
  }
  NodeP pop(size_t at) {
    NodeP n = top(at);
    stack_.pop_back();
    return n;
  }
  std::vector<NodeP> pop_mark(size_t at) {
    if (marks_.empty()) refuse(at, "no MARK to pop to");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<NodeP> out(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return out;
  }
  Node* container(size_t at, Node::Kind k) {
    NodeP t = top(at);
    if (t->kind != k)
      refuse(at, k == Node::dict ? "SETITEM(S) on something that is not a dict"
                                 : "APPEND(S) on something that is not a list");
    return t.get();
  }
  void set_item(size_t at, Node& d, const NodeP& k, const NodeP& v) {
    if (k->kind != Node::text && k->kind != Node::integer) refuse(at, "a dict key that is not a str or an int");
    if (v->kind == Node::mark) refuse(at, "a MARK as a dict value");
    d.entries.emplace_back(k, v);
  }
  void memo_put(size_t at, uint64_t key) {
    if (memo_.size() >= lim_.max_nodes) refuse(at, "too many memo entries");
    memo_[key] = top(at);
  }
  void memo_get(size_t at, uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) refuse(at, "a memo reference to an entry never stored");
    push(at, it->second);
  }

  std::string_view d_;
  const PickleLimits& lim_;
  size_t pos_ = 0;
  size_t made_ = 0;
  std::vector<NodeP> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, NodeP> memo_;
  std::vector<NodeP> all_;  // every node made, for the destructor
};

class Writer {
 public:
  explicit Writer(const PickleLimits& l) : lim_(l) {}
  std::string out;

  void value(const Node& n, size_t depth) {
    if (++written_ > lim_.max_nodes)
      throw InputError("pickle: more than " + std::to_string(lim_.max_nodes) +
                       " values once memo references are expanded (a self-repeating pickle?)");
    if (out.size() > lim_.max_output)
      throw InputError("pickle: the dump expands past " + std::to_string(lim_.max_output >> 20) + " MiB");
    switch (n.kind) {
      case Node::none:
        out += "null";
        break;
      case Node::boolean:
        out += n.b ? "true" : "false";
        break;
      case Node::integer:
        out += std::to_string(n.i);
        break;
      case Node::real:
        if (!std::isfinite(n.f)) {
          out += "null";
        } else {
          char buf[40];
          std::snprintf(buf, sizeof buf, "%.17g", n.f);
          out += buf;
        }
        break;
      case Node::text:
        str(n.s);
        break;
      case Node::list:
        nest(depth);
        out += '[';
        for (size_t k = 0; k < n.items.size(); ++k) {
          if (k) out += ',';
          value(*n.items[k], depth + 1);
        }
        out += ']';
        break;
      case Node::dict:
        nest(depth);
        out += '{';
        for (size_t k = 0; k < n.entries.size(); ++k) {
          if (k) out += ',';
          const Node& key = *n.entries[k].first;
          str(key.kind == Node::text ? key.s : std::to_string(key.i));
          out += ':';
          value(*n.entries[k].second, depth + 1);
        }
        out += '}';
        break;
      case Node::mark:
        throw InputError("pickle: a MARK left inside a value");
    }
  }

 private:
  void nest(size_t depth) const {
    if (depth >= lim_.max_depth)
      throw InputError("pickle: nested deeper than " + std::to_string(lim_.max_depth) +
                       " levels (a Flight Recorder dump has 5; a self-referencing pickle?)");
  }
  void str(const std::string& s) {
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
  size_t written_ = 0;
};

}  // namespace

std::string pickle_subset_to_json(std::string_view data, const PickleLimits& limits) {
  if (data.empty()) throw InputError("pickle: the data is empty");
  if (static_cast<unsigned char>(data[0]) != 0x80)
    throw InputError("pickle: no protocol header (0x80) at byte 0: not a pickle of protocol 2 or later");
  Reader r(data, limits);
  NodeP root = r.run();
  Writer w(limits);
  w.value(*root, 0);
  return std::move(w.out);
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
