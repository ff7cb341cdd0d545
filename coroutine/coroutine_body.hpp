// coroutine_body — a spawned canopy::task<T> as the executor runs it: the
// task body in its slot (coroutine/spawn.hpp spawns it;
// coroutine/lazy_child.hpp has a joined task's body before its first run).
//
// The body (16 + 24 bytes, inline in the slot) is the root coroutine handle,
// the join state (null when detached) and the task_context its coroutines
// report to. run():
//   1. cancellation requested    -> if it waits for another task's end
//      (an awaited handle, a link that cannot be taken back), cancel that
//      task and stay suspended until it ended (awaited_end_reached); then
//      release the recorded wait (disarm a wait source, abandon a link),
//      destroy the frame, complete "cancelled" (release_frame: the one
//      place a waiting frame ends without resuming, also used by
//      destroy(dropped), which cannot wait);
//   2. the wait not over (armed link not fired yet, awaited join state not
//      ready, wait source not ready) -> a spurious wake: stay suspended;
//   3. otherwise resume `resume_point` and return what the coroutine left in
//      `signal`: suspended (waits for a wake), yielded (the worker queues
//      it), or completed (the root ran to its end, having written its
//      result into the join state, and its frame freed itself; then the
//      join state completes — so a joiner sees the frame's destructors
//      already done).
//      An inline-awaited task that ends hands back to its awaiter through
//      the body (`resume_awaiter`), not by a symmetric transfer.
// destroy(dropped) (shutdown, or a failed spawn) destroys the frame the same
// way as a cancel; a frame whose link may still fire is handed to the link
// (wait_link::abandon) and destroyed by its fire().
#pragma once

#include <coroutine>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "../executor/join_state.hpp"
#include "../executor/scheduler.hpp"
#include "../executor/task_slot.hpp"
#include "../wait/current_task.hpp"
#include "../wait/wait_link.hpp"
#include "fork_region.hpp"
#include "task.hpp"

namespace canopy::detail {

inline void destroy_frame(void* address) noexcept {
  std::coroutine_handle<>::from_address(address).destroy();
}

template <class T>
struct coroutine_body {
  using handle_type = std::coroutine_handle<task_promise<T>>;

  task_context context;
  handle_type root;
  detail::join_state<T>* state;  // null when detached

  [[nodiscard]] bool cancel_requested() const noexcept {
    return state != nullptr && state->cancel_requested();
  }

  // True if the wait the task suspended on is over (or it waits for any wake).
  [[nodiscard]] bool wait_over() const noexcept {
    switch (context.kind) {
      case wait_kind::none:
        [[likely]] return true;
      case wait_kind::link:
        return static_cast<const wait_link*>(context.waiting_on)->has_fired();
      case wait_kind::join:
        return static_cast<const detail::join_state_base*>(context.waiting_on)->ready();
      case wait_kind::custom:
        return context.custom_ops->ready(context.waiting_on);
      case wait_kind::fork_region:
        return static_cast<const fork_region*>(context.waiting_on)->finished();
    }
    return true;
  }

  detail::run_outcome run() {
    // A first run, a yield or a plain wake wait on nothing: test that first.
    if (context.kind != wait_kind::none) [[unlikely]] {
      // A cancel is tested before the wait is cleared, so that cancel_now()
      // still finds the wait recorded and releases it (a timer whose
      // deadline passed is still in the wheel until its expiry runs).
      if (cancel_requested()) {
        return run_cancelled();
      }
      if (!wait_over()) {
        return detail::run_outcome::suspended;  // woken, but not by what it waits for
      }
      context.clear_wait();  // a custom wait is disarmed by its awaiter when it resumes
    } else if (cancel_requested()) {
      return cancel_now();
    }
    resume_body();
    if (context.signal != detail::run_outcome::completed) {
      return context.signal;
    }
    deliver();
    return detail::run_outcome::completed;
  }

  // The root finished: its frame has freed itself (final_suspend) and its
  // result is in the join state, which completes now. (A detached root's
  // exception went to the handler from unhandled_exception.)
  void deliver() noexcept {
    root = {};
    if (state == nullptr) {
      return;
    }
    if (state->failed()) {
      state->complete_with_error(*detail::current_worker()->core);
    } else {
      state->complete(detail::join_state_base::outcome::value);
    }
  }

