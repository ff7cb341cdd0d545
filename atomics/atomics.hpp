// The one place Canopy's protocol code gets its atomics, fences and threads.
//
// Every word of the scheduling protocol (summary tree, permit semaphore,
// sleep counters, latches, task states) is declared through these aliases so
// that a model-checking build can swap them for a checker's instrumented types
// without touching the protocol code. Nothing here adds behaviour. Blocking
// on a word (the futex) is futex.hpp's, swapped by the same builds.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#ifdef CANOPY_MODEL_CHECK
#include "model_atomic.hpp"
#elif defined(CANOPY_RELACY)
#include "relacy_atomic.hpp"
#endif

namespace canopy::detail::atomics {

#ifdef CANOPY_MODEL_CHECK
// Model-checking build (tests/model/): every operation is a schedule point.
template <class T>
using atomic = model::atomic<T>;
using memory_order = int;
inline constexpr memory_order relaxed = 0;
inline constexpr memory_order acquire = 0;
inline constexpr memory_order release = 0;
inline constexpr memory_order acq_rel = 0;
inline constexpr memory_order seq_cst = 0;
inline void fence_seq_cst() noexcept { model::schedule_point(); }
#elif defined(CANOPY_RELACY)
// Weak-memory checking build (tests/relacy/): Relacy's atomics and orders.
template <class T>
using atomic = relacy::atomic<T>;
using memory_order = relacy::memory_order;
inline constexpr memory_order relaxed = rl::mo_relaxed;
inline constexpr memory_order acquire = rl::mo_acquire;
inline constexpr memory_order release = rl::mo_release;
inline constexpr memory_order acq_rel = rl::mo_acq_rel;
inline constexpr memory_order seq_cst = rl::mo_seq_cst;
inline void fence_seq_cst(const relacy::call_site& at = relacy::call_site::current()) {
  rl::atomic_thread_fence(rl::mo_seq_cst, relacy::where(at));
}
#else
template <class T>
using atomic = std::atomic<T>;

using memory_order = std::memory_order;
inline constexpr memory_order relaxed = std::memory_order_relaxed;
inline constexpr memory_order acquire = std::memory_order_acquire;
inline constexpr memory_order release = std::memory_order_release;
inline constexpr memory_order acq_rel = std::memory_order_acq_rel;
inline constexpr memory_order seq_cst = std::memory_order_seq_cst;

// A full fence. Used only where a store-then-load handshake between two
// threads on *different* words must not be reordered (the store-buffering
// pattern); each call site names the fence it pairs with.
//
// On x86-64 a locked read-modify-write of the stack is as full a barrier as
// `mfence` for ordinary (write-back) memory, which is all these words are,
// and on AMD's cores `mfence` costs more, even right after a locked RMW
// (the measurement is in docs/history). GCC
// already compiles the fence to `lock orq $0, (%rsp)`; Clang (14 and 19
// alike) emits `mfence`, so under Clang the fence is GCC's instruction,
// written out. ThreadSanitizer builds keep the standard fence.
#if defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define CANOPY_FENCE_AS_LOCKED_OR 1
#endif
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#undef CANOPY_FENCE_AS_LOCKED_OR
#endif
#endif

#ifdef CANOPY_FENCE_AS_LOCKED_OR
inline void fence_seq_cst() noexcept { asm volatile("lock orq $0, (%%rsp)" ::: "memory", "cc"); }
#else
inline void fence_seq_cst() noexcept { std::atomic_thread_fence(std::memory_order_seq_cst); }
#endif
#endif

// A relaxed load of a word that another party (the kernel, through memory
// it shares with the process, such as an io_uring queue index) writes with
// its own atomics: the word is not a std::atomic of ours, so the load is
// made through the compiler's atomic built-in.
inline std::uint32_t load_shared_relaxed(const std::uint32_t* word) noexcept {
  return __atomic_load_n(word, __ATOMIC_RELAXED);
}

// Busy-wait hint for short spins.
inline void spin_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Give the CPU away for one scheduling round (the progressive-sleep yield phase).
inline void yield_thread() noexcept {
#ifdef CANOPY_MODEL_CHECK
  model::schedule_point();
#elif defined(CANOPY_RELACY)
  rl::yield(1, RL_INFO);
#else
  std::this_thread::yield();
#endif
}

using thread = std::thread;

// Size of the destructive-interference unit; shared hot words are padded to it.
inline constexpr std::size_t cache_line = 64;

}  // namespace canopy::detail::atomics
