// task_handle<T> — another name for join_handle<T> (executor/join_handle.hpp),
// the one handle type of a spawned task of any kind; code written when the
// coroutine and fiber handles had a type of their own keeps compiling. The
// helpers below cancel the children a frame spawned and did not join.
#pragma once

#include <ranges>
#include <tuple>
#include <utility>

#include "../executor/join_handle.hpp"

namespace canopy {

template <class T>
using task_handle = join_handle<T>;

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
