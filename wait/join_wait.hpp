// join_wait — the wait on one join state that a fiber (this_fiber::await)
// and a coroutine awaiting another executor's handle (coroutine/join_await.hpp)
// both use: a wait_link registered as the join state's continuation; and
// take_and_detach, the end of every await of a handle.
#pragma once

#include <utility>

#include "../executor/join_handle.hpp"
#include "../executor/join_state.hpp"
#include "wait_link.hpp"

namespace canopy::detail {

// The wait on one join state, shared by coroutines and fibers.
template <class T>
struct join_wait {
  detail::join_state<T>* state;
  wait_link link_;

  explicit join_wait(detail::join_state<T>* awaited) noexcept : state(awaited) {
    link_.disarm = &disarm;
    link_.source = awaited;
  }

  [[nodiscard]] bool ready() const noexcept { return state->ready(); }
  [[nodiscard]] wait_link& link() noexcept { return link_; }

  // Register the running task; false if the child completed first (then
  // nothing is registered and the caller must not suspend).
  [[nodiscard]] bool arm() noexcept {
    link_.arm_for_current_task();
    return state->set_continuation(detail::continuation{&wait_link::fire, &link_});
  }

  // A registered continuation cannot be taken back; cancel the child
  // instead, as a coroutine's cancel does with the child it awaits, and
  // let fire() come. A child of the awaiter's executor is woken, so that a
  // suspended child is destroyed now and its end fires the link (the
  // caller destroys the awaiting task, so it holds the handle whose fields
  // cancel_and_wake reads); another executor's child is only asked, as
  // await_all does: nothing here may reach into that executor.
  static bool disarm(wait_link& link) noexcept {
    auto* const state = static_cast<detail::join_state<T>*>(link.source);
    if (state->has_task_on(link.core)) {
      state->cancel_and_wake();
    } else {
      state->request_cancel();
    }
    return false;
  }
};

// Inline in every awaiter (a coroutine's join, this_fiber::await): out of
// line, GCC keeps it a call of its own on every join.
template <class T>
[[gnu::always_inline]] inline T take_and_detach(join_handle<T>& handle) {
  detail::join_state<T>* state = handle.state();
  struct detach_on_exit {
    join_handle<T>& handle;
    ~detach_on_exit() { handle.detach(); }
  } guard{handle};
  return state->take();
}

}  // namespace canopy::detail
