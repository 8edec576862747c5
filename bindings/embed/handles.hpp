#pragma once
// The C API's handles (issue 30, class 6): what a host holds is not our pointer but a number: a
// slot of a table, the slot's generation and the kind of object. Closing or freeing bumps the
// slot's generation, so a handle closed twice, used after close, or of another kind (a plan given
// as a session) finds nothing and the call returns CS_E_HANDLE instead of freeing twice ("double
// free", the host aborted). NULL is CS_E_INVALID. Closing a handle while another thread is inside
// a call on it stays the host's mistake.
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace cs::embed {

template <class T, unsigned Kind>
class Handles {
 public:
  T* add(std::unique_ptr<T> obj) {
    std::lock_guard<std::mutex> lock(mu_);
    uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
    } else {
      i = static_cast<uint32_t>(slots_.size());
      if (i >= kMaxSlots) throw std::runtime_error("more than 16 million live handles");
      slots_.push_back({});
    }
    slots_[i].obj = obj.release();
    return reinterpret_cast<T*>(encode(i, slots_[i].gen));
  }
  // The object of a live handle; nullptr for NULL, a closed handle or another kind's.
  T* get(const T* h) {
    std::lock_guard<std::mutex> lock(mu_);
    const Slot* s = find(h);
    return s ? s->obj : nullptr;
  }
  // Takes the object out (the handle is dead from now on); nullptr as get.
  std::unique_ptr<T> take(const T* h) {
    std::lock_guard<std::mutex> lock(mu_);
    Slot* s = find(h);
    if (!s) return nullptr;
    std::unique_ptr<T> obj(s->obj);
    s->obj = nullptr;
    if (++s->gen == 0) s->gen = 1;
    free_.push_back(static_cast<uint32_t>(s - slots_.data()));
    return obj;
  }

 private:
  static_assert(sizeof(uintptr_t) >= 8, "handles need 64-bit pointers");
  static constexpr uint32_t kMaxSlots = 1u << 24;
  struct Slot {
    T* obj = nullptr;
    uint32_t gen = 1;
  };
  static uintptr_t encode(uint32_t i, uint32_t gen) {
    return (uintptr_t{gen} << 32) | (uintptr_t{Kind} << 24) | (i + 1);
  }
  Slot* find(const T* h) {
    const auto v = reinterpret_cast<uintptr_t>(h);
    const uint32_t i = static_cast<uint32_t>(v & (kMaxSlots - 1));
    if (i == 0 || ((v >> 24) & 0xff) != Kind || i > slots_.size()) return nullptr;
    Slot& s = slots_[i - 1];
    return s.obj && s.gen == static_cast<uint32_t>(v >> 32) ? &s : nullptr;
  }
  std::mutex mu_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace cs::embed
