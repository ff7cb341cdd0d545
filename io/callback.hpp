// callback_registration — I/O readiness callbacks for code that is not
// coroutine-based.
//
//   canopy::io::callback_registration watch(pool, fd, canopy::io::interest::readable,
//       [](std::uint32_t events) { /* drain fd until EAGAIN */ });
//   ...
//   watch.close();   // after it returns, the callback never runs again
//
// A persistent registration: on each readiness edge of `fd` the callback
// runs as a task on `pool` with the EPOLL* bits accumulated since its last
// run (EPOLLIN, EPOLLOUT, EPOLLRDHUP, EPOLLERR, EPOLLHUP). It never runs
// twice at once for one registration: edges that arrive while it runs are
// coalesced into one more run. Edge-triggered: the callback must consume
// until EAGAIN, or it gets no further edge for data already there.
//
// close() (and the destructor) removes the registration and waits until a
// callback running on another thread has returned; called from inside the
// callback itself it does not wait. After it returns the callback is not
// called again. The descriptor is not closed: the caller owns it and may
// close it once close() returned. At executor shutdown the registration's
// task is destroyed without running the callback again; close() after that
// is still safe. The callback must not throw (an exception goes to the
// executor's detached-exception handler and the registration stops).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <system_error>

#include "../executor/executor.hpp"
#include "reactor.hpp"

namespace canopy::io {

class callback_registration {
 public:
  using callback = std::function<void(std::uint32_t events)>;

  callback_registration() noexcept = default;
  // Errors: those of reactor::add (invalid fd, already registered, ...),
  // errc::operation_canceled if the executor is shutting down, and
  // errc::invalid_argument for an empty callback.
  callback_registration(executor& pool, int fd, interest what, callback on_ready,
                        std::error_code& error);
  // Throwing form: std::system_error naming the descriptor;
  // std::invalid_argument for an empty callback.
  callback_registration(executor& pool, int fd, interest what, callback on_ready);
  callback_registration(callback_registration&&) noexcept = default;
  callback_registration& operator=(callback_registration&& other) noexcept;
  callback_registration(const callback_registration&) = delete;
  callback_registration& operator=(const callback_registration&) = delete;
  ~callback_registration() { close(); }

  void close() noexcept;
  [[nodiscard]] bool is_open() const noexcept { return state_ != nullptr; }

  struct state;  // shared with the registration's task

 private:
  std::shared_ptr<state> state_;
};

}  // namespace canopy::io
