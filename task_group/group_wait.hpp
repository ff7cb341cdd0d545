// The waits on a task_group (task_group.hpp): group_link_wait, what the
// owner suspends on in next(), wait_all() and close(); group_wait, the wait
// source all_ended() returns (include/canopy/task_group.hpp has the user's
// contract).
//
// group_link_wait suspends the owner on a wait_link (wait/wait_link.hpp)
// that the child_end making the wait over fires (group_state.hpp). Its
// `disarm` is what makes a cancelled owner safe for children that borrow
// its frame: a cancelled (or, at shutdown, destroyed) owner does not go at
// once, as it would from a wait source it can simply disarm; it cancels the
// children and stays until the last one ended (destructors run, fiber
// stacks unwound), and the link's firing then lets its frame go
// (coroutine/coroutine_body.hpp, awaited_end_reached and release_frame), as a
// cancelled task awaiting await_all's children does. A cancel that lands
// after one child's end made next() over (the link fired) but before the
// owner resumed finds the link fired: its `rearm` (wait_again) registers
// it again for the last child's end, so the owner still waits for the
// others.
#pragma once

#include <coroutine>
#include <mutex>
#include <utility>
#include <vector>

#include "../coroutine/coroutine.hpp"
#include "../wait/wait_link.hpp"
#include "../wait/waker.hpp"
#include "group_state.hpp"

namespace canopy::detail {

template <class T>
class group_link_wait {
 public:
  using canopy_awaiter = void;

  // any_finished: next() (a kept outcome, or no child running); else
  // wait_all() and close() (no child running).
  group_link_wait(group_state<T>& state, bool any_finished) noexcept
      : state_(&state), any_finished_(any_finished) {}
  // g++ may move an awaiter before it suspends; nothing in it is live yet.
  group_link_wait(group_link_wait&& other) noexcept
      : group_link_wait(*other.state_, other.any_finished_) {}
  group_link_wait& operator=(group_link_wait&&) = delete;
  ~group_link_wait() = default;

  [[nodiscard]] bool await_ready() const noexcept {
    const std::lock_guard lock(state_->mutex);
    return over_locked();
  }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    task_context& context = context_to_suspend(self);
    link_.arm_for_current_task();
    link_.disarm = &cancel_children;
    link_.rearm = &wait_again;
    link_.source = this;
    context.suspend_on(self, wait_kind::link, &link_);
    // The mutex publishes the armed link to the child_end that fires it.
    const std::lock_guard lock(state_->mutex);
    if (over_locked()) {
      context.clear_wait();
      return false;
    }
    state_->link = &link_;
    state_->link_any_finished = any_finished_;
    return true;
  }

  void await_resume() const noexcept {}

 private:
  [[nodiscard]] bool over_locked() const noexcept {
    return state_->running == 0 || (any_finished_ && !state_->finished.empty());
  }

  // The owner is cancelled or destroyed while it waits: cancel every child
  // and wait for the last one's end (false: the link will fire). True only
  // when nothing runs any more and the link was taken back, so no fire()
  // comes. A child_end that already took the link fires it: that wait was
  // over first; the owner it wakes, still cancelled, finds the link fired
  // and registers it again while children run (wait_again).
  static bool cancel_children(wait_link& link) noexcept {
    auto* const self = static_cast<group_link_wait*>(link.source);
    group_state<T>& state = *self->state_;
    std::vector<join_state_base*> cancelling;
    {
      const std::lock_guard lock(state.mutex);
      if (state.link != &link) {
        return false;  // taken by a child_end: its fire() is coming
      }
      if (state.running == 0) {
        state.link = nullptr;
        return true;
      }
      state.link_any_finished = false;  // only the last child's end fires it now
      cancelling = state.stop_locked();
    }
    // Outside the mutex: at shutdown a cancel destroys the child at once,
    // and its child_end takes the mutex (and may fire the link).
    group_state<T>::cancel_taken(cancelling);
    return false;
  }

  // The owner is cancelled after a child_end took the link and fired it:
  // next() was over (an outcome is kept) while other children may still
  // run. Their end, not that one, lets the owner go: register the link
  // again, fired by the last child's end only, and let the cancel path
  // disarm it (cancel_children). False when no child runs: the owner may
  // go now.
  static bool wait_again(wait_link& link) noexcept {
    auto* const self = static_cast<group_link_wait*>(link.source);
    group_state<T>& state = *self->state_;
    const std::lock_guard lock(state.mutex);
    if (state.running == 0) {
      return false;
    }
    link.arm_again();
    state.link = &link;
    state.link_any_finished = false;
    return true;
  }

  group_state<T>* state_;
  bool any_finished_;
  wait_link link_;
};

// What all_ended() returns: a wait source, ready once no child runs.
template <class T>
class group_wait {
 public:
  explicit group_wait(group_state<T>& state) noexcept : state_(&state) {}

  bool ready() const noexcept {
    const std::lock_guard lock(state_->mutex);
    return state_->running == 0;
  }
  bool arm(const waker& wake) {
    const std::lock_guard lock(state_->mutex);
    if (state_->running == 0) {
      return false;
    }
    state_->waiter = wake;
    return true;
  }
  void disarm() noexcept {
    const std::lock_guard lock(state_->mutex);
    state_->waiter = waker();
  }
  void result() const noexcept {}

 private:
  group_state<T>* state_;
};

}  // namespace canopy::detail
