// The reactor (reactor.hpp): the registrations, which both backends
// share, the choice of backend, and the idle_driver members, which hand
// the poller's wait and dispatch to the backend that runs
// (epoll_backend.cpp, uring/uring_backend.cpp) and fire the deadlines.
#include "reactor.hpp"

#include <sys/epoll.h>

#include <cerrno>
#include <stdexcept>
#include <utility>

#include "epoll_backend.hpp"
#include "timer/timer_queue.hpp"
#include "uring/uring_backend.hpp"

namespace canopy::io {

using detail::epoll_backend;
using detail::uring_backend;

reactor::reactor() : reactor(reactor_options{}) {}

reactor::reactor(reactor_options options)
    : timers_(options.timers ? std::make_unique<detail::timer_queue>() : nullptr) {
  // Checked whichever backend runs, so that bad input fails the same way
  // with CANOPY_IO_BACKEND set or not (io_uring_setup refuses 0 with a bare
  // EINVAL, and automatic would fall back to epoll without a word).
  if (options.ring_entries == 0) {
    throw std::invalid_argument(
        "canopy::io::reactor_options: ring_entries is 0; it must be at least 1 (rounded up to a "
        "power of two, clamped to the kernel's maximum)");
  }
  // automatic takes epoll: io_uring is chosen only when asked for, until it
  // is at least as fast as epoll in every configuration of the examples as
  // shipped (docs/io.md, "Which is faster").
  if (detail::chosen_backend(options.backend) == io_backend::io_uring) {
    uring_ = std::make_unique<uring_backend>(*this, slab_, options.ring_entries);
    readiness_ = &uring_->readiness();
    backend_ = io_backend::io_uring;
    // A busy worker looks at the completion queue after each task and
    // polls when entries wait there, rather than every
    // driver_poll_interval tasks: a completion has no system call of the
    // worker's to ride on, as epoll's readiness has the task's own read.
    set_completion_queue_view(uring_->completion_head(), uring_->completion_tail());
  } else {
    epoll_ = std::make_unique<epoll_backend>(slab_, true);
    readiness_ = epoll_.get();
  }
}

reactor::~reactor() {
  uring_.reset();
  epoll_.reset();
}

reactor* reactor::of(canopy::detail::scheduler& core) noexcept {
  return dynamic_cast<reactor*>(core.driver());
}

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
  std::uint32_t events = EPOLLET | EPOLLRDHUP;
  if ((static_cast<unsigned>(what) & static_cast<unsigned>(interest::readable)) != 0) {
    events |= EPOLLIN;
  }
  if ((static_cast<unsigned>(what) & static_cast<unsigned>(interest::writable)) != 0) {
    events |= EPOLLOUT;
  }
  target.epoll_events = events;
  target.epoll_cookie = epoll_backend::cookie_of(slot, id.generation);
  target.in_epoll = !(deferred && uring_ != nullptr);
  if (!target.in_epoll) {
    return id;
  }
  if (const int failed = readiness_->watch(fd, events, target.epoll_cookie); failed != 0) {
    error = std::error_code(failed, std::system_category());
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
      readiness_->unwatch(target.fd);
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
    target.forget_kept_accepted();  // nor accepts: a closed listener's connections
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
      uring_->cancel_request(id, which, sequences[which], positions[which]);
    }
  }
  slab_.release(id.slot);
  // Their tasks re-check and see wait_status::closed.
  for (const waker& each : woken) {
    each.wake();
  }
}

