#include "reactor.hpp"

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <stdexcept>
#include <utility>

#include "timer/timer_queue.hpp"
#include "uring/completion_ring.hpp"

namespace canopy::io {

namespace {

constexpr std::uint32_t error_events = EPOLLERR | EPOLLHUP;
constexpr std::uint32_t read_events = EPOLLIN | EPOLLRDHUP | EPOLLPRI | error_events;
constexpr std::uint32_t write_events = EPOLLOUT | error_events;

std::uint64_t cookie_of(std::uint32_t slot, std::uint32_t generation) noexcept {
  return (std::uint64_t{slot} << 32) | generation;
}

}  // namespace

reactor::reactor() : reactor(reactor_options{}) {}

reactor::reactor(reactor_options options)
    : timers_(options.timers ? std::make_unique<timer_queue>() : nullptr) {
  // Checked whichever backend runs, so that bad input fails the same way
  // with CANOPY_IO_BACKEND set or not (io_uring_setup refuses 0 with a bare
  // EINVAL, and automatic would fall back to epoll without a word).
  if (options.ring_entries == 0) {
    throw std::invalid_argument(
        "canopy::io::reactor_options: ring_entries is 0; it must be at least 1 (rounded up to a "
        "power of two, clamped to the kernel's maximum)");
  }
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
  try {
    open_ring(options.backend, options.ring_entries);
  } catch (...) {
    ::close(event_fd_);
    ::close(epoll_fd_);
    throw;
  }
  if (ring_ != nullptr) {
    return;  // the ring watches the eventfd itself (arm_watches)
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

reactor::~reactor() {
  ring_.reset();
  ::close(event_fd_);
  ::close(epoll_fd_);
}

reactor* reactor::of(executor_core& core) noexcept { return dynamic_cast<reactor*>(core.driver()); }

using detail::registration_entry;

reactor::registration_id reactor::add(int fd, interest what, std::error_code& error,
                                      bool assume_ready, bool deferred) noexcept {
  error.clear();
  if (fd < 0) {
    error = std::make_error_code(std::errc::bad_file_descriptor);
    return {};
  }
  const std::uint32_t slot = slab_.allocate(error);
  if (error) {
    return {};
  }
  registration_entry& target = *slab_.find(slot);
  std::unique_lock guard(target.lock);
  target.live = true;
  target.fd = fd;
  // Optimistic: a fresh registration is "ready" in both directions; the
  // first operation's EAGAIN clears what is not.
  target.ready[0] = target.ready[1] = assume_ready;
  target.error = false;
  target.read_closed = false;
  target.pending_events = 0;
  for (registration_entry::completion& op : target.completions) {
    op.forget_result();
    op.abandoned = false;
  }
  const registration_id id{slot, target.generation};
  epoll_event event{};
  event.events = EPOLLET | EPOLLRDHUP;
  if ((static_cast<unsigned>(what) & static_cast<unsigned>(interest::readable)) != 0) {
    event.events |= EPOLLIN;
  }
  if ((static_cast<unsigned>(what) & static_cast<unsigned>(interest::writable)) != 0) {
    event.events |= EPOLLOUT;
  }
  event.data.u64 = cookie_of(slot, id.generation);
  target.epoll_events = event.events;
  target.epoll_cookie = event.data.u64;
  target.in_epoll = !(deferred && ring_ != nullptr);
  if (!target.in_epoll) {
    return id;
  }
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
    error = std::error_code(errno, std::system_category());
    target.live = false;
    target.fd = -1;
    ++target.generation;
    guard.unlock();
    slab_.release(slot);
    return {};
  }
  return id;
}

void reactor::remove(registration_id id) noexcept {
  waker woken[3];
  bool in_flight[2] = {false, false};
  std::uint16_t sequences[2] = {0, 0};
  unsigned positions[2] = {0, 0};
  const bool removed = slab_.with_live(id, false, [&](registration_entry& target) {
    // The descriptor may already be closed by its owner (EBADF): then the
    // kernel already dropped it from the set, which is what DEL wants.
    if (target.in_epoll) {
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, target.fd, nullptr);
    }
    for (std::size_t which = 0; which < 2; ++which) {
      registration_entry::completion& op = target.completions[which];
      op.forget_result();
      if (op.in_flight) {
        op.abandoned = true;
        in_flight[which] = true;
        sequences[which] = op.sequence;
        positions[which] = op.position;
      }
    }
    target.forget_kept();  // nobody reads on: a closed stream's kept bytes go
    target.live = false;
    target.fd = -1;
    // A new generation: events still queued with the old cookie, and a
    // dispatch that read one just before we took the lock, are dropped.
    ++target.generation;
    woken[0] = std::exchange(target.waiters[0], waker{});
    woken[1] = std::exchange(target.waiters[1], waker{});
    woken[2] = std::exchange(target.persistent, waker{});
    return true;
  });
  if (!removed) {
    return;
  }
  // Requests still in flight are cancelled, and their completions reaped,
  // before the slot can be reused or its waiters' memory released.
  for (std::size_t which = 0; which < 2; ++which) {
    if (in_flight[which]) {
      cancel_request(id, which, sequences[which], positions[which]);
    }
  }
  slab_.release(id.slot);
  // Their tasks re-check and see wait_status::closed.
  for (const waker& each : woken) {
    each.wake();
  }
}

wait_status reactor::ready_or_arm(registration_id id, direction which, const waker& waiter,
                                  std::uint64_t& tick) noexcept {
  return slab_.with_live(id, wait_status::closed, [&](registration_entry& target) {
    const auto index = static_cast<std::size_t>(which);
    if (target.ready[index]) {
      tick = target.tick;
      return wait_status::ready;
    }
    // A stored waker is a live wait's (each way a wait ends takes it out):
    // another task's wait here would strand one of the two, so refuse it.
    if (target.waiters[index].valid() && !(target.waiters[index] == waiter)) {
      return wait_status::busy;
    }
    target.waiters[index] = waiter;
    if (!target.in_epoll && !add_to_epoll(target)) {
      target.waiters[index] = waker{};
      tick = target.tick;
      return wait_status::ready;  // the operation's next attempt reports the error
    }
    return wait_status::armed;
  });
}

wait_status reactor::peek(registration_id id, direction which) noexcept {
  std::uint64_t tick = 0;
  return peek(id, which, tick);
}

wait_status reactor::peek(registration_id id, direction which, std::uint64_t& tick) noexcept {
  return slab_.with_live(id, wait_status::closed, [&](registration_entry& target) {
    tick = target.tick;
    return target.ready[static_cast<std::size_t>(which)] ? wait_status::ready : wait_status::armed;
  });
}

std::uint64_t reactor::tick(registration_id id) noexcept {
  return slab_.with_live(id, std::uint64_t{0},
                         [](registration_entry& target) { return target.tick; });
}

void reactor::clear_ready(registration_id id, direction which, std::uint64_t tick) noexcept {
  slab_.with_live(id, false, [&](registration_entry& target) {
    if (target.tick == tick) {
      // EAGAIN proves no EOF or error is due in this direction (those
      // return 0 or the error): a hang-up or error flag is stale (EPOLLHUP
      // for a socket epoll saw before its connect(2)) and must not keep
      // the direction ready, or the operation would spin on EAGAIN.
      target.ready[static_cast<std::size_t>(which)] = false;
      target.error = false;
      if (which == direction::read) {
        target.read_closed = false;
      }
    }
    return true;
  });
}

void reactor::clear_after_short_read(registration_id id, std::uint64_t tick) noexcept {
  slab_.with_live(id, false, [&](registration_entry& target) {
    // After a hang-up or an error read readiness stays: the next read
    // returns at once (EOF or the error), and no edge would set it again.
    if (target.tick == tick && !target.error && !target.read_closed) {
      target.ready[static_cast<std::size_t>(direction::read)] = false;
    }
    return true;
  });
}

void reactor::disarm(registration_id id, direction which) noexcept {
  slab_.with_live(id, false, [&](registration_entry& target) {
    target.waiters[static_cast<std::size_t>(which)] = waker{};
    return true;
  });
}

bool reactor::has_error(registration_id id) noexcept {
  return slab_.with_live(id, false, [](registration_entry& target) { return target.error; });
}

bool reactor::set_persistent_waker(registration_id id, const waker& waiter) noexcept {
  return slab_.with_live(id, false, [&](registration_entry& target) {
    target.persistent = waiter;
    if (!target.in_epoll) {
      add_to_epoll(target);
    }
    return true;
  });
}

std::uint32_t reactor::take_events(registration_id id, bool& live) noexcept {
  live = false;
  return slab_.with_live(id, std::uint32_t{0}, [&](registration_entry& target) {
    live = true;
    return std::exchange(target.pending_events, 0U);
  });
}

bool reactor::has_pending_events(registration_id id) noexcept {
  return slab_.with_live(id, true,
                         [](registration_entry& target) { return target.pending_events != 0; });
}

// A deferred registration's first readiness wait (under its lock): add it
// to epoll now; the ADD reports the state it finds as the first edge.
// NOLINTNEXTLINE(readability-make-member-function-const): changes the epoll set
bool reactor::add_to_epoll(registration_entry& target) noexcept {
  epoll_event event{};
  event.events = target.epoll_events;
  event.data.u64 = target.epoll_cookie;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, target.fd, &event) != 0) {
    target.error = true;
    target.ready[0] = target.ready[1] = true;
    return false;
  }
  target.in_epoll = true;
  return true;
}