  // No reset of `signal` first: every resumption's way out writes it. An
  // inline-awaited task that ends names its awaiter (its frame is gone).
  [[gnu::always_inline]] void resume_body() {
    context.started = true;
    context.resume_point.resume();
    while (context.resume_awaiter) {
      context.resume_awaiter = false;
      context.resume_point.resume();
    }
  }

  // A task cancelled while it waited: one whose wait completed for good
  // (completion_kept) resumes and is cancelled at its next suspension, in
  // this run; any other is released and destroyed. Out of run(), as below.
  [[gnu::noinline]] detail::run_outcome run_cancelled() {
    if (!completed_for_good()) {
      return cancel_now();
    }
    context.clear_wait();
    // Its next wait's awaited tasks must be asked to stop in turn (a
    // forwarded cancel went to those of the wait that completed).
    context.cancel_forwarded = false;
    resume_body();
    switch (context.signal) {
      case detail::run_outcome::completed:
        deliver();
        return detail::run_outcome::completed;
      case detail::run_outcome::suspended:
        return cancel_now();
      default:
        return context.signal;  // a yield: the next run finds the cancel
    }
  }

  // Whether the wait of a task being cancelled completed with something it
  // must see: a custom wait source's completion_kept, or a link that fired
  // whose source says so (race with a contender's value: destroying the
  // frame would destroy that value, taken from a channel).
  bool completed_for_good() noexcept {
    if (context.kind == wait_kind::link) {
      const auto& link = *static_cast<const wait_link*>(context.waiting_on);
      return link.completion_kept != nullptr && link.has_fired() && link.completion_kept(link);
    }
    if (context.kind != wait_kind::custom || !context.custom_ops->completion_kept) {
      return false;
    }
    // Disarmed first (such a disarm is idempotent), the source cannot
    // complete any more: ready() then says for good whether it did.
    context.custom_ops->disarm(context.waiting_on);
    return wait_over();
  }

  // awaited_end_reached for a wait_link. Out of line: inline, the calls
  // through the link's hooks grew run(), the path of every task run, by
  // the register that holds the link across them.
  [[gnu::noinline]] bool link_end_reached(wait_link& link) noexcept {
    if (link.has_fired()) {
      if (link.completion_kept != nullptr && link.completion_kept(link)) {
        // Fired since run_cancelled looked, with a completion to keep:
        // stay; fire()'s wake runs the task again, and run_cancelled
        // resumes it.
        return false;
      }
      if (link.rearm == nullptr || !link.rearm(link)) {
        return true;
      }
      // Registered again: the cancel is passed on anew (below).
      context.cancel_forwarded = false;
    }
    if (link.disarm == nullptr) {
      return true;
    }
    if (!std::exchange(context.cancel_forwarded, true) && link.disarm(link)) {
      context.clear_wait();  // unregistered: no fire() will come
      return true;
    }
    return false;
  }

  detail::run_outcome cancel_now() noexcept {
    if (!awaited_end_reached()) {
      return detail::run_outcome::suspended;  // the awaited task's end wakes it
    }
    release_frame();
    state->complete(detail::join_state_base::outcome::cancelled);
    return detail::run_outcome::completed;
  }

