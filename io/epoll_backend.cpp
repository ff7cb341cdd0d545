// The reactor's epoll backend (io/epoll_backend.hpp).
#include "epoll_backend.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <system_error>
#include <utility>

#include "../wait/waker.hpp"

namespace canopy::io::detail {

namespace {

constexpr std::uint32_t error_events = EPOLLERR | EPOLLHUP;
constexpr std::uint32_t read_events = EPOLLIN | EPOLLRDHUP | EPOLLPRI | error_events;
constexpr std::uint32_t write_events = EPOLLOUT | error_events;

}  // namespace

epoll_backend::epoll_backend(registration_slab& slab, bool watch_eventfd) : slab_(slab) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) {
    throw std::system_error(errno, std::system_category(), "canopy::io::reactor: epoll_create1");
  }
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) {
    const int saved = errno;
    ::close(epoll_fd_);
    throw std::system_error(saved, std::system_category(), "canopy::io::reactor: eventfd");
  }
  if (!watch_eventfd) {
    return;  // the ring watches the eventfd itself (uring_backend::arm_watches)
  }
  // Level-triggered: a notify() that lands before the poller's epoll_wait,
  // or between its drain and its latch check, keeps the eventfd readable, so
  // the next epoll_wait returns at once (docs/architecture.md, the poller).
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = wake_cookie;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &event) != 0) {
    const int saved = errno;
    ::close(event_fd_);
    ::close(epoll_fd_);
    throw std::system_error(saved, std::system_category(), "canopy::io::reactor: epoll_ctl");
  }
}

epoll_backend::~epoll_backend() {
  ::close(event_fd_);
  ::close(epoll_fd_);
}

// NOLINTNEXTLINE(readability-make-member-function-const): changes the epoll set
int epoll_backend::watch(int fd, std::uint32_t events, std::uint64_t cookie) noexcept {
  epoll_event event{};
  event.events = events;
  event.data.u64 = cookie;
  return epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0 ? errno : 0;
}

// NOLINTNEXTLINE(readability-make-member-function-const): changes the epoll set
void epoll_backend::unwatch(int fd) noexcept { epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }

bool epoll_backend::watch_deferred(registration_entry& target) noexcept {
  if (watch(target.fd, target.epoll_events, target.epoll_cookie) != 0) {
    target.error = true;
    target.ready[0] = target.ready[1] = true;
    return false;
  }
  target.in_epoll = true;
  return true;
}

void epoll_backend::deliver(const epoll_event& event) noexcept {
  const std::uint64_t cookie = event.data.u64;
  if (cookie == wake_cookie) {
    drain_eventfd();
    return;
  }
  const registration_id id{static_cast<std::uint32_t>(cookie >> 32),
                           static_cast<std::uint32_t>(cookie & 0xffffffffU)};
  waker woken[3];
  // Stale (false): removed, and maybe re-registered, since the event was queued.
  const bool live = slab_.with_live(id, false, [&](registration_entry& target) {
    ++target.tick;
    target.pending_events |= event.events;
    if ((event.events & error_events) != 0) {
      target.error = true;
    }
    if ((event.events & (EPOLLRDHUP | error_events)) != 0) {
      target.read_closed = true;
    }
    if ((event.events & read_events) != 0) {
      target.ready[0] = true;
      woken[0] = std::exchange(target.waiters[0], waker{});
    }
    if ((event.events & write_events) != 0) {
      target.ready[1] = true;
      woken[1] = std::exchange(target.waiters[1], waker{});
    }
    woken[2] = target.persistent;
    return true;
  });
  if (!live) {
    return;
  }
  events_.fetch_add(1, canopy::detail::atomics::relaxed);
  for (const waker& each : woken) {
    each.wake();
  }
}

// NOLINTNEXTLINE(readability-make-member-function-const): consumes the eventfd's count
void epoll_backend::drain_eventfd() noexcept {
  std::uint64_t count = 0;
  // EAGAIN (already drained) is fine: the eventfd is non-blocking.
  [[maybe_unused]] const ssize_t got = ::read(event_fd_, &count, sizeof count);
}

void epoll_backend::notify() noexcept {
  notifies_.fetch_add(1, canopy::detail::atomics::relaxed);

  const std::uint64_t one = 1;
  // EAGAIN only if the counter would overflow: it is readable either way.
  [[maybe_unused]] const ssize_t put = ::write(event_fd_, &one, sizeof one);
}