void reactor::set_deadline_source(deadline_source* source) noexcept {
  set_deadline_source_pointer(source);
  notify();  // the poller recomputes its timeout
}

void reactor::deliver(const epoll_event& event) noexcept {
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
  events_.fetch_add(1, sync::relaxed);
  for (const waker& each : woken) {
    each.wake();
  }
}

// NOLINTNEXTLINE(readability-make-member-function-const): consumes the eventfd's count
void reactor::drain_eventfd() noexcept {
  std::uint64_t count = 0;
  // EAGAIN (already drained) is fine: the eventfd is non-blocking.
  [[maybe_unused]] const ssize_t got = ::read(event_fd_, &count, sizeof count);
}

int reactor::epoll_wait_until(
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

bool reactor::wait() noexcept {
  if (collected_count_ > 0 || deadline_due_) {
    return true;  // not dispatched yet (a notify made park() call us again)
  }
  std::optional<std::chrono::steady_clock::time_point> deadline;
  deadline_source* source = deadline_source_pointer();
  if (source != nullptr) {
    deadline = source->next_deadline();
  }
  if (ring_ != nullptr) {
    return wait_on_ring(deadline);
  }
  blocking_waits_.fetch_add(1, sync::relaxed);
  const int count = epoll_wait_until(deadline);
  if (count < 0) {
    return false;  // EINTR: park() re-checks its latch and calls again
  }
  fresh_from_wait_ = count < max_events;
  if (count == 0) {
    deadline_due_ = deadline.has_value();
    return deadline_due_;
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
    deadline_due_ = true;
  }
  return collected_count_ > 0 || deadline_due_;
}

void reactor::notify() noexcept {
  notifies_.fetch_add(1, sync::relaxed);

  const std::uint64_t one = 1;
  // EAGAIN only if the counter would overflow: it is readable either way.
  [[maybe_unused]] const ssize_t put = ::write(event_fd_, &one, sizeof one);
}

std::size_t reactor::dispatch() noexcept {
  if (ring_ != nullptr) {
    return dispatch_ring();
  }
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
    polls_.fetch_add(1, sync::relaxed);
    const int count = epoll_wait(epoll_fd_, collected_.data(), max_events, 0);
    for (int index = 0; index < count; ++index) {
      deliver(collected_[index]);
    }
    delivered += count > 0 ? static_cast<std::size_t>(count) : 0;
  }
  fresh_from_wait_ = false;
  return delivered + expire_deadlines();
}

