#include "tcp.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "coop_budget.hpp"
#include "readiness.hpp"
#include "socket_ops.hpp"
#include "stream_op.hpp"

namespace canopy::io {

namespace {

std::error_code errno_code(int value) noexcept { return {value, std::system_category()}; }

}  // namespace

// Shared with the fiber forms and the other socket types (socket_ops.hpp).
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

int open_socket(int family, std::error_code& error, int type) noexcept {
  const int fd = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = errno_code(errno);
  }
  return fd;
}

bool start_connect(int fd, const sockaddr* peer, socklen_t length,
                   std::error_code& error) noexcept {
  if (::connect(fd, peer, length) == 0) {
    return true;
  }
  if (errno == EINPROGRESS || errno == EINTR) {
    return false;
  }
  error = errno_code(errno);
  return true;
}

}  // namespace detail

using detail::io_result;
using detail::set_no_delay_on;
using detail::throw_if;

// ------------------------------------------------------------------ stream

// NOLINTNEXTLINE(readability-make-member-function-const): changes the socket's state
std::error_code tcp_stream::set_no_delay(bool on) noexcept {
  const int value = on ? 1 : 0;
  if (::setsockopt(socket_.fd(), IPPROTO_TCP, TCP_NODELAY, &value, sizeof value) != 0) {
    return errno_code(errno);
  }
  return {};
}

void detail::tcp_protocol::connected(int fd) noexcept { set_no_delay_on(fd); }

// connect(2) first, then the registration: epoll reports EPOLLHUP for a TCP
// socket that is not connecting yet, and that stale hang-up would mark the
// stream closed. Connecting, it is not assumed ready: the connection's
// completion is the first write edge (or the state epoll reports when it is
// added, if the connection completed already). Returns the stream, and
// whether the caller must still wait for that edge (connect_attempt).
tcp_stream detail::tcp_protocol::open_connect(reactor& owner, const endpoint& peer, bool& pending,
                                              std::error_code& error) noexcept {
  error.clear();
  pending = false;
  const int fd = open_socket(peer.family(), error);
  if (fd < 0) {
    return {};
  }
  // io_uring: the connect is the completion request itself.
  const bool by_ring = owner.backend() == io_backend::io_uring;
  const bool finished = !by_ring && start_connect(fd, peer, error);
  if (error) {
    ::close(fd);
    return {};
  }
  tcp_stream stream(owner, fd, error, finished);  // closes fd if the registration fails
  if (error) {
    return {};
  }
  pending = !finished;
  if (finished) {
    set_no_delay_on(fd);
  }
  return stream;
}

// ---------------------------------------------------------------- listener

tcp_listener tcp_listener::bind(reactor& owner, const endpoint& local, std::error_code& error,
                                int backlog, bool reuse_port) noexcept {
  error.clear();
  const int fd = detail::open_socket(local.family(), error);
  if (fd < 0) {
    return {};
  }
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (reuse_port) {
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  }
  // An IPv6 socket keeps the system's IPV6_V6ONLY default
  // (net.ipv6.bindv6only; 0 on Linux unless set): one on :: then takes
  // IPv4 too, as the public contract says and as Asio and Rust's std do.
  if (::bind(fd, local.data(), local.size()) != 0 || ::listen(fd, backlog) != 0) {
    error = errno_code(errno);
    ::close(fd);
    return {};
  }
  tcp_listener listener;
  listener.socket_ = detail::owned_socket(owner, fd, interest::readable, error, true,
                                          true);  // closes fd on failure
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

// The stream of a descriptor accept4 returned (or the error it reported).
tcp_stream detail::adopt_accepted(const registration& listener, const io_result& accepted,
                                  std::error_code& error) noexcept {
  error = accepted.error;
  if (error) {
    return {};
  }
  const int fd = static_cast<int>(accepted.count);
  set_no_delay_on(fd);
  return {*listener.owner(), fd, error};
}

tcp_stream tcp_listener::try_accept(std::error_code& error) noexcept {
  const registration& reg = socket_.reg();
  // A connection an accept that lost a race kept comes first (on io_uring).
  if (reg.completions()) {
    if (const int kept = reg.owner()->take_kept_accepted(reg.id()); kept >= 0) {
      return detail::adopt_accepted(reg, detail::io_result{static_cast<std::size_t>(kept), {}},
                                    error);
    }
  }
  return detail::adopt_accepted(
      reg, detail::try_io(reg, direction::read, detail::accept_attempt(socket_.fd())), error);
}

task<tcp_stream> tcp_listener::accept(std::error_code& error) {
  co_await detail::coop_point();
  const io_result accepted =
      co_await canopy::wait_on(detail::accept_op(socket_.reg(), socket_.fd()));
  co_return detail::adopt_accepted(socket_.reg(), accepted, error);
}

task<tcp_stream> tcp_listener::accept() {
  std::error_code error;
  tcp_stream stream = co_await accept(error);
  throw_if(error, "canopy::io::tcp_listener::accept");
  co_return stream;
}

}  // namespace canopy::io
