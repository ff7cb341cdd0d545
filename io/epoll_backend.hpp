// epoll_backend — the reactor's epoll backend (io/reactor.hpp): the epoll
// descriptor with the registrations' edge-triggered interest, the eventfd
// that notify() writes, and the poller's wait and dispatch on them. The
// io_uring backend (io/uring/uring_backend.hpp) owns one too, for the
// waits that stay on readiness; the ring then watches both descriptors,
// and only this backend's delivery and non-blocking polls run.
//
// Threads: wait(), dispatch(), poll_until_drained() and the collected
// events are the poller's (the poller role is handed over
// release/acquire); watch(), unwatch(), watch_deferred(), notify() and
// drain_eventfd() any thread. Internal (canopy::io::detail).
#pragma once

#include <sys/epoll.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "../atomics/atomics.hpp"
#include "reactor_types.hpp"
#include "registration_slab.hpp"

namespace canopy::io::detail {

class epoll_backend {
 public:
  // The epoll cookie of the eventfd; a registration's is cookie_of(slot,
  // generation).
  static constexpr std::uint64_t wake_cookie = ~std::uint64_t{0};
  static std::uint64_t cookie_of(std::uint32_t slot, std::uint32_t generation) noexcept {
    return (std::uint64_t{slot} << 32) | generation;
  }

  // Creates the epoll descriptor and the eventfd; `watch_eventfd`: add the
  // eventfd to the epoll set (the epoll backend; on io_uring the ring
  // watches it). Throws std::system_error naming the call that failed.
  // Delivers events to the registrations of `slab`, which must outlive it.
  epoll_backend(registration_slab& slab, bool watch_eventfd);
  ~epoll_backend();
  epoll_backend(const epoll_backend&) = delete;
  epoll_backend& operator=(const epoll_backend&) = delete;

  [[nodiscard]] int epoll_fd() const noexcept { return epoll_fd_; }
  [[nodiscard]] int event_fd() const noexcept { return event_fd_; }

  // epoll_ctl(ADD) of `fd` with `events` and `cookie`: 0, or the errno.
  int watch(int fd, std::uint32_t events, std::uint64_t cookie) noexcept;
  // epoll_ctl(DEL); an fd its owner already closed is gone from the set.
  void unwatch(int fd) noexcept;
  // A deferred registration's first readiness wait (its lock held): add it
  // now; the ADD reports the state it finds as the first edge. On failure
  // both directions are made ready in error (the next attempt reports it).
  bool watch_deferred(registration_entry& target) noexcept;

  // The poller's blocking wait (the epoll backend's idle_driver::wait):
  // collects events for dispatch(); sets `deadline_due` when `deadline`
  // passed. False: nothing to dispatch (EINTR, or a wake-up only).
  bool wait(std::optional<std::chrono::steady_clock::time_point> deadline,
            bool& deadline_due) noexcept;
  // Events wait() collected that dispatch() has not delivered yet.
  [[nodiscard]] bool has_collected() const noexcept { return collected_count_ > 0; }
  // Deliver what wait() collected and, unless that wait came back with less
  // than a full batch, what a non-blocking epoll_wait finds.
  std::size_t dispatch() noexcept;
  // Non-blocking epoll_waits until one comes back short (the io_uring
  // backend, when the ring reported the epoll descriptor readable).
  std::size_t poll_until_drained() noexcept;

  // Write the eventfd (counted in notifies).
  void notify() noexcept;
  // Consume the eventfd's count (EAGAIN, already drained, is fine).
  void drain_eventfd() noexcept;

  // Whether epoll_pwait2 (nanosecond timeouts) is in use.
  [[nodiscard]] bool precise_timeouts() const noexcept { return have_pwait2_; }
  // Adds blocking_waits, polls, events and notifies to `stats`.
  void add_stats(reactor_stats& stats) const noexcept;

 private:
  static constexpr int max_events = 256;

  void deliver(const epoll_event& event) noexcept;
  int epoll_wait_until(std::optional<std::chrono::steady_clock::time_point> deadline) noexcept;

  registration_slab& slab_;
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  bool have_pwait2_ = true;

  // Poller-only state.
  std::array<epoll_event, max_events> collected_{};
  int collected_count_ = 0;
  // wait() returned from an epoll_wait that did not fill collected_: the
  // dispatch right after it needs no second, non-blocking epoll_wait.
  bool fresh_from_wait_ = false;

  // Statistics (relaxed counters).
  canopy::detail::atomics::atomic<std::uint64_t> blocking_waits_{0};
  canopy::detail::atomics::atomic<std::uint64_t> polls_{0};
  canopy::detail::atomics::atomic<std::uint64_t> events_{0};
  canopy::detail::atomics::atomic<std::uint64_t> notifies_{0};
};

}  // namespace canopy::io::detail
