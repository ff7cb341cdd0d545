#include "unix.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "gather.hpp"
#include "readiness.hpp"
#include "socket_ops.hpp"
#include "stream_bounded.hpp"

namespace canopy::io {

using detail::io_result;
using detail::readiness_op;
using detail::throw_if;

// ---------------------------------------------------------------- endpoint

namespace {

constexpr std::size_t name_room = sizeof(sockaddr_un::sun_path);

std::error_code errno_code(int value) noexcept { return {value, std::system_category()}; }

}  // namespace

unix_endpoint unix_endpoint::path(std::string_view file, std::error_code& error) noexcept {
  error.clear();
  if (file.empty() || file.find('\0') != std::string_view::npos) {
    error = std::make_error_code(std::errc::invalid_argument);
    return {};
  }
  if (file.size() >= name_room) {  // room for the terminating NUL
    error = std::make_error_code(std::errc::filename_too_long);
    return {};
  }
  unix_endpoint result;
  std::memcpy(result.address_.sun_path, file.data(), file.size());
  result.length_ = static_cast<socklen_t>(offset + file.size() + 1);
  return result;
}

unix_endpoint unix_endpoint::path(std::string_view file) {
  std::error_code error;
  unix_endpoint result = path(file, error);
  if (error) {
    throw std::system_error(error, "canopy::io::unix_endpoint::path \"" + std::string(file) + "\"");
  }
  return result;
}

unix_endpoint unix_endpoint::abstract(std::string_view name, std::error_code& error) noexcept {
  error.clear();
  if (name.empty()) {
    error = std::make_error_code(std::errc::invalid_argument);
    return {};
  }
  if (name.size() >= name_room) {  // the leading NUL takes one byte
    error = std::make_error_code(std::errc::filename_too_long);
    return {};
  }
  unix_endpoint result;
  std::memcpy(result.address_.sun_path + 1, name.data(), name.size());
  result.length_ = static_cast<socklen_t>(offset + 1 + name.size());
  return result;
}

unix_endpoint unix_endpoint::abstract(std::string_view name) {
  std::error_code error;
  unix_endpoint result = abstract(name, error);
  if (error) {
    throw std::system_error(error,
                            "canopy::io::unix_endpoint::abstract \"" + std::string(name) + "\"");
  }
  return result;
}

std::string unix_endpoint::to_string() const {
  if (empty()) {
    return {};
  }
  if (is_abstract()) {
    return "@" + std::string(address_.sun_path + 1, length_ - offset - 1);
  }
  return {address_.sun_path};
}

// ------------------------------------------------------------------ stream

unix_stream::unix_stream(reactor& owner, int fd, std::error_code& error) noexcept
    : socket_(owner, fd, interest::both, error) {}

unix_stream detail::unix_connect(reactor& owner, const unix_endpoint& peer,
                                 std::error_code& error) noexcept {
  error.clear();
  if (peer.empty()) {
    error = std::make_error_code(std::errc::invalid_argument);
    return {};
  }
  const int fd = open_socket(AF_UNIX, error);
  if (fd < 0) {
    return {};
  }
  for (;;) {
    if (::connect(fd, peer.data(), peer.size()) == 0) {
      break;
    }
    if (errno != EINTR) {
      error = errno_code(errno);
      ::close(fd);
      return {};
    }
  }
  return {owner, fd, error};
}

unix_stream detail::adopt_accepted_unix(const registration& listener, const io_result& accepted,
                                        std::error_code& error) noexcept {
  error = accepted.error;
  if (error) {
    return {};
  }
  return {*listener.owner(), static_cast<int>(accepted.count), error};
}

task<unix_stream> unix_stream::connect(reactor& owner, unix_endpoint peer, std::error_code& error) {
  co_return detail::unix_connect(owner, peer, error);
}

task<unix_stream> unix_stream::connect(reactor& owner, unix_endpoint peer) {
  std::error_code error;
  unix_stream stream = detail::unix_connect(owner, peer, error);
  if (error) {
    throw std::system_error(error, "canopy::io::unix_stream::connect to " + peer.to_string());
  }
  co_return stream;
}

task<unix_stream> unix_stream::connect(unix_endpoint peer, std::error_code& error) {
  return connect(reactor::current(), peer, error);
}

task<unix_stream> unix_stream::connect(unix_endpoint peer) {
  return connect(reactor::current(), peer);
}

task<std::size_t> unix_stream::read_some(std::span<std::byte> buffer, std::error_code& error) {
  const io_result done = co_await canopy::wait_on(readiness_op(
      socket_.reg(), direction::read, detail::recv_attempt(socket_.fd(), buffer), buffer.size()));
  error = done.error;
  co_return done.count;
}

task<std::size_t> unix_stream::read_some(std::span<std::byte> buffer) {
  std::error_code error;
  const std::size_t got = co_await read_some(buffer, error);
  throw_if(error, "canopy::io::unix_stream::read_some");
  co_return got;
}

task<void> unix_stream::write_all(std::span<const std::byte> data, std::error_code& error) {
  std::size_t sent = 0;
  error =
      (co_await canopy::wait_on(readiness_op(socket_.reg(), direction::write,
                                             detail::send_all_attempt(socket_.fd(), data, sent))))
          .error;
}

task<void> unix_stream::write_all(std::span<const std::byte> data) {
  std::error_code error;
  co_await write_all(data, error);
  throw_if(error, "canopy::io::unix_stream::write_all");
}

// Readiness on both backends, as read_some and write_all (stream_receive.cpp).
detail::bounded_read unix_stream::read_some_until(std::span<std::byte> buffer,
                                                  std::chrono::steady_clock::time_point deadline,
                                                  std::error_code& error) {
  return canopy::wait_on(
      detail::bounded_receive(detail::stream_receive(socket_.reg(), socket_.fd(), buffer,
                                                     detail::stream_receive::kind::unix_domain),
                              deadline, error));
}

task<void> unix_stream::write_all_within(std::span<const std::byte> data,
                                         std::chrono::milliseconds stall_limit,
                                         std::error_code& error) {
  return detail::send_all_within(
      [this](std::span<const std::byte> rest) noexcept {
        return readiness_op(socket_.reg(), direction::write,
                            detail::send_some_attempt(socket_.fd(), rest));
      },
      data, stall_limit, error);
}

task<void> unix_stream::write_all(std::span<const std::span<const std::byte>> buffers,
                                  std::error_code& error) {
  detail::gather_cursor cursor(buffers);
  error =
      (co_await canopy::wait_on(readiness_op(socket_.reg(), direction::write,
                                             detail::send_gathered_attempt(socket_.fd(), cursor))))
          .error;
}

task<void> unix_stream::write_all(std::span<const std::span<const std::byte>> buffers) {
  std::error_code error;
  co_await write_all(buffers, error);
  throw_if(error, "canopy::io::unix_stream::write_all");
}

std::size_t unix_stream::try_read_some(std::span<std::byte> buffer,
                                       std::error_code& error) noexcept {
  const io_result done = detail::try_io(socket_.reg(), direction::read,
                                        detail::recv_attempt(socket_.fd(), buffer), buffer.size());
  error = done.error;
  return done.count;
}

std::size_t unix_stream::try_write_some(std::span<const std::byte> data,
                                        std::error_code& error) noexcept {
  const io_result done = detail::try_io(socket_.reg(), direction::write,
                                        detail::send_some_attempt(socket_.fd(), data));
  error = done.error;
  return done.count;
}

// NOLINTNEXTLINE(readability-make-member-function-const): changes the socket's state
std::error_code unix_stream::shutdown(int how) noexcept {
  if (!is_open()) {
    return std::make_error_code(std::errc::bad_file_descriptor);
  }
  if (::shutdown(socket_.fd(), how) != 0) {
    return errno_code(errno);
  }
  return {};
}

// ---------------------------------------------------------------- listener

namespace {

// The stale socket file rule (io/unix.hpp): a socket file nobody accepts on.
bool is_stale_socket_file(const unix_endpoint& local) noexcept {
  struct stat status {};
  if (::lstat(local.to_string().c_str(), &status) != 0 || !S_ISSOCK(status.st_mode)) {
    return false;
  }
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) {
    return false;
  }
  const bool refused = ::connect(probe, local.data(), local.size()) != 0 && errno == ECONNREFUSED;
  ::close(probe);
  return refused;
}

}  // namespace

