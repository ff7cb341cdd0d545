// socket_ops — the socket steps every socket type shares (TCP, UDP, Unix
// domain; task and fiber forms): opening, connecting, and the non-blocking
// attempts that io/readiness.hpp runs until they stop reporting EAGAIN.
// Internal.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cerrno>
#include <cstddef>
#include <span>
#include <system_error>

#include "endpoint.hpp"

namespace canopy::io {
class reactor;
class registration;
class tcp_stream;
}  // namespace canopy::io

namespace canopy::io::detail {

struct io_result;

// A non-blocking, close-on-exec socket of `family` and `type` (SOCK_STREAM
// by default); -1 and `error` set on failure.
int open_socket(int family, std::error_code& error, int type = SOCK_STREAM) noexcept;
// connect(2) on a fresh non-blocking socket: true when finished (connected,
// or failed with `error` set), false when the caller must wait for
// writability and then read SO_ERROR (connect_attempt).
bool start_connect(int fd, const sockaddr* peer, socklen_t length, std::error_code& error) noexcept;
inline bool start_connect(int fd, const endpoint& peer, std::error_code& error) noexcept {
  return start_connect(fd, peer.data(), peer.size(), error);
}
// TCP_NODELAY on, best effort.
void set_no_delay_on(int fd) noexcept;
// Throw std::system_error(error, what) if `error` is set.
void throw_if(const std::error_code& error, const char* what);

// A TCP step shared by the task and fiber forms (io/tcp.cpp): adopt what an
// accept_attempt returned.
tcp_stream adopt_accepted(const registration& listener, const io_result& accepted,
                          std::error_code& error) noexcept;

// ---- attempts: ssize_t() noexcept, a count or -1 with errno ----

// One recv: bytes, 0 at EOF.
inline auto recv_attempt(int fd, std::span<std::byte> buffer) noexcept {
  return [fd, buffer]() noexcept { return ::recv(fd, buffer.data(), buffer.size(), 0); };
}
// Sends until every byte of `data` went (then data.size()); `sent` counts
// across attempts, so an attempt after EAGAIN goes on where it stopped.
inline auto send_all_attempt(int fd, std::span<const std::byte> data, std::size_t& sent) noexcept {
  return [fd, data, &sent]() noexcept -> ssize_t {
    while (sent < data.size()) {
      const ssize_t count = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (count < 0) {
        return -1;
      }
      sent += static_cast<std::size_t>(count);
    }
    return static_cast<ssize_t>(sent);
  };
}
// As many sends as go through: what went, or -1 (errno) if nothing did.
inline auto send_some_attempt(int fd, std::span<const std::byte> data) noexcept {
  return [fd, data]() noexcept -> ssize_t {
    std::size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t count = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (count >= 0) {
        sent += static_cast<std::size_t>(count);
      } else if (errno != EINTR) {
        return sent > 0 ? static_cast<ssize_t>(sent) : -1;
      }
    }
    return static_cast<ssize_t>(sent);
  };
}
// accept4 (non-blocking, close-on-exec): the new descriptor. A connection
// that died in the queue (ECONNABORTED, EPROTO) is skipped.
inline auto accept_attempt(int listen_fd) noexcept {
  return [listen_fd]() noexcept -> ssize_t {
    for (;;) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0 || (errno != ECONNABORTED && errno != EPROTO)) {
        return fd;
      }
    }
  };
}
// After the write edge of a connecting socket: 0 (connected) or -1 with
// errno = the connect's failure (SO_ERROR).
inline auto connect_attempt(int fd) noexcept {
  return [fd]() noexcept -> ssize_t {
    int value = 0;
    socklen_t length = sizeof value;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) != 0) {
      return -1;
    }
    if (value != 0) {
      errno = value;
      return -1;
    }
    return 0;
  };
}

}  // namespace canopy::io::detail
