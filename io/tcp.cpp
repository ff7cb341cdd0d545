#include "tcp.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "socket_ops.hpp"

namespace canopy::io {

namespace {

// What one non-blocking attempt of an operation did.
enum class attempt : std::uint8_t { done, would_block };

bool is_would_block(int error) noexcept { return error == EAGAIN || error == EWOULDBLOCK; }

std::error_code errno_code(int value) noexcept { return {value, std::system_category()}; }

std::error_code not_open() noexcept { return std::make_error_code(std::errc::bad_file_descriptor); }

// One recv: bytes, 0 at EOF, or would_block.
attempt read_once(int fd, std::span<std::byte> buffer, std::size_t& got,
                  std::error_code& error) noexcept {
  for (;;) {
    const ssize_t count = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (count >= 0) {
      got = static_cast<std::size_t>(count);
      return attempt::done;
    }
    if (errno == EINTR) {
      continue;
    }
    if (is_would_block(errno)) {
      return attempt::would_block;
    }
    error = errno_code(errno);
    return attempt::done;
  }
}

// As many sends as go through; advances `sent`.
attempt write_once(int fd, std::span<const std::byte> data, std::size_t& sent,
                   std::error_code& error) noexcept {
  while (sent < data.size()) {
    const ssize_t count = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (count >= 0) {
      sent += static_cast<std::size_t>(count);
      continue;
    }
    if (errno == EINTR) {
      continue;
    }
    if (is_would_block(errno)) {
      return attempt::would_block;
    }
    error = errno_code(errno);
    return attempt::done;
  }
  return attempt::done;
}

attempt accept_once(int listen_fd, int& accepted, std::error_code& error) noexcept {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      accepted = fd;
      return attempt::done;
    }
    // The connection died in the queue, or a signal: take the next one.
    if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) {
      continue;
    }
    if (is_would_block(errno)) {
      return attempt::would_block;
    }
    error = errno_code(errno);
    return attempt::done;
  }
}

// A read that returned fewer bytes than asked for (and more than 0: EOF
// stays readable) emptied the socket's receive queue: clear read readiness,
// so the next read waits for an edge instead of spending a recv on EAGAIN
// (tokio does the same). Safe by the tick: an edge delivered since `tick`
// keeps the direction ready.
void drained_if_short(const registration& reg, std::uint64_t tick, std::size_t got,
                      std::size_t asked) noexcept {
  if (got > 0 && got < asked) {
    reg.clear_after_short_read(tick);
  }
}

}  // namespace

// Shared with the fiber forms (io/fiber_io.cpp, through socket_ops.hpp).
namespace detail {

void set_no_delay_on(int fd) noexcept {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void throw_if(const std::error_code& error, const char* what) {
  if (error) {
    throw std::system_error(error, what);
  }
}

// Wait until `which` may have become ready after an EAGAIN seen at `tick`.
// Returns an error that ends the operation (cancelled, or the socket's
// pending error), or {} to retry.
task<std::error_code> wait_after_eagain(const registration& reg, direction which,
                                        std::uint64_t tick) {
  reg.clear_ready(which, tick);
  co_return co_await canopy::wait_on(readiness_wait{reg, which});
}

int open_socket(int family, std::error_code& error) noexcept {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = errno_code(errno);
  }
  return fd;
}

// connect(2) on a fresh non-blocking socket registered with `reg` (not
// assumed ready): true when finished (connected or failed), false when the
// caller must wait for writability and then read SO_ERROR.
bool start_connect(int fd, const endpoint& peer, std::error_code& error) noexcept {
  if (::connect(fd, peer.data(), peer.size()) == 0) {
    return true;
  }
  if (errno == EINPROGRESS || errno == EINTR) {
    return false;
  }
  error = errno_code(errno);
  return true;
}

}  // namespace detail

using detail::open_socket;
using detail::set_no_delay_on;
using detail::start_connect;
using detail::throw_if;
using detail::wait_after_eagain;

// ------------------------------------------------------------------ stream

tcp_stream::tcp_stream(reactor& owner, int fd, std::error_code& error, bool assume_ready) noexcept
    : socket_(owner, fd, interest::both, error, assume_ready) {}