detail::wait_status reactor::ready_or_arm(registration_id id, direction which, const waker& waiter,
                                          std::uint64_t& tick) noexcept {
  return slab_.with_live(id, detail::wait_status::closed, [&](registration_entry& target) {
    const auto index = static_cast<std::size_t>(which);
    if (target.ready[index]) {
      tick = target.tick;
      return detail::wait_status::ready;
    }
    // A stored waker is a live wait's (each way a wait ends takes it out):
    // another task's wait here would strand one of the two, so refuse it.
    if (target.waiters[index].valid() && !(target.waiters[index] == waiter)) {
      return detail::wait_status::busy;
    }
    target.waiters[index] = waiter;
    if (!target.in_epoll && !readiness_->watch_deferred(target)) {
      target.waiters[index] = waker{};
      tick = target.tick;
      return detail::wait_status::ready;  // the operation's next attempt reports the error
    }
    return detail::wait_status::armed;
  });
}

detail::wait_status reactor::peek(registration_id id, direction which) noexcept {
  std::uint64_t tick = 0;
  return peek(id, which, tick);
}

detail::wait_status reactor::peek(registration_id id, direction which,
                                  std::uint64_t& tick) noexcept {
  return slab_.with_live(id, detail::wait_status::closed, [&](registration_entry& target) {
    tick = target.tick;
    return target.ready[static_cast<std::size_t>(which)] ? detail::wait_status::ready
                                                         : detail::wait_status::armed;
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
      readiness_->watch_deferred(target);
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

// Bytes an abandoned receive kept (uring_backend::abandon): the slab's.
std::size_t reactor::take_kept(registration_id id, std::span<std::byte> buffer) noexcept {
  return slab_.with_live(id, std::size_t{0}, [&](registration_entry& target) {
    return target.has_kept() ? target.take_kept(buffer.data(), buffer.size()) : 0;
  });
}

// A connection an abandoned accept kept (uring_backend::abandon): the slab's.
int reactor::take_kept_accepted(registration_id id) noexcept {
  return slab_.with_live(id, -1, [](registration_entry& target) {
    if (target.kept_accepted.empty()) {
      return -1;
    }
    const int descriptor = target.kept_accepted.front();
    target.kept_accepted.erase(target.kept_accepted.begin());
    return descriptor;
  });
}

void reactor::set_deadline_source(ext::deadline_source* source) noexcept {
  set_deadline_source_pointer(source);
  notify();  // the poller recomputes its timeout
}

bool reactor::wait() noexcept {
  if (deadline_due_ || (epoll_ != nullptr && epoll_->has_collected())) {
    return true;  // not dispatched yet (a notify made park() call us again)
  }
  std::optional<std::chrono::steady_clock::time_point> deadline;
  ext::deadline_source* source = deadline_source_pointer();
  if (source != nullptr) {
    deadline = source->next_deadline();
  }
  if (uring_ != nullptr) {
    return uring_->wait(deadline, deadline_due_);
  }
  return epoll_->wait(deadline, deadline_due_);
}

void reactor::notify() noexcept { readiness_->notify(); }

std::size_t reactor::dispatch() noexcept {
  const std::size_t delivered = uring_ != nullptr ? uring_->dispatch() : epoll_->dispatch();
  return delivered + expire_deadlines();
}

void reactor::submit() noexcept {
  if (uring_ != nullptr) {
    uring_->submit();
  }
}

void reactor::workers_stopped() noexcept {
  if (uring_ != nullptr) {
    uring_->workers_stopped();
  }
}

// Both backends' dispatch, last: fire the deadlines that are due.
std::size_t reactor::expire_deadlines() noexcept {
  const bool due = deadline_due_;
  deadline_due_ = false;
  ext::deadline_source* source = deadline_source_pointer();
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
    deadline_fires_.fetch_add(1, canopy::detail::atomics::relaxed);
  }
  return fired;
}

reactor_stats reactor::stats() const noexcept {
  reactor_stats result;
  if (uring_ != nullptr) {
    uring_->add_stats(result);
  } else {
    epoll_->add_stats(result);
  }
  result.deadlines = deadline_fires_.load(canopy::detail::atomics::relaxed);
  result.backend = backend_;
  return result;
}

bool reactor::precise_timeouts() const noexcept { return readiness_->precise_timeouts(); }

}  // namespace canopy::io
