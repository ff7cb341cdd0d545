// task_slot — one task's place in the arena, and its state machine.
//
// State word (64 bits):
//   bits  0..1   flags: SCHEDULED (1) and EXECUTING (2); IDLE is neither
//   bits 32..63  generation: bumped when the slot is freed, so a waker that
//                carries an old generation can never schedule the slot's
//                next task
//
// Transitions (each names the thread that makes it):
//   schedule (any thread)     IDLE -> SCHEDULED: the caller sets the task bit
//                             EXECUTING -> EXECUTING|SCHEDULED: no bit; the
//                             worker re-signals once when the run ends
//                             SCHEDULED -> unchanged (already runnable)
//   begin_run (worker that claimed the task bit)  SCHEDULED -> EXECUTING
//   end_run: suspended (same worker)  EXECUTING -> IDLE, or if SCHEDULED was
//                             set meanwhile, -> SCHEDULED and the worker sets
//                             the task bit again
//   end_run: yielded (same worker)    -> SCHEDULED, onto the local yield queue
//   end_run: to_host (same worker)    -> SCHEDULED, onto the host channel's queue
//   end_run: completed (same worker)  -> generation + 1, IDLE; then the body
//                             is destroyed and the occupancy bit cleared
// Invariant S: a task's bit is set in the summary tree, or it sits in a
// yield queue or the host channel's queue, at most once, and only while its state is SCHEDULED
// without EXECUTING. So no task ever runs concurrently with itself.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../atomics/atomics.hpp"

namespace canopy::detail {

class join_state_base;

// What one run of a task body ended with.
enum class run_outcome : std::uint8_t {
  completed,  // the body is finished; the slot is freed
  suspended,  // waiting for a wake(); the slot stays, idle
  yielded,    // runnable again at once, after other ready tasks
  to_host,    // runnable again at once, on the host thread (executor/host/host_channel.hpp)
};

// Why a body is destroyed.
enum class task_end : std::uint8_t {
  completed,  // after run() returned completed
  dropped,    // without completing (cancelled, or shutdown)
};

// How the executor runs and destroys a type-erased task body that lives in
// a slot's storage. Both functions are called on a worker thread (or the
// thread running shutdown), never concurrently for one slot.
struct task_vtable {
  run_outcome (*run)(void* storage);
  void (*destroy)(void* storage, task_end end) noexcept;
  // The join state whose cancel request ends the task (null: none, e.g. a
  // detached task). Asked only by the thread running the task, which keeps
  // the body, and the state it holds a reference on, alive meanwhile.
  const join_state_base* (*cancel_state)(const void* storage) noexcept = nullptr;
};

struct alignas(atomics::cache_line) task_slot {
  static constexpr std::uint64_t scheduled = 1;
  static constexpr std::uint64_t executing = 2;
  static constexpr std::uint64_t flag_mask = 3;
  static constexpr std::size_t storage_size = 48;

  static constexpr std::uint32_t generation_of(std::uint64_t state) noexcept {
    return static_cast<std::uint32_t>(state >> 32);
  }
  static constexpr std::uint64_t make_state(std::uint32_t generation,
                                            std::uint64_t flags) noexcept {
    return (std::uint64_t{generation} << 32) | flags;
  }

  atomics::atomic<std::uint64_t> state{0};
  const task_vtable* vtable = nullptr;
  alignas(16) std::byte storage[storage_size];
};

// The checkers' atomics carry more than the word (the model's its name for
// the word, Relacy's its history).
#if !defined(CANOPY_MODEL_CHECK) && !defined(CANOPY_RELACY)
static_assert(sizeof(task_slot) == atomics::cache_line, "a task slot is one cache line");

// The slot whose storage `body` is: a body that changes its own kind
// (coroutine/lazy_child.hpp's lazy_child) sets the slot's vtable through it.
// Only the thread that runs the body.
inline task_slot& slot_of_storage(void* body) noexcept {
  static_assert(offsetof(task_slot, storage) == 16, "the storage follows the state and vtable");
  return *reinterpret_cast<task_slot*>(static_cast<std::byte*>(body) -
                                       offsetof(task_slot, storage));
}
#endif

// A task's identity: its slot index and the generation it was spawned in.
struct task_id {
  std::uint32_t slot = 0;
  std::uint32_t generation = 0;
};

}  // namespace canopy::detail
