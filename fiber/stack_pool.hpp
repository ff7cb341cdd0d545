// stack_pool — fiber stacks carved from large mappings, with a guard page
// below each stack while the process's mapping budget allows.
//
// The constraint: Linux limits a process to vm.max_map_count mappings
// (65530 here). A PROT_NONE guard page below a stack splits the mapping, so
// every guarded stack costs two VMAs; 100,000 guarded stacks would need
// 200,000. So:
//   * Stacks come from chunks (one mmap, ~2 MiB each). Every stack slot is
//     [one guard page][stack], so the layout is the same either way.
//   * While the guard budget lasts, the slot's guard page is mprotect'ed
//     PROT_NONE: an overflow faults at once (SIGSEGV). The budget defaults
//     to half of what max_map_count leaves after the mappings that exist at
//     first use, divided by two (VMAs per guarded stack); set_guard_limit()
//     overrides it.
//   * Beyond the budget, slots keep their guard page readable and writable
//     (one VMA per chunk). Such a stack is protected only by a canary at
//     its lowest address that is checked each time the fiber switches out:
//     an overflow is reported (abort with a message) at the next
//     suspension, after it may already have written up to the page below
//     and then into the stack below that. This is the honest cost of more
//     fibers than guard pages. What the canary can catch: an overflow that
//     writes the 8 bytes at the stack's lowest address (any overflow that
//     grows the stack contiguously past its end, as deep recursion does).
//     What it cannot: a frame that skips over those 8 bytes (a large local
//     array written sparsely, alloca), an overflow that crashes before the
//     next suspension, or one that writes the canary's value back. Only a
//     guarded stack catches every overflow; give fibers that recurse
//     deeply or keep large locals a guarded stack (set_guard_limit).
//   * Free stacks are reused (guarded ones first); memory is never
//     unmapped, a free stack keeps the pages it touched.
// Thread-safe; a small per-thread cache keeps the global lock off the
// spawn/finish path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace canopy {

// What stack_pool::stats() reports.
struct stack_pool_stats {
  std::size_t chunks = 0;          // mappings made
  std::size_t stacks = 0;          // stacks carved (free or in use)
  std::size_t guarded_stacks = 0;  // of which have a PROT_NONE guard page
  std::size_t in_use = 0;          // out of the shared pool (in use, or in a thread's cache)
  std::size_t guard_limit = 0;     // guarded stacks allowed in total
};

// The pool's public face (<canopy/fiber.hpp>): its counts, the guard budget
// and the default stack size.
namespace stack_pool {

inline constexpr std::size_t default_stack_size = std::size_t{64} * 1024;

// How many stacks may have a guard page in total (already guarded ones
// keep theirs). Takes effect for chunks carved afterwards.
void set_guard_limit(std::size_t stacks) noexcept;

stack_pool_stats stats() noexcept;

}  // namespace stack_pool

namespace detail {

struct fiber_stack {
  void* base = nullptr;  // lowest usable byte (just above the guard page)
  std::size_t size = 0;  // usable bytes
  bool guarded = false;  // a PROT_NONE page lies just below `base`
};

// What the fibers take from the pool and give back.
namespace fiber_stacks {

// The usable bytes acquire(size) gives: `size` rounded up to whole pages
// (at least one page).
[[nodiscard]] std::size_t usable_size(std::size_t size) noexcept;
// A stack of usable_size(size) bytes. Throws std::bad_alloc when the
// kernel refuses memory.
fiber_stack acquire(std::size_t size);
void release(const fiber_stack& stack) noexcept;

// The canary an unguarded stack carries at its base.
void write_canary(const fiber_stack& stack) noexcept;
[[nodiscard]] bool canary_intact(const fiber_stack& stack) noexcept;

}  // namespace fiber_stacks

}  // namespace detail

}  // namespace canopy