// Both backends' dispatch, last: fire the deadlines that are due.
std::size_t reactor::expire_deadlines() noexcept {
  const bool due = deadline_due_;
  deadline_due_ = false;
  deadline_source* source = deadline_source_pointer();
  if (source == nullptr) {
    return 0;
  }
  // A busy poller's dispatch: skip the source's lock and clock unless its
  // hint says a deadline may be due (an empty queue costs one load). A
  // deadline armed concurrently and missed here fires at the next dispatch,
  // as its arm notifies the poller when it is the earliest.
  if (!due && !deadline_may_be_due()) {
    return 0;
  }
  const std::size_t fired = source->expire(std::chrono::steady_clock::now());
  if (fired != 0) {
    deadline_fires_.fetch_add(1, sync::relaxed);
  }
  return fired;
}

reactor_stats reactor::stats() const noexcept {
  reactor_stats result;
  result.blocking_waits = blocking_waits_.load(sync::relaxed);
  result.polls = polls_.load(sync::relaxed);
  result.events = events_.load(sync::relaxed);
  result.notifies = notifies_.load(sync::relaxed);
  result.deadlines = deadline_fires_.load(sync::relaxed);
  result.backend = backend_;
  result.ring_enters = ring_ != nullptr ? ring_->enters() : 0;
  result.completions = completions_.load(sync::relaxed);
  return result;
}

}  // namespace canopy::io
