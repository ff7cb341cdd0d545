// co_await canopy::stopped(token): wait until a std::stop_token's stop is
// requested. The contract is at the top of <canopy/race.hpp>.
//
// A wait source (wait/wait_source.hpp): arm() registers a std::stop_callback
// that wakes the task, disarm() destroys it. The callback runs on the thread
// that calls request_stop() (or inside arm() if the stop came first), so
// all it does is wake the task through its waker, which is thread-safe.
// ~std::stop_callback waits for a callback running on another thread to
// return, so after disarm() nothing touches the frame any more.
#pragma once

#include <optional>
#include <stop_token>
#include <utility>

#include "../wait/waker.hpp"
#include "custom_wait.hpp"
#include "task.hpp"

namespace canopy {

namespace detail {

class stop_wait {
 public:
  explicit stop_wait(std::stop_token token) noexcept : token_(std::move(token)) {}
  // Moving is for handing an unarmed wait to wait_on.
  stop_wait(stop_wait&& other) noexcept : token_(std::move(other.token_)) {}
  stop_wait& operator=(stop_wait&&) = delete;

  // std::stop_token::stop_requested() returning true synchronizes with the
  // request_stop() that made it so ([thread.stoptoken.intro]): what the
  // requester wrote before is visible to the task that goes on.
  [[nodiscard]] bool ready() const noexcept { return token_.stop_requested(); }

  [[nodiscard]] bool arm(const waker& target) {
    callback_.emplace(token_, wake_task{target});
    if (token_.stop_requested()) {
      callback_.reset();  // ran already, or will find a stale waker: harmless
      return false;
    }
    return true;
  }
  void disarm() noexcept { callback_.reset(); }
  void result() const noexcept {}

 private:
  struct wake_task {
    waker target;
    void operator()() const noexcept { static_cast<void>(target.wake()); }
  };

  std::stop_token token_;
  std::optional<std::stop_callback<wake_task>> callback_;
};

}  // namespace detail

// See <canopy/race.hpp>.
[[nodiscard]] inline task<void> stopped(std::stop_token token) {
  co_await wait_on(detail::stop_wait(std::move(token)));
}

}  // namespace canopy
