// stream_op — one stream-socket operation (TCP: receive, send, accept,
// connect) on whichever backend its reactor runs: readiness_op (epoll,
// io/readiness.hpp) or completion_op (io_uring, io/uring/completion_op.hpp).
// Which of the two is fixed per registration (registration::completions()).
// Both are wait sources with the same result, so the task, fiber and
// with_timeout forms of every TCP operation, and the HTTP server, are
// written once; protocol_ops (below) lets the stream template
// (io/basic_stream.hpp) write them once for Unix-domain streams too.
// Internal (canopy::io::detail), and not installed: it differs between a
// build with the io_uring backend and one without (CANOPY_IO_URING, set by
// io/meson.build for every user of canopy_io).
#pragma once

#include <cstddef>
#include <span>

#include "endpoint.hpp"
#include "gather.hpp"
#include "readiness.hpp"
#include "socket_ops.hpp"
#include "uring/completion_op.hpp"

#ifndef CANOPY_IO_URING
#error "CANOPY_IO_URING is not defined (it comes with the canopy_io dependency)"
#endif

namespace canopy::io::detail {

#if CANOPY_IO_URING
template <class Attempt>
class stream_op {
 public:
  stream_op(const registration& reg, direction which, Attempt attempt,
            const completion_request& request, std::size_t short_read_below = 0) noexcept
      : completion_(reg.completions()),
        readiness_(reg, which, std::move(attempt), short_read_below),
        uring_(reg, which, request) {}

  bool ready() noexcept { return completion_ ? uring_.ready() : readiness_.ready(); }
  bool arm(const waker& waiter) noexcept {
    return completion_ ? uring_.arm(waiter) : readiness_.arm(waiter);
  }
  void disarm() noexcept {
    if (completion_) {
      uring_.disarm();
    } else {
      readiness_.disarm();
    }
  }
  io_result result() noexcept { return completion_ ? uring_.result() : readiness_.result(); }

 private:
  bool completion_;
  readiness_op<Attempt> readiness_;
  completion_op uring_;
};
#else
// Built without io_uring: every reactor runs epoll, so the operation is
// its readiness form alone (the request is not used).
template <class Attempt>
class stream_op {
 public:
  stream_op(const registration& reg, direction which, Attempt attempt,
            const completion_request& /*request*/, std::size_t short_read_below = 0) noexcept
      : readiness_(reg, which, std::move(attempt), short_read_below) {}

  bool ready() noexcept { return readiness_.ready(); }
  bool arm(const waker& waiter) noexcept { return readiness_.arm(waiter); }
  void disarm() noexcept { readiness_.disarm(); }
  io_result result() noexcept { return readiness_.result(); }

 private:
  readiness_op<Attempt> readiness_;
};
#endif

// Receive at least one byte into `buffer` (0: EOF).
inline auto receive_op(const registration& reg, int fd, std::span<std::byte> buffer) noexcept {
  return stream_op(reg, direction::read, recv_attempt(fd, buffer),
                   {completion_kind::receive, fd, buffer.data(), buffer.size()}, buffer.size());
}
// Send every byte of `data`; `sent` counts what went (the readiness form).
inline auto send_all_op(const registration& reg, int fd, std::span<const std::byte> data,
                        std::size_t& sent) noexcept {
  return stream_op(
      reg, direction::write, send_all_attempt(fd, data, sent),
      {completion_kind::send_all, fd, const_cast<std::byte*>(data.data()), data.size()});
}
// Send every byte of every buffer of `cursor` (which must outlive the
// wait): sendmsg on both backends.
inline auto send_gathered_op(const registration& reg, int fd, gather_cursor& cursor) noexcept {
  return stream_op(reg, direction::write, send_gathered_attempt(fd, cursor),
                   {completion_kind::send_gathered, fd, &cursor, 0});
}
// Send what the socket takes of `data` (at least one byte).
inline auto send_some_op(const registration& reg, int fd,
                         std::span<const std::byte> data) noexcept {
  return stream_op(
      reg, direction::write, send_some_attempt(fd, data),
      {completion_kind::send_some, fd, const_cast<std::byte*>(data.data()), data.size()});
}
// The next connection on listening socket `fd`: its descriptor.
inline auto accept_op(const registration& reg, int fd) noexcept {
  return stream_op(reg, direction::read, accept_attempt(fd),
                   {completion_kind::accept, fd, nullptr, 0});
}
// Connect `fd` to `peer` (which must outlive the wait). On epoll the
// connect(2) was started already and this waits for its write edge.
inline auto connect_op(const registration& reg, int fd, const endpoint& peer) noexcept {
  return stream_op(reg, direction::write, connect_attempt(fd),
                   {completion_kind::connect, fd, const_cast<sockaddr*>(peer.data()),
                    static_cast<std::size_t>(peer.size())});
}

// The operations of a stream or listener of `Protocol` (io/basic_stream.hpp,
// its completion_requests): the ones above, or, for a protocol whose
// operations are readiness waits on both backends (Unix-domain streams),
// their readiness form alone, so that one body serves both.
template <class Protocol>
struct protocol_ops {
  static auto receive(const registration& reg, int fd, std::span<std::byte> buffer) noexcept {
    if constexpr (Protocol::completion_requests) {
      return receive_op(reg, fd, buffer);
    } else {
      return readiness_op(reg, direction::read, recv_attempt(fd, buffer), buffer.size());
    }
  }
  static auto send_all(const registration& reg, int fd, std::span<const std::byte> data,
                       std::size_t& sent) noexcept {
    if constexpr (Protocol::completion_requests) {
      return send_all_op(reg, fd, data, sent);
    } else {
      return readiness_op(reg, direction::write, send_all_attempt(fd, data, sent));
    }
  }
  static auto send_gathered(const registration& reg, int fd, gather_cursor& cursor) noexcept {
    if constexpr (Protocol::completion_requests) {
      return send_gathered_op(reg, fd, cursor);
    } else {
      return readiness_op(reg, direction::write, send_gathered_attempt(fd, cursor));
    }
  }
  static auto send_some(const registration& reg, int fd, std::span<const std::byte> data) noexcept {
    if constexpr (Protocol::completion_requests) {
      return send_some_op(reg, fd, data);
    } else {
      return readiness_op(reg, direction::write, send_some_attempt(fd, data));
    }
  }
  static auto accept(const registration& reg, int fd) noexcept {
    if constexpr (Protocol::completion_requests) {
      return accept_op(reg, fd);
    } else {
      return readiness_op(reg, direction::read, accept_attempt(fd));
    }
  }
  // Only for a connect the protocol left pending (open_connect).
  static auto connect(const registration& reg, int fd,
                      const typename Protocol::endpoint_type& peer) noexcept {
    if constexpr (Protocol::completion_requests) {
      return connect_op(reg, fd, peer);
    } else {
      return readiness_op(reg, direction::write, connect_attempt(fd));
    }
  }
};

}  // namespace canopy::io::detail