  // A cancelled task that waits for another task's end (a handle of this
  // executor; a wait_link that cannot be taken back: await_all, a handle
  // of another executor) asks that task to stop and ends only after it
  // ended, so that a child (a fiber above all, whose stack unwinds when it
  // next runs) never outlives the frame it may borrow from. A wait that
  // can be taken back (an async_event) is, and the task ends now; a link
  // that cannot be and has no way to pass the cancel on (a foreign
  // awaitable) is left to fire later (release_frame). A link that fired
  // may still hold the frame: its source registers it again when the end
  // it reported is not the last one the frame waits for (wait_link::rearm).
  // True once the frame may go.
  bool awaited_end_reached() noexcept {
    if (context.kind == wait_kind::join) {
      auto* const awaited = static_cast<detail::join_state_base*>(context.waiting_on);
      if (awaited->ready()) {
        return true;
      }
      if (!std::exchange(context.cancel_forwarded, true)) {
        awaited->cancel_and_wake();
      }
      return false;
    }
    if (context.kind == wait_kind::link) {
      return link_end_reached(*static_cast<wait_link*>(context.waiting_on));
    }
    if (context.kind == wait_kind::fork_region) {
      // The region's children still running borrow this frame (the join's
      // record and results are in it): stop launching more, and end when
      // the region's end wakes this task.
      auto& region = *static_cast<fork_region*>(context.waiting_on);
      if (region.finished()) {
        return true;
      }
      region.cancel();
      return false;
    }
    return true;
  }

  // Destroy the (suspended or never started) frame, or hand it to the link
  // that may still fire (the frame holds nothing of the join state's).
  // Kept out of run(): inlined, its registers cost every resumption a
  // save and a restore.
  [[gnu::noinline]] void release_frame() noexcept {
    if (!root) {
      return;
    }
    void* const frame = std::exchange(root, {}).address();
    const wait_kind kind = std::exchange(context.kind, wait_kind::none);
    void* const waiting_on = kind != wait_kind::none ? context.waiting_on : nullptr;
    if (kind == wait_kind::join) {
      // Awaiting a join handle of this executor registers only this
      // task's id, never the frame: the frame can go at once. The awaited
      // task is cancelled too (woken, so that it stops now; its handle,
      // in this frame, keeps its state alive until then).
      static_cast<detail::join_state_base*>(waiting_on)->cancel_and_wake();
    } else if (kind == wait_kind::custom) {
      context.custom_ops->disarm(waiting_on);  // the source forgets the frame now
    } else if (kind == wait_kind::link) {
      auto* const link = static_cast<wait_link*>(waiting_on);
      if (!link->has_fired() && !link->abandon(&destroy_frame, frame)) {
        return;  // deferred: the link's fire() destroys the frame
      }
    } else if (kind == wait_kind::fork_region) {
      if (!static_cast<fork_region*>(waiting_on)->finished()) [[unlikely]] {
        fail_region_running();
      }
    }
    destroy_frame(frame);
  }

  // A task is dropped only where no worker runs anything of its executor
  // (shutdown's last step, a spawn that failed), and a region always ends
  // before its workers stop running it (every child runs to its end, and
  // a record is in a deque only while its holder runs a child): a region
  // still running here is a broken invariant, and freeing the frame under
  // its children would corrupt memory.
  [[noreturn]] static void fail_region_running() noexcept {
    std::fputs("canopy: a task was destroyed while its fork-join region still ran\n", stderr);
    std::abort();
  }

  void finish(detail::task_end end) noexcept {
    if (end == detail::task_end::dropped) {
      release_frame();
      if (state != nullptr) {
        state->complete(detail::join_state_base::outcome::cancelled);
      }
    }
    if (state != nullptr) {
      state->release_ref();
    }
  }

  static detail::run_outcome run_entry(void* storage) {
    return static_cast<coroutine_body*>(storage)->run();
  }
  static void destroy_entry(void* storage, detail::task_end end) noexcept {
    auto* body = static_cast<coroutine_body*>(storage);
    body->finish(end);
    body->~coroutine_body();
  }
  static const detail::join_state_base* cancel_state_entry(const void* storage) noexcept {
    return static_cast<const coroutine_body*>(storage)->state;
  }
  static constexpr detail::task_vtable table{&run_entry, &destroy_entry, &cancel_state_entry};
};

static_assert(sizeof(coroutine_body<int>) <= detail::task_slot::storage_size);

// Builds a detached task's body in its slot (spawn_body's constructor
// callback); `frame` is the root's frame.
template <class T>
void construct_detached_body(void* storage, void* frame) {
  using body = coroutine_body<T>;
  const auto root = body::handle_type::from_address(frame);
  auto* made = ::new (storage) body{task_context(root), root, nullptr};
  root.promise().set_context(&made->context);
}

}  // namespace canopy::detail
