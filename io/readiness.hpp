// readiness — the one "wait until ready, retry on EAGAIN" helper under
// every socket operation of canopy::io (TCP, UDP, Unix-domain sockets,
// signalfd), for coroutine tasks, fibers and callbacks, as tokio's
// Registration::async_io / poll_io. Internal (canopy::io::detail).
//
// An operation is (a registration, a direction, an attempt): the attempt is
// one non-blocking try, a callable `ssize_t() noexcept` shaped like a
// syscall — a count >= 0 when it finished, or -1 with errno set. EINTR is
// retried at once; EAGAIN (EWOULDBLOCK) clears the direction's readiness
// with the tick read before the attempt (an edge that arrived since keeps
// it ready, io/reactor.hpp) and waits for the next edge; any other errno
// ends the operation with that error.
//
//   auto op = readiness_op(reg, direction::read, [&]() noexcept { return ::recv(...); });
//   io_result r = co_await canopy::wait_on(op);     // a task
//   io_result r = canopy::this_fiber::wait_on(op);  // a fiber
//   io_result r = try_io(reg, direction::read, attempt);  // a callback: never waits
//   auto timed = co_await canopy::with_timeout(5s, op);   // any wait-source adapter
//
// readiness_op is a wait source (wait/wait_source.hpp) whose ready()
// runs the attempt: a ready direction costs no suspension and no frame, and
// a wake that finds EAGAIN (a spurious edge) re-arms with the same waker
// instead of resuming the task. This is the single place that knows the
// readiness protocol, so a completion backend (io_uring) can later replace
// it behind the same socket types.
//
// Result: io_result{count, error}; errc::operation_canceled when the
// registration was removed (the socket closed) during the wait,
// errc::bad_file_descriptor when it was never open.
//
// A read consumes in ready() or arm(), so whoever calls them takes
// result() once either said the operation ended: a task's resumption
// (coroutine/coroutine_body.hpp tests the cancel before it asks ready(), and resumes
// the task after a true), a fiber's loop (this_fiber::wait_on), and
// with_timeout's timed_source::result(). A disarm never consumes, so a read
// cancelled or timed out while it waits leaves the bytes in the socket.
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <system_error>
#include <utility>

#include "../wait/waker.hpp"
#include "reactor.hpp"
#include "registration.hpp"

namespace canopy::io::detail {

struct io_result {
  std::size_t count = 0;
  std::error_code error;
};

inline bool is_would_block(int error) noexcept { return error == EAGAIN || error == EWOULDBLOCK; }

// One attempt, EINTR retried: true when the operation finished (`out` set),
// false on EAGAIN.
template <class Attempt>
bool attempt_once(Attempt& attempt, io_result& out) noexcept {
  for (;;) {
    const ssize_t count = attempt();
    if (count >= 0) {
      out.count = static_cast<std::size_t>(count);
      return true;
    }
    const int failure = errno;
    if (failure == EINTR) {
      continue;
    }
    if (is_would_block(failure)) {
      return false;
    }
    out.error = std::error_code(failure, std::system_category());
    return true;
  }
}

template <class Attempt>
class readiness_op {
 public:
  // `short_read_below`: for stream reads, the buffer size; a read of fewer
  // (and more than 0) bytes emptied the receive queue, so read readiness is
  // cleared without spending a syscall on EAGAIN (as tokio does). 0: never.
  readiness_op(const registration& reg, direction which, Attempt attempt,
               std::size_t short_read_below = 0) noexcept
      : owner_(reg.owner()),
        id_(reg.id()),
        which_(which),
        short_read_below_(short_read_below),
        attempt_(std::move(attempt)) {}

  bool ready() noexcept { return done_ || step(); }
  bool arm(const waker& waiter) noexcept {
    waiter_ = waiter;
    armed_ = true;
    if (step()) {
      armed_ = false;
      return false;
    }
    return true;
  }
  void disarm() noexcept {
    if (armed_) {
      armed_ = false;
      owner_->disarm(id_, which_);
    }
  }
  io_result result() noexcept { return result_; }

 private:
  // Attempt while the direction is ready; true when the operation ended.
  // Not ready: false, with the waker stored when armed (a spurious wake
  // re-arms here rather than resuming the task).
  bool step() noexcept {
    if (owner_ == nullptr) {
      return finish(std::make_error_code(std::errc::bad_file_descriptor));
    }
    for (;;) {
      std::uint64_t tick = 0;
      const wait_status status = armed_ ? owner_->ready_or_arm(id_, which_, waiter_, tick)
                                        : owner_->peek(id_, which_, tick);
      if (status == wait_status::closed) {
        return finish(std::make_error_code(std::errc::operation_canceled));
      }
      if (status == wait_status::busy) {
        armed_ = false;  // nothing of ours is stored: disarm must not clear the other's
        return finish(std::make_error_code(std::errc::connection_already_in_progress));
      }
      if (status == wait_status::armed) {
        return false;
      }
      if (attempt_once(attempt_, result_)) {
        if (which_ == direction::read && result_.count > 0 && result_.count < short_read_below_) {
          owner_->clear_after_short_read(id_, tick);
        }
        done_ = true;
        return true;
      }
      owner_->clear_ready(id_, which_, tick);
    }
  }
  bool finish(std::error_code error) noexcept {
    result_.error = error;
    done_ = true;
    return true;
  }

  reactor* owner_;
  reactor::registration_id id_;
  direction which_;
  bool done_ = false;
  bool armed_ = false;
  std::size_t short_read_below_;
  waker waiter_;
  io_result result_;
  Attempt attempt_;
};

// A stream read into an empty buffer: 0 at once, never a wait. A receive of
// nothing would wait for bytes it cannot take (for ever on an idle
// connection) and then end with 0, as if at EOF; asio and tokio also end
// such a read at once. errc::bad_file_descriptor on a stream not open, as
// any read there.
inline std::size_t empty_read(const registration& reg, std::error_code& error) noexcept {
  error = reg.valid() ? std::error_code() : std::make_error_code(std::errc::bad_file_descriptor);
  return 0;
}

// A stream write of nothing (an empty buffer, a gathered write of none or
// only empty ones, the bounded form alike): ends at once, never a wait. A
// send of nothing would wait for room it does not need (for ever on a
// connection whose peer stopped reading). errc::bad_file_descriptor on a
// stream not open, as any write there, so that the forms agree.
inline void empty_write(const registration& reg, std::error_code& error) noexcept {
  error = reg.valid() ? std::error_code() : std::make_error_code(std::errc::bad_file_descriptor);
}

// The callback form: one attempt, never waits. EAGAIN clears readiness and
// comes back as errc::resource_unavailable_try_again; wait for the next
// edge (callback_registration) and call again.
template <class Attempt>
io_result try_io(const registration& reg, direction which, Attempt attempt,
                 std::size_t short_read_below = 0) noexcept {
  io_result out;
  if (!reg.valid()) {
    out.error = std::make_error_code(std::errc::bad_file_descriptor);
    return out;
  }
  const std::uint64_t tick = reg.tick(which);
  if (!attempt_once(attempt, out)) {
    reg.clear_ready(which, tick);
    out.error = std::make_error_code(std::errc::resource_unavailable_try_again);
  } else if (which == direction::read && out.count > 0 && out.count < short_read_below) {
    reg.clear_after_short_read(tick);
  }
  return out;
}

}  // namespace canopy::io::detail
