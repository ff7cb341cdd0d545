// task_handle<T> — the join handle of a spawned coroutine task or fiber.
//
// It *is* a canopy::join_handle<T> (public base: get(), wait_for(),
// ready(), cancel(), detach(), co_await and this_fiber::await all work on
// it, and it converts to a plain join_handle<T> by move, with no change of
// behaviour: cancel() wakes the task through either type). It adds the
// task's identity (id(), core()).
//
// Awaiting a child that has not started yet (co_await handle) runs it
// inside the awaiting task: its slot is retired, its id goes stale, and
// inside it current_waker() names the awaiting task
// (coroutine/join_await.hpp). Not for a handle whose id() was asked for.
#pragma once

#include <ranges>
#include <tuple>
#include <utility>

#include "../executor/scheduler.hpp"
#include "../executor/join_handle.hpp"
#include "../executor/task_slot.hpp"

namespace canopy {

template <class T>
class task_handle : public join_handle<T> {
 public:
  task_handle() noexcept = default;
  task_handle(detail::join_state<T>* state, detail::scheduler* core,
              detail::task_id id) noexcept
      : join_handle<T>(state), core_(core), id_(id) {}

  // The task's id, for a waker (canopy::waker(*core(), id())). A handle
  // whose id was asked for keeps its task a task of its own when a
  // coroutine awaits it before it started (otherwise the awaiter may run it
  // inside itself and retire the id: coroutine/join_await.hpp).
  [[nodiscard]] detail::task_id id() const noexcept {
    if (detail::join_state<T>* const state = this->state(); state != nullptr) {
      state->share_identity();
    }
    return id_;
  }
  [[nodiscard]] detail::scheduler* core() const noexcept { return core_; }

 private:
  detail::scheduler* core_ = nullptr;
  detail::task_id id_{};
};

namespace detail {

template <class T>
void cancel_if_unjoined(join_handle<T>& handle) noexcept {
  if (handle.valid()) {  // a joined (awaited) handle is empty
    handle.cancel();
  }
}
template <std::ranges::range Range>
void cancel_if_unjoined(Range& handles) noexcept {
  for (auto& handle : handles) {
    cancel_if_unjoined(handle);
  }
}
template <class... Ts>
void cancel_if_unjoined(std::tuple<Ts...>& handles) noexcept {
  std::apply([](auto&... each) { (cancel_if_unjoined(each), ...); }, handles);
}

// Held by a coroutine frame that spawns children and awaits them
// (with_timeout, when_all): if the frame is destroyed before it joined
// them all (the task was cancelled, or dropped at shutdown, while it
// waited), the children not joined yet are cancelled too, so that none
// outlives the wait it belongs to. (The child being awaited at that moment
// is cancelled by the body's release_frame already.)
template <class Handles>
class cancel_unjoined_on_exit {
 public:
  explicit cancel_unjoined_on_exit(Handles& handles) noexcept : handles_(&handles) {}
  cancel_unjoined_on_exit(const cancel_unjoined_on_exit&) = delete;
  cancel_unjoined_on_exit& operator=(const cancel_unjoined_on_exit&) = delete;
  ~cancel_unjoined_on_exit() { cancel_if_unjoined(*handles_); }

 private:
  Handles* handles_;
};

}  // namespace detail

}  // namespace canopy
