// stream_receive — what tcp_stream::read_some_until and
// unix_stream::read_some_until return: the stream's own receive raced
// against a deadline, as one wait source awaited in the calling task (no
// child task, no coroutine frame of its own). The contract is in io/tcp.hpp.
// Internal (canopy::io::detail), installed because the public headers
// name it: the receive's operation differs between a build with io_uring
// and one without, so it is built in the library, in storage kept here,
// and this header holds nothing that depends on the build.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <system_error>

#include "../coroutine/custom_wait.hpp"
#include "../wait/waker.hpp"
#include "registration.hpp"
#include "timer/timer_wait.hpp"

namespace canopy::io::detail {

// One receive of a stream socket (at least one byte, 0 at EOF) as a wait
// source. Its operation is made at the first ready() or arm(), in place:
// until then the object is its parameters, so moving it (wait_on moves
// its source in) moves those. Cancel-safe as read_some: a disarm never
// consumes.
//
// A TCP receive is a completion request where the reactor runs io_uring;
// `tcp_on_readiness` (made by on_readiness(), on io_uring only) waits for
// readiness instead, as on epoll. A request that is given up costs a
// synchronous cancel and a wait for its completion, which the kernel posts
// as task work on the worker that submitted it (at that worker's next
// kernel entry), while giving up a readiness wait costs nothing; so a
// receive that will likely be given up (its deadline is near) waits on
// readiness.
class stream_receive {
 public:
  enum class kind : unsigned char { tcp, unix_domain, tcp_on_readiness };

  // A receive into a buffer that is not empty (else: unusual()).
  stream_receive(const registration& reg, int fd, std::span<std::byte> buffer, kind which) noexcept
      : reg_(&reg), fd_(fd), buffer_(buffer), kind_(which) {}
  stream_receive(stream_receive&& other) noexcept
      : reg_(other.reg_),
        fd_(other.fd_),
        buffer_(other.buffer_),
        kind_(other.kind_),
        direct_(other.direct_),
        direct_count_(other.direct_count_),
        direct_error_(other.direct_error_) {}
  // The receives the constructor does not make, out of the common path:
  // into an empty buffer (ended when made: 0 at once, bad_file_descriptor
  // on a stream that is not open, as empty_read()), or, `on_readiness`, a
  // TCP receive on readiness, which takes first the bytes an earlier
  // receive request took after its waiter left (the request's start does
  // the same), and then has ended already, with those.
  static stream_receive unusual(const registration& reg, int fd, std::span<std::byte> buffer,
                                kind which, bool on_readiness) noexcept;
  stream_receive& operator=(stream_receive&&) = delete;
  stream_receive(const stream_receive&) = delete;
  stream_receive& operator=(const stream_receive&) = delete;
  ~stream_receive() {
    if (built_) {
      destroy();
    }
  }

  bool ready() noexcept;
  bool arm(const waker& waiter) noexcept;
  void disarm() noexcept;
  // The count (0: EOF) and the error, once ready(), arm() or try_now()
  // said it ended.
  std::size_t result(std::error_code& error) noexcept;
  // A receive that never waits, for a read whose deadline passed before it
  // ended, after the disarm (no request of it in flight): true when it
  // ended (the bytes a lost race kept first, as every receive takes them),
  // false when the socket had nothing. It asks the socket itself, whatever
  // the reactor knows: an io_uring receive's ready() never asks it (a
  // request waits for the bytes), and on epoll bytes may be there before
  // the poller has seen their edge.
  bool try_now() noexcept;

  // Room for the library's operation (checked there).
  static constexpr std::size_t storage_size = 256;

 private:
  void build() noexcept;
  void destroy() noexcept;

  const registration* reg_;
  int fd_;
  std::span<std::byte> buffer_;
  kind kind_;
  bool built_ = false;
  bool direct_ = false;  // try_now() ended it: direct_count_, direct_error_
  std::size_t direct_count_ = 0;
  std::error_code direct_error_;
  alignas(std::max_align_t) std::byte storage_[storage_size];
};

// The receive until `deadline` (time_point::max(): no limit, no timer):
// the read's count, or 0 with errc::timed_out in `*error` once the
// deadline passed with nothing received. A receive that ended wins over a
// deadline that passed meanwhile, so no byte it took is dropped.
class bounded_receive {
 public:
  using clock = std::chrono::steady_clock;

  bounded_receive(stream_receive receive, clock::time_point deadline, std::error_code& error)
      : receive_(std::move(receive)), deadline_(deadline), error_(&error) {}
  // Before the first ready() (wait_on moves its source in): the timer is
  // made at arm(), in its final place.
  bounded_receive(bounded_receive&& other) noexcept
      : receive_(std::move(other.receive_)), deadline_(other.deadline_), error_(other.error_) {}
  bounded_receive& operator=(bounded_receive&&) = delete;

  bool ready() noexcept { return receive_.ready() || deadline_passed(); }
  bool arm(const waker& waiter) {
    receive_armed_ = receive_.arm(waiter);
    if (!receive_armed_ || deadline_ == clock::time_point::max()) {
      return receive_armed_;
    }
    if (!timer_) {
      timer_.emplace(deadline_);
    }
    timer_armed_ = timer_->arm(waiter);
    if (!timer_armed_) {
      receive_.disarm();  // the deadline passed: ready() is true
      receive_armed_ = false;
      return false;
    }
    return true;
  }
  void disarm() noexcept {
    if (receive_armed_) {
      receive_.disarm();
      receive_armed_ = false;
    }
    if (timer_armed_) {
      timer_->disarm();
      timer_armed_ = false;
    }
  }
  // Reached with the receive not ended only once the deadline passed, and
  // after the disarm: then bytes the socket already holds still win (a
  // ready socket is not a timeout, on io_uring as on epoll).
  std::size_t result() noexcept {
    if (receive_.ready() || receive_.try_now()) {
      return receive_.result(*error_);
    }
    *error_ = std::make_error_code(std::errc::timed_out);
    return 0;
  }

 private:
  [[nodiscard]] bool deadline_passed() const noexcept {
    if (timer_) {
      return timer_->ready();
    }
    return deadline_ != clock::time_point::max() && clock::now() >= deadline_;
  }

  stream_receive receive_;
  clock::time_point deadline_;
  std::error_code* error_;
  std::optional<timer_wait> timer_;
  bool receive_armed_ = false;
  bool timer_armed_ = false;
};

using bounded_read = canopy::detail::wait_on_awaiter<bounded_receive>;

}  // namespace canopy::io::detail
