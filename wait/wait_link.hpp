// wait_link — the one-shot registration a suspended task leaves with the
// thing it waits for (a join state, an async_event), shared by C++20
// coroutine tasks and fibers.
//
// A link names the task to wake (core + task_id) and has a three-state word:
//   armed      registered; the task is (or is about to be) suspended
//   fired      the source completed and woke the task (fire() ran)
//   abandoned  the task was destroyed (cancel, shutdown) while armed
// Transitions, each made once (per registration):
//   fire()     armed -> fired:      schedule(id) — the task's next run resumes
//              abandoned -> fired:  the abandoner left the owner (a coroutine
//                                   frame, a fiber stack) for us: reclaim it
//   abandon()  armed -> abandoned:  the owner stays alive until fire() comes
//              fired -> abandoned:  fire() is done with the link; destroy now
//   arm_again() fired -> armed:     a cancelled task whose source registers
//                                   the link once more (`rearm`); a new
//                                   registration, with the transitions above
// Why this exists: the link lives inside the waiting task (its frame or its
// fiber stack), and join_state has no way to take a continuation back. A
// task destroyed while a continuation is still registered must therefore
// not free the memory the continuation points to; it hands the memory to
// the firing side instead. A source that *can* take a registration back
// (async_event) provides `disarm`, and then nothing is deferred.
//
// Spurious wakes: a task whose link is still `armed` when it runs was woken
// by someone else (a user's waker, a cancel request); its body does not
// resume it. Readiness is "my link fired", never "the source looks done",
// because fire() still reads the link after the source publishes its result.
#pragma once

#include <cstdint>

#include "../executor/scheduler.hpp"
#include "../executor/task_slot.hpp"
#include "../atomics/atomics.hpp"

namespace canopy::detail {

struct wait_link {
  enum : std::uint32_t { armed = 0, fired = 1, abandoned = 2 };

  wait_link() noexcept = default;
  // g++ 12 may move an awaiter that holds a link before it is armed
  // (`co_await std::move(x)`); a move copies nothing that is live.
  wait_link(const wait_link& other) noexcept
      : disarm(other.disarm),
        rearm(other.rearm),
        source(other.source),
        completion_kept(other.completion_kept) {}
  wait_link& operator=(const wait_link&) = delete;

  // Point the link at the task running on this thread; state := armed.
  // Called by the task itself before it registers the link anywhere; the
  // registration's release (set_continuation, the event mutex) publishes it.
  void arm_for_current_task() noexcept {
    detail::worker_context* worker = detail::current_worker();
    core = worker->core;
    id = worker->running;
    state.store(armed, atomics::relaxed);
  }

  [[nodiscard]] bool has_fired() const noexcept {
    // acquire: pairs with fire()'s exchange; what the source published
    // before firing (a join state's outcome, an event's flag) is visible.
    return state.load(atomics::acquire) == fired;
  }

  // The source's completion callback (fits join_state's `continuation`).
  static void fire(void* self) noexcept {
    auto* link = static_cast<wait_link*>(self);
    // Read everything we need before the exchange: once `fired` is
    // visible the task may resume and free the link.
    detail::scheduler* const target = link->core;
    const detail::task_id task = link->id;
    // acq_rel: release publishes the source's result to the task's
    // has_fired(); acquire pairs with abandon()'s exchange so reclaim/owner
    // are visible when we find `abandoned`.
    const std::uint32_t previous = link->state.exchange(fired, atomics::acq_rel);
    if (previous == armed) {
      target->schedule(task);  // a stale id (task already gone) is a no-op
    } else if (previous == abandoned) {
      link->reclaim(link->owner);  // the link dies here; do not touch it after
    }
  }

  // The task itself, which saw has_fired(), makes the link armed again
  // for a source that registers it once more (`rearm`). relaxed: fire()
  // is done with the link once `fired` is visible (has_fired()'s acquire),
  // and the source's registration (its mutex) publishes the new state to
  // the next fire().
  void arm_again() noexcept { state.store(armed, atomics::relaxed); }

  // Owner side, when the waiting task is destroyed without resuming. True:
  // the owner may be destroyed now. False: fire() will call reclaim(owner).
  [[nodiscard]] bool abandon(void (*reclaim_fn)(void*) noexcept, void* owner_ptr) noexcept {
    if (disarm != nullptr && disarm(*this)) {
      return true;  // unregistered: no fire() will come
    }
    reclaim = reclaim_fn;
    owner = owner_ptr;
    // acq_rel: release publishes reclaim/owner to fire(); acquire makes
    // fire()'s last reads of the link happen-before our destruction of it.
    return state.exchange(abandoned, atomics::acq_rel) == fired;
  }

  detail::scheduler* core = nullptr;
  detail::task_id id{};
  atomics::atomic<std::uint32_t> state{armed};
  // Set by the source before the link can fire: take the registration back
  // (true), or report that a fire() is coming or done (false).
  bool (*disarm)(wait_link&) noexcept = nullptr;
  // Set by a source whose fire can end the wait before a cancelled task
  // may go (a task_group's next(), woken by one child's end while others
  // still run): called for a cancelled task whose link fired; true if the
  // source registered the link again (arm_again: it fires once more, and
  // `disarm` applies as to any armed link), false if the task may go now.
  bool (*rearm)(wait_link&) noexcept = nullptr;
  void* source = nullptr;
  // Set by a source whose completion can carry something the waiting task
  // must not lose (race: a contender's value, taken from a channel): asked
  // only after the link fired, for a task whose cancel was requested; true
  // makes the task resume with its wait's result and be cancelled at its
  // next suspension (coroutine/coroutine_body.hpp, run_cancelled), as a custom
  // wait's completion_kept does.
  bool (*completion_kept)(const wait_link&) noexcept = nullptr;
  // Written by abandon() only.
  void (*reclaim)(void*) noexcept = nullptr;
  void* owner = nullptr;
};

}  // namespace canopy::detail
