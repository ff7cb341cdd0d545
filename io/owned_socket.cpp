#include "owned_socket.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <utility>

namespace canopy::io::detail {

namespace {

endpoint socket_name(int fd, bool peer) noexcept {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  auto* name = reinterpret_cast<sockaddr*>(&address);
  const int status = peer ? ::getpeername(fd, name, &length) : ::getsockname(fd, name, &length);
  if (status != 0) {
    return {};
  }
  return endpoint::from(name, length);
}

}  // namespace

owned_socket::owned_socket(reactor& owner, int fd, interest what, std::error_code& error,
                           bool assume_ready, bool deferred) noexcept
    : reg_(owner, fd, what, error, assume_ready, deferred) {
  if (error) {
    ::close(fd);
    return;
  }
  fd_ = fd;
}

owned_socket::owned_socket(owned_socket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), reg_(std::move(other.reg_)) {}

owned_socket& owned_socket::operator=(owned_socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    reg_ = std::move(other.reg_);
  }
  return *this;
}

void owned_socket::close() noexcept {
  reg_.reset();  // first: wakes waiters (operation_canceled), no event after
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

endpoint owned_socket::local_endpoint() const noexcept { return socket_name(fd_, false); }

endpoint owned_socket::remote_endpoint() const noexcept { return socket_name(fd_, true); }

}  // namespace canopy::io::detail
