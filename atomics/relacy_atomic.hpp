// relacy_atomic — the atomics a weak-memory checking build substitutes
// (CANOPY_RELACY, tests/relacy/): each operation is Relacy's, with the
// memory order the protocol code asks for, so that Relacy's simulation of
// the C++ memory model lets a non-seq_cst load read an older store and a
// missing fence shows up as a lost wake-up. Used only inside a Relacy test
// (the objects must be built while a simulation runs).
#pragma once

#include <relacy/relacy.hpp>
// Relacy replaces new/delete and malloc/free with macros to track leaks;
// the protocol code declares "= delete" members and uses the standard
// library's allocation, so take the macros back (heap use is not checked).
#undef new
#undef delete
#undef malloc
#undef calloc
#undef realloc
#undef free

#include <cstdint>
#include <version>
#if defined(__cpp_lib_source_location)
#include <source_location>
#endif

namespace canopy::detail::relacy {

using memory_order = rl::memory_order;

// Where an operation was called from, for Relacy's execution history.
#if defined(__cpp_lib_source_location)
using call_site = std::source_location;
inline rl::debug_info where(const call_site& at) {
  return rl::debug_info(at.function_name(), at.file_name(), at.line());
}
#else
// clang 14 with libstdc++ 12 has no std::source_location: no locations.
struct call_site {
  static call_site current() noexcept { return {}; }
};
inline rl::debug_info where(const call_site& /*at*/) { return rl::debug_info(); }
#endif

template <class T>
class atomic {
  using here = call_site;

 public:
  atomic(const here& at = here::current()) { value_.store(T{}, rl::mo_relaxed, where(at)); }
  atomic(T value, const here& at = here::current()) {  // NOLINT(google-explicit-constructor)
    value_.store(value, rl::mo_relaxed, where(at));
  }
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;

  T load(memory_order order = rl::mo_seq_cst, const here& at = here::current()) const {
    return value_.load(order, where(at));
  }
  void store(T value, memory_order order = rl::mo_seq_cst, const here& at = here::current()) {
    value_.store(value, order, where(at));
  }
  T exchange(T value, memory_order order = rl::mo_seq_cst, const here& at = here::current()) {
    return value_.exchange(value, order, where(at));
  }
  bool compare_exchange_strong(T& expected, T desired, memory_order success = rl::mo_seq_cst,
                               memory_order failure = rl::mo_seq_cst,
                               const here& at = here::current()) {
    return value_.compare_exchange_strong(expected, desired, success, where(at), failure,
                                          where(at));
  }
  bool compare_exchange_weak(T& expected, T desired, memory_order success = rl::mo_seq_cst,
                             memory_order failure = rl::mo_seq_cst,
                             const here& at = here::current()) {
    return value_.compare_exchange_weak(expected, desired, success, where(at), failure, where(at));
  }
  T fetch_add(T delta, memory_order order = rl::mo_seq_cst, const here& at = here::current()) {
    return value_.fetch_add(delta, order, where(at));
  }
  T fetch_sub(T delta, memory_order order = rl::mo_seq_cst, const here& at = here::current()) {
    return value_.fetch_sub(delta, order, where(at));
  }
  T fetch_or(T bits, memory_order order = rl::mo_seq_cst, const here& at = here::current()) {
    return value_.fetch_or(bits, order, where(at));
  }
  T fetch_and(T bits, memory_order order = rl::mo_seq_cst, const here& at = here::current()) {
    return value_.fetch_and(bits, order, where(at));
  }

  // The futex: block while the word holds `expected`; wake every waiter.
  // The kernel compares under the futex bucket's lock, which a waker also
  // takes after its store, so the compare sees that store: modelled as a
  // read-modify-write (which reads the latest value in the word's
  // modification order), with no schedule point between it and the park.
  // No spurious wake-up: a parked worker nobody wakes stays parked, so a
  // lost wake-up shows as a deadlock.
  void futex_wait(T expected, const here& at = here::current()) {
    rl::context& context = rl::ctx();
    T current{};
    {
      const rl::preemption_disabler no_switch(context);
      current = value_.fetch_add(0, rl::mo_seq_cst, where(at));
    }
    if (current != expected) {
      return;
    }
    static_cast<void>(value_.wait(context, false, false, where(at)));
  }
  void futex_wake(const here& at = here::current()) {
    rl::context& context = rl::ctx();
    context.sched();
    context.atomic_thread_fence_seq_cst();
    static_cast<void>(value_.wake(context, 1000, where(at)));
  }

 private:
  mutable rl::atomic<T> value_;
};

}  // namespace canopy::detail::relacy
