#include "unix.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "coop_budget.hpp"
#include "readiness.hpp"
#include "socket_ops.hpp"
#include "unix_probe.hpp"

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

// A Unix-domain connect never waits: `pending` stays false.
unix_stream detail::unix_protocol::open_connect(reactor& owner, const unix_endpoint& peer,
                                                bool& pending, std::error_code& error) noexcept {
  error.clear();
  pending = false;
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

// ---------------------------------------------------------------- listener

unix_listener::unix_listener(unix_listener&& other) noexcept
    : socket_(std::move(other.socket_)),
      local_(std::exchange(other.local_, unix_endpoint{})),
      file_device_(std::exchange(other.file_device_, 0)),
      file_inode_(std::exchange(other.file_inode_, 0)) {}

unix_listener& unix_listener::operator=(unix_listener&& other) noexcept {
  if (this != &other) {
    close();
    socket_ = std::move(other.socket_);
    local_ = std::exchange(other.local_, unix_endpoint{});
    file_device_ = std::exchange(other.file_device_, 0);
    file_inode_ = std::exchange(other.file_inode_, 0);
  }
  return *this;
}

void unix_listener::close() noexcept {
  if (socket_.is_open() && !local_.empty() && !local_.is_abstract()) {
    // Only the file this listener's bind made: one removed meanwhile and
    // made again by another server is that server's.
    struct stat status {};
    const std::string file = local_.to_string();
    if (::lstat(file.c_str(), &status) == 0 && status.st_dev == file_device_ &&
        status.st_ino == file_inode_) {
      ::unlink(file.c_str());
    }
  }
  socket_.close();
  local_ = unix_endpoint{};
  file_device_ = 0;
  file_inode_ = 0;
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
  int failure = status != 0 ? errno : 0;
  if (failure == EADDRINUSE && !local.is_abstract()) {
    // The probe's own errno (EAGAIN from a live server's full backlog) is
    // not bind's answer: EADDRINUSE stands unless the file was stale. The
    // probe leaves a live server's accept queue alone (io/unix_probe.hpp).
    if (detail::is_stale_socket_file(local)) {
      ::unlink(local.to_string().c_str());
      status = ::bind(fd, local.data(), local.size());
      failure = status != 0 ? errno : 0;
    }
  }
  if (failure == 0 && ::listen(fd, backlog) != 0) {
    failure = errno;
  }
  if (failure != 0) {
    error = errno_code(failure);
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
  if (!local.is_abstract()) {
    // Its file, told apart from one another server may make at the same
    // path after this one's is removed (close() removes only this).
    struct stat status {};
    if (::lstat(local.to_string().c_str(), &status) == 0) {
      listener.file_device_ = status.st_dev;
      listener.file_inode_ = status.st_ino;
    }
  }
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
  co_await detail::coop_point();
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