unix_listener::unix_listener(unix_listener&& other) noexcept
    : socket_(std::move(other.socket_)), local_(std::exchange(other.local_, unix_endpoint{})) {}

unix_listener& unix_listener::operator=(unix_listener&& other) noexcept {
  if (this != &other) {
    close();
    socket_ = std::move(other.socket_);
    local_ = std::exchange(other.local_, unix_endpoint{});
  }
  return *this;
}

void unix_listener::close() noexcept {
  if (socket_.is_open() && !local_.empty() && !local_.is_abstract()) {
    ::unlink(local_.to_string().c_str());
  }
  socket_.close();
  local_ = unix_endpoint{};
}

unix_listener unix_listener::bind(reactor& owner, const unix_endpoint& local,
                                  std::error_code& error, int backlog) noexcept {
  error.clear();
  if (local.empty()) {
    error = std::make_error_code(std::errc::invalid_argument);
    return {};
  }
  const int fd = detail::open_socket(AF_UNIX, error);
  if (fd < 0) {
    return {};
  }
  int status = ::bind(fd, local.data(), local.size());
  if (status != 0 && errno == EADDRINUSE && !local.is_abstract() && is_stale_socket_file(local)) {
    ::unlink(local.to_string().c_str());
    status = ::bind(fd, local.data(), local.size());
  }
  if (status != 0 || ::listen(fd, backlog) != 0) {
    error = errno_code(errno);
    ::close(fd);
    return {};
  }
  unix_listener listener;
  listener.socket_ = detail::owned_socket(owner, fd, interest::readable, error);
  if (error) {  // fd closed; the file the bind made goes too
    if (!local.is_abstract()) {
      ::unlink(local.to_string().c_str());
    }
    return {};
  }
  listener.local_ = local;
  return listener;
}

unix_listener unix_listener::bind(reactor& owner, const unix_endpoint& local, int backlog) {
  std::error_code error;
  unix_listener listener = bind(owner, local, error, backlog);
  if (error) {
    throw std::system_error(error, "canopy::io::unix_listener::bind " + local.to_string());
  }
  return listener;
}

unix_stream unix_listener::try_accept(std::error_code& error) noexcept {
  return detail::adopt_accepted_unix(
      socket_.reg(),
      detail::try_io(socket_.reg(), direction::read, detail::accept_attempt(socket_.fd())), error);
}

task<unix_stream> unix_listener::accept(std::error_code& error) {
  const io_result accepted = co_await canopy::wait_on(
      readiness_op(socket_.reg(), direction::read, detail::accept_attempt(socket_.fd())));
  co_return detail::adopt_accepted_unix(socket_.reg(), accepted, error);
}

task<unix_stream> unix_listener::accept() {
  std::error_code error;
  unix_stream stream = co_await accept(error);
  throw_if(error, "canopy::io::unix_listener::accept");
  co_return stream;
}

}  // namespace canopy::io
