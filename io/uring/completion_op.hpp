// completion_op — one socket operation as an io_uring completion request,
// the io_uring backend's counterpart of readiness_op (io/readiness.hpp),
// and like it a wait source (wait/wait_source.hpp): the same task, fiber
// and with_timeout forms work on it. Internal (canopy::io::detail).
//
// The kernel reads from or writes into the caller's memory (the buffer,
// the peer address) after the request was submitted, at a time of its own.
// The rule that keeps that safe: a request that has not completed when its
// wait ends — a timeout, a cancelled or destroyed task, a closed socket —
// is cancelled synchronously, and disarm() (or remove()) returns only once
// its completion has been reaped (uring_backend::abandon). So when a
// wait is over, the kernel no longer touches what the request pointed at,
// and the memory may go. docs/io.md, "The io_uring backend". A receive that
// completed with bytes all the same has them copied into its registration
// there, and the registration's next receive returns them without a
// request (uring_backend::start answers `completed`).
//
// A send goes straight to the socket (one non-blocking send, as the
// readiness path does) when no other request waits in the submission
// queue: a socket with room takes the bytes without a suspension, and only
// what it does not take becomes a request. When requests are queued (a
// busy worker's batch is forming), the send becomes a request too and goes
// to the kernel in the same io_uring_enter as the others.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <system_error>

#include "../../wait/waker.hpp"
#include "../gather.hpp"
#include "../reactor.hpp"
#include "../readiness.hpp"
#include "../registration.hpp"
#include "completion_request.hpp"
#include "uring_backend.hpp"

namespace canopy::io::detail {

class completion_op {
 public:
  // Only for a registration whose reactor runs io_uring
  // (registration::completions()), or an empty one: the calls go to the
  // reactor's uring_backend directly.
  completion_op(const registration& reg, direction which, completion_request request) noexcept
      : owner_(reg.owner()), id_(reg.id()), which_(which), request_(request) {}

  bool ready() noexcept {
    if (done_) {
      return true;
    }
    if (owner_ == nullptr) {
      return finish(std::make_error_code(std::errc::bad_file_descriptor));
    }
    if (!in_flight_) {
      return try_send_directly();
    }
    return poll(nullptr);
  }

  bool arm(const waker& waiter) noexcept {
    waiter_ = waiter;
    if (done_) {
      return false;
    }
    if (!in_flight_) {
      return start();
    }
    return !poll(&waiter_);
  }

  // A send that went out, whole or in part, before its abandoned request
  // ended is progress: the bytes are on the wire, so they are counted
  // (a send_some ends with them) rather than sent again by whatever the
  // caller does next (with_timeout's result() asks ready(), which sends
  // the rest directly; the streams' bounded write goes on after them).
  void disarm() noexcept {
    if (in_flight_) {
      in_flight_ = false;
      const std::size_t sent = owner_->uring()->abandon(id_, which_, sequence_);
      if (sent > 0) {
        count_abandoned_send(sent);
      }
    }
  }

  io_result result() noexcept { return result_; }

 private:
  // Sends: one direct attempt before any request (readiness's fast path),
  // unless a batch is forming: then the send joins the requests already
  // queued, and one io_uring_enter carries them all.
  bool try_send_directly() noexcept {
    if (request_.kind != completion_kind::send_all && request_.kind != completion_kind::send_some &&
        request_.kind != completion_kind::send_gathered) {
      return false;
    }
    if (request_.kind == completion_kind::send_gathered && cursor().done()) {
      return finish_count(0);  // no bytes at all
    }
    if (owner_->uring()->has_queued_requests()) {
      return false;
    }
    if (request_.kind == completion_kind::send_gathered) {
      return try_send_gathered();
    }
    for (;;) {
      const std::size_t left = request_.size - progress_;
      const ssize_t count =
          ::send(request_.fd, static_cast<const std::byte*>(request_.data) + progress_, left,
                 MSG_NOSIGNAL | MSG_DONTWAIT);
      if (count < 0) {
        if (errno == EINTR) {
          continue;
        }
        if (is_would_block(errno)) {
          if (progress_ > 0 && request_.kind == completion_kind::send_some) {
            return finish_count(progress_);
          }
          return false;
        }
        return finish(std::error_code(errno, std::system_category()));
      }
      progress_ += static_cast<std::size_t>(count);
      if (progress_ == request_.size || request_.kind == completion_kind::send_some) {
        return finish_count(progress_);
      }
    }
  }

