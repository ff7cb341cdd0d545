#include "registration.hpp"

#include <sys/socket.h>

#include <string>
#include <utility>

namespace canopy::io {

registration::registration(reactor& owner, int fd, interest what, std::error_code& error,
                           bool assume_ready, bool deferred) noexcept {
  id_ = owner.add(fd, what, error, assume_ready, deferred);
  if (!error) {
    owner_ = &owner;
    fd_ = fd;
    completions_ = owner.backend() == io_backend::io_uring;
  }
}

registration::registration(reactor& owner, int fd, interest what) {
  std::error_code error;
  id_ = owner.add(fd, what, error);
  if (error) {
    throw std::system_error(
        error, "canopy::io::registration: cannot register descriptor " + std::to_string(fd));
  }
  owner_ = &owner;
  fd_ = fd;
  completions_ = owner.backend() == io_backend::io_uring;
}

registration::registration(registration&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      id_(other.id_),
      fd_(std::exchange(other.fd_, -1)),
      completions_(std::exchange(other.completions_, false)) {}

registration& registration::operator=(registration&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::exchange(other.owner_, nullptr);
    id_ = other.id_;
    fd_ = std::exchange(other.fd_, -1);
    completions_ = std::exchange(other.completions_, false);
  }
  return *this;
}

void registration::reset() noexcept {
  if (owner_ != nullptr) {
    owner_->remove(id_);
    owner_ = nullptr;
    fd_ = -1;
    completions_ = false;
  }
}

std::uint64_t registration::tick(direction /*which*/) const noexcept {
  return owner_ == nullptr ? 0 : owner_->tick(id_);
}

bool registration::ready(direction which, std::uint64_t& tick) const noexcept {
  return owner_ == nullptr || owner_->peek(id_, which, tick) != detail::wait_status::armed;
}

void registration::clear_ready(direction which, std::uint64_t tick) const noexcept {
  if (owner_ != nullptr) {
    owner_->clear_ready(id_, which, tick);
  }
}

void registration::clear_after_short_read(std::uint64_t tick) const noexcept {
  if (owner_ != nullptr) {
    owner_->clear_after_short_read(id_, tick);
  }
}

bool readiness_wait::ready() noexcept {
  if (owner_ == nullptr) {
    status_ = detail::wait_status::closed;
    return true;
  }
  status_ = owner_->peek(id_, which_);
  return status_ != detail::wait_status::armed;
}

bool readiness_wait::arm(const waker& waiter) noexcept {
  if (owner_ == nullptr) {
    status_ = detail::wait_status::closed;
    return false;
  }
  std::uint64_t tick = 0;
  status_ = owner_->ready_or_arm(id_, which_, waiter, tick);
  return status_ == detail::wait_status::armed;
}

void readiness_wait::disarm() noexcept {
  // Only a waker this wait stored: a refused (busy) or ready wait stored
  // none, and clearing would strand another task's wait.
  if (owner_ != nullptr && status_ == detail::wait_status::armed) {
    owner_->disarm(id_, which_);
  }
}

std::error_code readiness_wait::result() noexcept {
  if (status_ == detail::wait_status::closed) {
    return std::make_error_code(std::errc::operation_canceled);
  }
  if (status_ == detail::wait_status::busy) {
    return std::make_error_code(std::errc::connection_already_in_progress);
  }
  if (owner_->has_error(id_)) {
    return socket_error(fd_);
  }
  return {};
}

std::error_code socket_error(int fd) noexcept {
  int value = 0;
  socklen_t length = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) != 0 || value == 0) {
    return {};
  }
  return {value, std::system_category()};
}

task<std::error_code> readable(int fd) {
  std::error_code error;
  // A one-shot registration starts "not ready": the ADD's own edge reports
  // the current state.
  registration reg(reactor::current(), fd, interest::readable, error, false);
  if (error) {
    co_return error;
  }
  co_return co_await canopy::wait_on(readiness_wait{reg, direction::read});
}

task<std::error_code> writable(int fd) {
  std::error_code error;
  registration reg(reactor::current(), fd, interest::writable, error, false);
  if (error) {
    co_return error;
  }
  co_return co_await canopy::wait_on(readiness_wait{reg, direction::write});
}

}  // namespace canopy::io