// NOLINTNEXTLINE(readability-make-member-function-const): changes the socket's state
std::error_code tcp_stream::shutdown(int how) noexcept {
  if (socket_.fd() < 0) {
    return not_open();
  }
  if (::shutdown(socket_.fd(), how) != 0) {
    return errno_code(errno);
  }
  return {};
}

// NOLINTNEXTLINE(readability-make-member-function-const): changes the socket's state
std::error_code tcp_stream::set_no_delay(bool on) noexcept {
  const int value = on ? 1 : 0;
  if (::setsockopt(socket_.fd(), IPPROTO_TCP, TCP_NODELAY, &value, sizeof value) != 0) {
    return errno_code(errno);
  }
  return {};
}

std::size_t tcp_stream::try_read_some(std::span<std::byte> buffer,
                                      std::error_code& error) noexcept {
  error.clear();
  if (socket_.fd() < 0) {
    error = not_open();
    return 0;
  }
  const std::uint64_t tick = socket_.reg().tick(direction::read);
  std::size_t got = 0;
  if (read_once(socket_.fd(), buffer, got, error) == attempt::would_block) {
    socket_.reg().clear_ready(direction::read, tick);
    error = std::make_error_code(std::errc::resource_unavailable_try_again);
  } else {
    drained_if_short(socket_.reg(), tick, got, buffer.size());
  }
  return got;
}

std::size_t tcp_stream::try_write_some(std::span<const std::byte> data,
                                       std::error_code& error) noexcept {
  error.clear();
  if (socket_.fd() < 0) {
    error = not_open();
    return 0;
  }
  const std::uint64_t tick = socket_.reg().tick(direction::write);
  std::size_t sent = 0;
  if (write_once(socket_.fd(), data, sent, error) == attempt::would_block && sent == 0) {
    socket_.reg().clear_ready(direction::write, tick);
    error = std::make_error_code(std::errc::resource_unavailable_try_again);
  }
  return sent;
}

task<std::size_t> tcp_stream::read_some(std::span<std::byte> buffer, std::error_code& error) {
  error.clear();
  for (;;) {
    if (socket_.fd() < 0) {
      error = not_open();
      co_return 0;
    }
    std::uint64_t tick = 0;
    if (!socket_.reg().ready(direction::read, tick)) {
      // Not ready (an EAGAIN or a short read cleared it): wait for the edge
      // instead of spending a recv on EAGAIN.
      if (std::error_code failed =
              co_await canopy::wait_on(readiness_wait{socket_.reg(), direction::read})) {
        error = failed;
        co_return 0;
      }
      continue;
    }
    std::size_t got = 0;
    if (read_once(socket_.fd(), buffer, got, error) == attempt::done) {
      drained_if_short(socket_.reg(), tick, got, buffer.size());
      co_return got;
    }
    socket_.reg().clear_ready(direction::read, tick);
  }
}

task<std::size_t> tcp_stream::read_some(std::span<std::byte> buffer) {
  std::error_code error;
  const std::size_t got = co_await read_some(buffer, error);
  throw_if(error, "canopy::io::tcp_stream::read_some");
  co_return got;
}

task<void> tcp_stream::write_all(std::span<const std::byte> data, std::error_code& error) {
  error.clear();
  std::size_t sent = 0;
  for (;;) {
    if (socket_.fd() < 0) {
      error = not_open();
      co_return;
    }
    const std::uint64_t tick = socket_.reg().tick(direction::write);
    if (write_once(socket_.fd(), data, sent, error) == attempt::done) {
      co_return;
    }
    if (std::error_code failed =
            co_await wait_after_eagain(socket_.reg(), direction::write, tick)) {
      error = failed;
      co_return;
    }
  }
}

task<void> tcp_stream::write_all(std::span<const std::byte> data) {
  std::error_code error;
  co_await write_all(data, error);
  throw_if(error, "canopy::io::tcp_stream::write_all");
}

