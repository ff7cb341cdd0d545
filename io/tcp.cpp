#include "tcp.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "readiness.hpp"
#include "socket_ops.hpp"
#include "stream_bounded.hpp"
#include "stream_op.hpp"

namespace canopy::io {

namespace {

std::error_code errno_code(int value) noexcept { return {value, std::system_category()}; }

std::error_code not_open() noexcept { return std::make_error_code(std::errc::bad_file_descriptor); }

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

tcp_stream::tcp_stream(reactor& owner, int fd, std::error_code& error, bool assume_ready) noexcept
    : socket_(owner, fd, interest::both, error, assume_ready, true) {}

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
  const registration& reg = socket_.reg();
  if (reg.owner() != nullptr && reg.owner()->backend() == io_backend::io_uring && !buffer.empty()) {
    // Bytes a receive that lost a race kept come before the socket's.
    if (const std::size_t kept = reg.owner()->take_kept(reg.id(), buffer); kept > 0) {
      error.clear();
      return kept;
    }
  }
  const io_result done = detail::try_io(socket_.reg(), direction::read,
                                        detail::recv_attempt(socket_.fd(), buffer), buffer.size());
  error = done.error;
  return done.count;
}

std::size_t tcp_stream::try_write_some(std::span<const std::byte> data,
                                       std::error_code& error) noexcept {
  const io_result done = detail::try_io(socket_.reg(), direction::write,
                                        detail::send_some_attempt(socket_.fd(), data));
  error = done.error;
  return done.count;
}

task<std::size_t> tcp_stream::read_some(std::span<std::byte> buffer, std::error_code& error) {
  const io_result done =
      co_await canopy::wait_on(detail::receive_op(socket_.reg(), socket_.fd(), buffer));
  error = done.error;
  co_return done.count;
}

task<std::size_t> tcp_stream::read_some(std::span<std::byte> buffer) {
  std::error_code error;
  const std::size_t got = co_await read_some(buffer, error);
  throw_if(error, "canopy::io::tcp_stream::read_some");
  co_return got;
}

task<void> tcp_stream::write_all(std::span<const std::byte> data, std::error_code& error) {
  std::size_t sent = 0;
  error =
      (co_await canopy::wait_on(detail::send_all_op(socket_.reg(), socket_.fd(), data, sent))).error;
}

task<void> tcp_stream::write_all(std::span<const std::byte> data) {
  std::error_code error;
  co_await write_all(data, error);
  throw_if(error, "canopy::io::tcp_stream::write_all");
}

// The write's rounds are made inside the helper's frame (an armed
// operation must not move), when the task starts, as write_all's are.
detail::bounded_read tcp_stream::read_some_until(std::span<std::byte> buffer,
                                                 std::chrono::steady_clock::time_point deadline,
                                                 std::error_code& error) {
  return canopy::wait_on(
      detail::bounded_receive(detail::stream_receive(socket_.reg(), socket_.fd(), buffer,
                                                     detail::stream_receive::kind::tcp),
                              deadline, error));
}

task<void> tcp_stream::write_all_within(std::span<const std::byte> data,
                                        std::chrono::milliseconds stall_limit,
                                        std::error_code& error) {
  return detail::send_all_within(
      [this](std::span<const std::byte> rest) noexcept {
        return detail::send_some_op(socket_.reg(), socket_.fd(), rest);
      },
      data, stall_limit, error);
}

task<void> tcp_stream::write_all(std::span<const std::span<const std::byte>> buffers,
                                 std::error_code& error) {
  detail::gather_cursor cursor(buffers);
  error = (co_await canopy::wait_on(detail::send_gathered_op(socket_.reg(), socket_.fd(), cursor)))
              .error;
}

task<void> tcp_stream::write_all(std::span<const std::span<const std::byte>> buffers) {
  std::error_code error;
  co_await write_all(buffers, error);
  throw_if(error, "canopy::io::tcp_stream::write_all");
}

// connect(2) first, then the registration: epoll reports EPOLLHUP for a TCP
// socket that is not connecting yet, and that stale hang-up would mark the
// stream closed. Connecting, it is not assumed ready: the connection's
// completion is the first write edge (or the state epoll reports when it is
// added, if the connection completed already). Returns the stream, and
// whether the caller must still wait for that edge (connect_attempt).
tcp_stream detail::start_tcp_connect(reactor& owner, const endpoint& peer, bool& pending,
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

task<tcp_stream> tcp_stream::connect(reactor& owner, endpoint peer, std::error_code& error) {
  bool pending = false;
  tcp_stream stream = detail::start_tcp_connect(owner, peer, pending, error);
  if (pending) {
    error = (co_await canopy::wait_on(
                 detail::connect_op(stream.reg(), stream.native_handle(), peer)))
                .error;
    if (error) {
      co_return tcp_stream{};  // `stream` closes the socket
    }
    set_no_delay_on(stream.native_handle());
  }
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
  const int fd = detail::open_socket(local.family(), error);
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
  return detail::adopt_accepted(
      socket_.reg(),
      detail::try_io(socket_.reg(), direction::read, detail::accept_attempt(socket_.fd())), error);
}

task<tcp_stream> tcp_listener::accept(std::error_code& error) {
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
