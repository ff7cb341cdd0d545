// co_await on an async_event (wait/async_event.hpp) in a coroutine task:
// suspend until the event is set, holding no worker. The fiber form is
// this_fiber::await(event), beside the fibers.
#pragma once

#include <coroutine>

#include "../wait/async_event.hpp"
#include "promise_base.hpp"
#include "task_context.hpp"

namespace canopy {

namespace detail {

struct event_awaiter {
  using canopy_awaiter = void;
  using canopy_region_check_at_suspend = void;
  async_event::wait pending;
  bool await_ready() const noexcept { return pending.ready(); }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    task_context& context = context_to_suspend(self);
    context.suspend_on(self, wait_kind::link, &pending.link());
    if (!pending.arm()) {
      context.clear_wait();
      return false;
    }
    return true;
  }
  void await_resume() const noexcept {}
};

}  // namespace detail

inline detail::event_awaiter operator co_await(async_event& event) noexcept {
  return detail::event_awaiter{async_event::wait(event)};
}

}  // namespace canopy