int epoll_backend::epoll_wait_until(
    std::optional<std::chrono::steady_clock::time_point> deadline) noexcept {
  using namespace std::chrono;
  int timeout_ms = -1;
  timespec timeout{};
  const timespec* timeout_ptr = nullptr;
  if (deadline) {
    const auto left = *deadline - steady_clock::now();
    const auto ns = left.count() <= 0 ? nanoseconds{0} : duration_cast<nanoseconds>(left);
    timeout.tv_sec = static_cast<time_t>(ns.count() / 1000000000);
    timeout.tv_nsec = static_cast<long>(ns.count() % 1000000000);
    timeout_ptr = &timeout;
    // Fallback: round up so that a sleep never ends early.
    timeout_ms = static_cast<int>(std::min<std::int64_t>((ns.count() + 999999) / 1000000, 1 << 30));
  }
  if (have_pwait2_) {
    const int count = epoll_pwait2(epoll_fd_, collected_.data(), max_events, timeout_ptr, nullptr);
    if (count >= 0 || errno != ENOSYS) {
      return count;
    }
    have_pwait2_ = false;
  }
  return epoll_wait(epoll_fd_, collected_.data(), max_events, timeout_ms);
}

bool epoll_backend::wait(std::optional<std::chrono::steady_clock::time_point> deadline,
                         bool& deadline_due) noexcept {
  blocking_waits_.fetch_add(1, canopy::detail::atomics::relaxed);
  const int count = epoll_wait_until(deadline);
  if (count < 0) {
    return false;  // EINTR: park() re-checks its latch and calls again
  }
  fresh_from_wait_ = count < max_events;
  if (count == 0) {
    deadline_due = deadline.has_value();
    return deadline_due;
  }
  // Keep only registration events; the eventfd is drained here so that a
  // notify() that landed before this wait is consumed exactly once.
  int kept = 0;
  for (int index = 0; index < count; ++index) {
    if (collected_[index].data.u64 == wake_cookie) {
      drain_eventfd();
    } else {
      collected_[kept++] = collected_[index];
    }
  }
  collected_count_ = kept;
  if (deadline && std::chrono::steady_clock::now() >= *deadline) {
    deadline_due = true;
  }
  return collected_count_ > 0 || deadline_due;
}

std::size_t epoll_backend::dispatch() noexcept {
  std::size_t delivered = 0;
  const int collected = collected_count_;
  collected_count_ = 0;
  for (int index = 0; index < collected; ++index) {
    deliver(collected_[index]);
  }
  delivered += static_cast<std::size_t>(collected);
  // A busy worker's poll, or a park whose epoll_wait came back full: look
  // for more without blocking. Right after a park that collected less than
  // a full batch, that syscall would find at best what arrived since.
  if (!fresh_from_wait_) {
    polls_.fetch_add(1, canopy::detail::atomics::relaxed);
    const int count = epoll_wait(epoll_fd_, collected_.data(), max_events, 0);
    for (int index = 0; index < count; ++index) {
      deliver(collected_[index]);
    }
    delivered += count > 0 ? static_cast<std::size_t>(count) : 0;
  }
  fresh_from_wait_ = false;
  return delivered;
}

std::size_t epoll_backend::poll_until_drained() noexcept {
  std::size_t delivered = 0;
  for (;;) {
    polls_.fetch_add(1, canopy::detail::atomics::relaxed);
    const int count = epoll_wait(epoll_fd_, collected_.data(), max_events, 0);
    for (int index = 0; index < count; ++index) {
      deliver(collected_[index]);
    }
    if (count < max_events) {
      return delivered + (count > 0 ? static_cast<std::size_t>(count) : 0);
    }
    delivered += static_cast<std::size_t>(count);
  }
}

void epoll_backend::add_stats(reactor_stats& stats) const noexcept {
  stats.blocking_waits += blocking_waits_.load(canopy::detail::atomics::relaxed);
  stats.polls += polls_.load(canopy::detail::atomics::relaxed);
  stats.events += events_.load(canopy::detail::atomics::relaxed);
  stats.notifies += notifies_.load(canopy::detail::atomics::relaxed);
}

}  // namespace canopy::io::detail
