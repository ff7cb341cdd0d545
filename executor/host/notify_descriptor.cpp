#include "notify_descriptor.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace canopy::detail {

#ifdef CANOPY_MODEL_CHECK
// Model-checking build: the count is a checker word and blocking parks the
// logical thread on it.
notify_descriptor::notify_descriptor() = default;
notify_descriptor::~notify_descriptor() = default;

void notify_descriptor::signal() noexcept {
  model_count_.fetch_add(1);
  model::unpark_on(&model_count_);
}

std::uint64_t notify_descriptor::take() noexcept { return model_count_.exchange(0); }

void notify_descriptor::wait_readable(std::chrono::nanoseconds /*timeout*/) noexcept {
  // The checker treats a timed wait as untimed: a protocol that relies on
  // a timeout to find its work is a lost wake-up here.
  model::park_on(&model_count_, 0, model_count_.load());
}
#else
notify_descriptor::notify_descriptor() {
  event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) {
    throw std::system_error(errno, std::system_category(),
                            "canopy::executor: eventfd() for the host's notify descriptor failed");
  }
}

notify_descriptor::~notify_descriptor() { ::close(event_fd_); }

void notify_descriptor::signal() noexcept {
  const std::uint64_t one = 1;
  // Cannot fail short of a count near 2^64 - 1: EAGAIN is not reachable
  // with at most one write in flight per arm (host_channel.hpp).
  [[maybe_unused]] const ssize_t written = ::write(event_fd_, &one, sizeof one);
}

std::uint64_t notify_descriptor::take() noexcept {
  std::uint64_t count = 0;
  if (::read(event_fd_, &count, sizeof count) != static_cast<ssize_t>(sizeof count)) {
    return 0;  // EAGAIN: nothing there yet
  }
  return count;
}

void notify_descriptor::wait_readable(std::chrono::nanoseconds timeout) noexcept {
  pollfd entry{event_fd_, POLLIN, 0};
  timespec limit{};
  if (timeout.count() >= 0) {
    limit.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
    limit.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  }
  static_cast<void>(::ppoll(&entry, 1, timeout.count() >= 0 ? &limit : nullptr, nullptr));
}
#endif

}  // namespace canopy::detail