  bool try_send_gathered() noexcept {
    for (;;) {
      if (cursor().send_all(request_.fd, MSG_DONTWAIT) == 0) {
        return finish_count(0);
      }
      if (is_would_block(errno)) {
        return false;
      }
      if (errno != EINTR) {
        return finish(std::error_code(errno, std::system_category()));
      }
    }
  }

  // Submit the request (what is left of it, for sends). True while in flight.
  bool start() noexcept {
    completion_request rest = request_;
    rest.data = static_cast<std::byte*>(request_.data) + progress_;
    rest.size = request_.size - progress_;
    if (request_.kind == completion_kind::accept || request_.kind == completion_kind::connect) {
      rest.data = request_.data;
      rest.size = request_.size;
    } else if (request_.kind == completion_kind::send_gathered) {
      rest.data = cursor().message();  // stays put until this request completes
      rest.size = 0;
    }
    std::error_code error;
    std::int32_t kept = 0;
    switch (owner_->uring()->start(id_, which_, waiter_, rest, sequence_, kept, error)) {
      case completion_status::in_flight:
        in_flight_ = true;
        return true;
      case completion_status::completed:
        finish_count(static_cast<std::size_t>(kept));  // bytes a receive that lost a race kept
        return false;
      case completion_status::failed:
        finish(error);
        return false;
      case completion_status::busy:
        finish(std::make_error_code(std::errc::connection_already_in_progress));
        return false;
      case completion_status::closed:
        break;
    }
    finish(std::make_error_code(std::errc::operation_canceled));
    return false;
  }

  // The request in flight: has it completed? True when the operation ended.
  bool poll(const waker* waiter) noexcept {
    std::int32_t answer = 0;
    switch (owner_->uring()->poll(id_, which_, sequence_, waiter, answer)) {
      case completion_status::in_flight:
        return false;
      case completion_status::completed:
        in_flight_ = false;
        return absorb(answer);
      case completion_status::closed:
      case completion_status::failed:
      case completion_status::busy:
        break;
    }
    in_flight_ = false;
    return finish(std::make_error_code(std::errc::operation_canceled));
  }

  // A completion's res: the operation ends, or (a partial send_all, an
  // accept whose connection died in the queue) the rest is submitted.
  bool absorb(std::int32_t answer) noexcept {
    if (answer < 0) {
      const int failure = -answer;
      if (failure == EINTR || is_would_block(failure) ||
          (request_.kind == completion_kind::accept &&
           (failure == ECONNABORTED || failure == EPROTO))) {
        return !start() && done_;
      }
      if (failure == ECANCELED) {
        return finish(std::make_error_code(std::errc::operation_canceled));
      }
      return finish(std::error_code(failure, std::system_category()));
    }
    const auto count = static_cast<std::size_t>(answer);
    if (request_.kind == completion_kind::send_gathered) {
      cursor().advance(count);
      if (!cursor().done()) {
        return !start() && done_;
      }
      return finish_count(0);
    }
    if (request_.kind == completion_kind::send_all) {
      progress_ += count;
      if (progress_ < request_.size) {
        return !start() && done_;
      }
      return finish_count(progress_);
    }
    return finish_count(count);
  }

  void count_abandoned_send(std::size_t count) noexcept {
    if (request_.kind == completion_kind::send_gathered) {
      cursor().advance(count);
      if (cursor().done()) {
        finish_count(0);
      }
      return;
    }
    progress_ += count;
    if (progress_ == request_.size || request_.kind == completion_kind::send_some) {
      finish_count(progress_);
    }
  }

  gather_cursor& cursor() noexcept { return *static_cast<gather_cursor*>(request_.data); }

  bool finish_count(std::size_t count) noexcept {
    result_.count = count;
    done_ = true;
    return true;
  }
  bool finish(std::error_code error) noexcept {
    result_.error = error;
    done_ = true;
    return true;
  }

  reactor* owner_;
  reactor::registration_id id_;
  direction which_;
  completion_request request_;
  std::size_t progress_ = 0;  // bytes sent so far (sends)
  std::uint16_t sequence_ = 0;
  bool in_flight_ = false;
  bool done_ = false;
  waker waiter_;
  io_result result_;
};

}  // namespace canopy::io::detail