task<tcp_stream> tcp_stream::connect(reactor& owner, endpoint peer, std::error_code& error) {
  error.clear();
  const int fd = open_socket(peer.family(), error);
  if (fd < 0) {
    co_return tcp_stream{};
  }
  // connect(2) first, then the registration: epoll reports EPOLLHUP for a
  // TCP socket that is not connecting yet, and that stale hang-up would
  // mark the stream closed. Connecting, it is not assumed ready: the
  // connection's completion is the first write edge (or the state epoll
  // reports when it is added, if the connection completed already).
  const bool finished = start_connect(fd, peer, error);
  if (error) {
    ::close(fd);
    co_return tcp_stream{};
  }
  tcp_stream stream(owner, fd, error, finished);  // closes fd if the registration fails
  if (error) {
    co_return tcp_stream{};
  }
  if (!finished) {
    for (;;) {
      const std::error_code waited =
          co_await canopy::wait_on(readiness_wait{stream.reg(), direction::write});
      if (waited) {
        error = waited;
        break;
      }
      // Writable: connected, or failed with the reason in SO_ERROR.
      error = socket_error(fd);
      break;
    }
  }
  if (error) {
    co_return tcp_stream{};  // `stream` closes the socket
  }
  set_no_delay_on(fd);
  // The write edge that ended the wait may have been the only one: the
  // socket is writable now, and reads are tried optimistically.
  co_return stream;
}

task<tcp_stream> tcp_stream::connect(reactor& owner, endpoint peer) {
  std::error_code error;
  tcp_stream stream = co_await connect(owner, peer, error);
  if (error) {
    throw std::system_error(error, "canopy::io::tcp_stream::connect to " + peer.to_string());
  }
  co_return stream;
}

task<tcp_stream> tcp_stream::connect(endpoint peer, std::error_code& error) {
  return connect(reactor::current(), peer, error);
}

task<tcp_stream> tcp_stream::connect(endpoint peer) { return connect(reactor::current(), peer); }

// ---------------------------------------------------------------- listener

tcp_listener tcp_listener::bind(reactor& owner, const endpoint& local, std::error_code& error,
                                int backlog, bool reuse_port) noexcept {
  error.clear();
  const int fd = open_socket(local.family(), error);
  if (fd < 0) {
    return {};
  }
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (reuse_port) {
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  }
  if (local.family() == AF_INET6) {
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  }
  if (::bind(fd, local.data(), local.size()) != 0 || ::listen(fd, backlog) != 0) {
    error = errno_code(errno);
    ::close(fd);
    return {};
  }
  tcp_listener listener;
  listener.socket_ = owned_socket(owner, fd, interest::readable, error);  // closes fd on failure
  if (error) {
    return {};
  }
  return listener;
}

tcp_listener tcp_listener::bind(reactor& owner, const endpoint& local, int backlog,
                                bool reuse_port) {
  std::error_code error;
  tcp_listener listener = bind(owner, local, error, backlog, reuse_port);
  if (error) {
    throw std::system_error(error, "canopy::io::tcp_listener::bind " + local.to_string());
  }
  return listener;
}

tcp_stream tcp_listener::try_accept(std::error_code& error) noexcept {
  error.clear();
  if (socket_.fd() < 0) {
    error = not_open();
    return {};
  }
  const std::uint64_t tick = socket_.reg().tick(direction::read);
  int accepted = -1;
  if (accept_once(socket_.fd(), accepted, error) == attempt::would_block) {
    socket_.reg().clear_ready(direction::read, tick);
    error = std::make_error_code(std::errc::resource_unavailable_try_again);
    return {};
  }
  if (error) {
    return {};
  }
  set_no_delay_on(accepted);
  return {*socket_.reg().owner(), accepted, error};
}

task<tcp_stream> tcp_listener::accept(std::error_code& error) {
  error.clear();
  for (;;) {
    if (socket_.fd() < 0) {
      error = not_open();
      co_return tcp_stream{};
    }
    const std::uint64_t tick = socket_.reg().tick(direction::read);
    int accepted = -1;
    if (accept_once(socket_.fd(), accepted, error) == attempt::done) {
      if (error) {
        co_return tcp_stream{};
      }
      set_no_delay_on(accepted);
      co_return tcp_stream(*socket_.reg().owner(), accepted, error);
    }
    if (std::error_code failed = co_await wait_after_eagain(socket_.reg(), direction::read, tick)) {
      error = failed;
      co_return tcp_stream{};
    }
  }
}

task<tcp_stream> tcp_listener::accept() {
  std::error_code error;
  tcp_stream stream = co_await accept(error);
  throw_if(error, "canopy::io::tcp_listener::accept");
  co_return stream;
}

}  // namespace canopy::io
