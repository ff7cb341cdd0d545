// futex — the one place Canopy blocks a thread on a 32-bit word and wakes it.
//
// Every sleeper that waits for a word to change goes through these calls:
// a parked worker on its latch (signal_waker/park_backend.cpp), a fork-join
// joiner on its countdown (fork_join/join.hpp) and a thread blocked on a join
// state (executor/join_state.cpp). As with atomics.hpp, a checking build
// swaps the kernel's futex for the checker's, so the protocol code that
// parks is the same code the checkers run.
//
// futex_wait(word, expected): sleeps while word == expected. The kernel
// compares under its own lock, so a store followed by a wake that come
// before the compare make it return at once (EAGAIN). It may return early
// (a signal, a spurious wake): every caller re-reads the word and loops.
// futex_wait_until(word, expected, deadline): the same, until an absolute
// CLOCK_MONOTONIC deadline (FUTEX_WAIT_BITSET; null: none), the clock of
// std::chrono::steady_clock. Real build only (no checked code has a timeout).
// futex_wake_one / futex_wake_all: wake one / every thread sleeping on word.
// Results are not reported: callers decide by re-reading the word.
//
// The checkers' futexes wake every waiter even for futex_wake_one, which
// the contract above allows (a woken waiter re-reads the word), and neither
// wakes spuriously, so a lost wake-up shows as a deadlock.
#pragma once

#include <cstdint>

#include "atomics.hpp"

#if !defined(CANOPY_MODEL_CHECK) && !defined(CANOPY_RELACY)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>
#endif

namespace canopy::detail::atomics {

#ifdef CANOPY_MODEL_CHECK
// Model-checking build: parking is a state of the checker's logical thread
// (tests/model/model_checker.cpp); peek() hands it the word's value.
inline void futex_wait(atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  model::park_on(&word, expected, word.peek());
}
inline void futex_wake_one(atomic<std::uint32_t>& word) noexcept { model::unpark_on(&word); }
inline void futex_wake_all(atomic<std::uint32_t>& word) noexcept { model::unpark_on(&word); }
#elif defined(CANOPY_RELACY)
// Weak-memory checking build: Relacy's futex emulation on the word
// (atomics/relacy_atomic.hpp), recorded at the caller's line.
inline void futex_wait(atomic<std::uint32_t>& word, std::uint32_t expected,
                       const relacy::call_site& at = relacy::call_site::current()) {
  word.futex_wait(expected, at);
}
inline void futex_wake_one(atomic<std::uint32_t>& word,
                           const relacy::call_site& at = relacy::call_site::current()) {
  word.futex_wake(at);
}
inline void futex_wake_all(atomic<std::uint32_t>& word,
                           const relacy::call_site& at = relacy::call_site::current()) {
  word.futex_wake(at);
}
#else
// The address the kernel sees: std::atomic<uint32_t> is the plain word.
inline std::uint32_t* futex_address(atomic<std::uint32_t>& word) noexcept {
  static_assert(sizeof(atomic<std::uint32_t>) == sizeof(std::uint32_t));
  return reinterpret_cast<std::uint32_t*>(&word);
}

inline void futex_wait(atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  syscall(SYS_futex, futex_address(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

inline void futex_wait_until(atomic<std::uint32_t>& word, std::uint32_t expected,
                             const timespec* monotonic_deadline) noexcept {
  syscall(SYS_futex, futex_address(word), FUTEX_WAIT_BITSET_PRIVATE, expected, monotonic_deadline,
          nullptr, FUTEX_BITSET_MATCH_ANY);
}

inline void futex_wake_one(atomic<std::uint32_t>& word) noexcept {
  syscall(SYS_futex, futex_address(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

inline void futex_wake_all(atomic<std::uint32_t>& word) noexcept {
  syscall(SYS_futex, futex_address(word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}
#endif

}  // namespace canopy::detail::atomics
