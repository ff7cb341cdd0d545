// region_run — one thread's run of fork-join region frames
// (coroutine/fork_region.hpp has the protocol): the scope a run opens on a
// thread (its deque, an empty stack of stacklets, the nesting floor), the
// driver that follows region frames' ends, and how a launcher learns
// whether the child it ran nested ended.
#pragma once

#include <coroutine>
#include <cstdint>
#include <utility>

#include "../executor/fork_stack.hpp"
#include "../executor/join_worker.hpp"
#include "task.hpp"

namespace canopy::detail {

// How far down this thread's C++ stack the caller runs: its stack pointer.
// (Not __builtin_frame_address, which makes GCC set up a frame pointer in
// every coroutine body that nests a join.)
[[gnu::always_inline]] inline std::uintptr_t stack_position() noexcept {
#if defined(__x86_64__)
  std::uintptr_t position = 0;  // NOLINT(misc-const-correctness): the asm writes it
  asm("mov %%rsp, %0" : "=r"(position));
  return position;
#else
  return reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
#endif
}

// While a thread runs region frames, region_state().joins names its offer
// deque: from the opening join or a steal until that run returns. A run
// nested in another on the same thread (a stolen record run while a
// callable join helps) puts the outer one back.
// Every run starts on an empty stack (fork_stack.hpp), so a run nested on
// this thread never pushes frames on top of frames another chain owns; the
// outer run's stack is current again at the end.
class region_scope {
 public:
  explicit region_scope(join_worker* joins) noexcept
      :
#if !defined(CANOPY_MODEL_CHECK) && !defined(CANOPY_RELACY)
        outer_(std::exchange(region_state().joins, joins)),
        outer_floor_(region_state().nesting_floor),
#endif
        outer_stack_(enter_stack_run(joins != nullptr ? &joins->stack_cache() : nullptr)) {
#if !defined(CANOPY_MODEL_CHECK) && !defined(CANOPY_RELACY)
    if (outer_floor_ == 0) {
      region_state().nesting_floor = nesting_floor_for(joins);
    }
#endif
  }
  region_scope(const region_scope&) = delete;
  region_scope& operator=(const region_scope&) = delete;
  region_scope(region_scope&&) = delete;
  region_scope& operator=(region_scope&&) = delete;
  ~region_scope() {
    leave_stack_run(outer_stack_);
#if !defined(CANOPY_MODEL_CHECK) && !defined(CANOPY_RELACY)
    region_state().joins = outer_;
    region_state().nesting_floor = outer_floor_;
#endif
  }

 private:
  // A run keeps half its thread's stack free, as help() does: a worker
  // knows its floor; any other thread (a host's) looks its stack up once.
  // Where the stack is unknown, a run nests at most this much below its
  // start.
  static constexpr std::uintptr_t nesting_budget = std::uintptr_t{64} << 10;
  static std::uintptr_t nesting_floor_for(join_worker* joins) noexcept {
    if (joins != nullptr && joins->nesting_floor() != 0) {
      return joins->nesting_floor();
    }
    static constinit thread_local std::uintptr_t known_floor = 0;
    if (known_floor == 0) {
      const std::uintptr_t middle = join_worker::stack_middle_here();
      known_floor = middle != 0 ? middle : ~std::uintptr_t{0};
    }
    if (known_floor != ~std::uintptr_t{0}) {
      return known_floor;
    }
    const std::uintptr_t here = stack_position();
    return here > nesting_budget ? here - nesting_budget : 1;
  }

#if !defined(CANOPY_MODEL_CHECK) && !defined(CANOPY_RELACY)
  join_worker* outer_;
  std::uintptr_t outer_floor_;
#endif
  stack_run_outer outer_stack_;
};

// Runs region frames from `first` until none is named: each region
// frame's end leaves what comes next (region_state) instead of transferring to
// it, so a long chain of ends does not grow the stack. A join deferred
// because its children would nest too deep (fork_record::run_rest) runs
// from here, at the bottom of the run. Inside a region_scope.
inline void drive(std::coroutine_handle<> first) noexcept {
  std::coroutine_handle<> next = first;
  for (;;) {
    while (next) {
      next.resume();
      region_thread& here = region_state();
      if (region_link* const ended = std::exchange(here.ended, nullptr)) {
        next = ended->ended(*ended);
      } else {
        next = std::exchange(here.next, {});
      }
    }
    region_thread& here = region_state();
    if (here.deferred == nullptr) {
      return;
    }
    next = here.deferred_rest(std::exchange(here.deferred, nullptr));
  }
}

// After a child ran nested on this thread (its launch, or a resumption):
// true if it ended (its end left its link), false if it is suspended in a
// join another thread now holds. A task it awaited inline that ended names
// it to resume: it goes on here, nested too.
CANOPY_INLINE_THREAD_LOCAL_STEP inline bool child_ended_here() noexcept {
  region_thread& here = region_state();
  for (;;) {
    if (here.ended != nullptr) {
      here.ended = nullptr;
      return true;
    }
    const std::coroutine_handle<> next = std::exchange(here.next, {});
    if (!next) {
      return false;
    }
    next.resume();
  }
}

// How a launched child's run on the launching thread came back.
enum class child_run : std::uint8_t {
  ended,          // it ended (or was not made); the record was not offered
  ended_offered,  // it ended, and the record was offered while it ran
  suspended,      // it waits in a join another thread holds
};

}  // namespace canopy::detail
