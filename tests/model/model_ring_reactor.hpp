// model_ring_reactor — the reactor's io_uring half reduced to its park path,
// for the model check of that path (tests/model/model_ring_test.cpp): a
// copy of io/uring/uring_backend.cpp's wait (here wait_on_ring),
// arm_watches, complete, reap_completions, dispatch (here dispatch_ring),
// submit, wait_until_reaped and start, step for step, on
// model_ring_kernel (the real sources need liburing and the kernel). A
// copy, so it must follow that file; the ring rows of
// tests/model/mutants.sh mutate it.
//
// Threads: wait() and dispatch() on the poller; submit() and
// queue_request() on workers; notify() on any thread; the outside starter
// and the canceller on threads of their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "executor/idle_driver.hpp"
#include "atomics/atomics.hpp"
#include "tests/model/model_checker.hpp"
#include "tests/model/model_ring_kernel.hpp"

namespace canopy::detail::model {

// reap_lock_ matters only against a thread that cancels a request
// (wait_until_reaped reaps on that thread), so its schedule points are left
// out unless a case runs a canceller. The fields it guards
// (eventfd_watched_, pending_, poller_waiting_) are plain here: the checker
// switches threads only at schedule points.
class model_ring_driver final : public ext::idle_driver {
 public:
  model_ring_driver(model_ring_kernel& kernel, bool canceller) noexcept
      : kernel_(kernel), canceller_(canceller) {}

  // reactor::wait_on_ring: the look, the watches and poller_waiting_ in
  // one locked section; poller_waiting_ cleared in the reap after the wait.
  bool wait() noexcept override {
    lock_reaps();
    if (pending_.has_value()) {
      unlock_reaps();
      return true;  // collected, not dispatched yet
    }
    arm_watches();
    poller_waiting_ = true;  // the queue is the poller's until its reap below
    unlock_reaps();
    kernel_.enter(kernel_.publish(), /*wait=*/true);  // completion_ring::wait: flush and wait
    // Only the wake-ups are consumed here; a socket completion is kept for dispatch().
    bool collected = false;
    lock_reaps();
    poller_waiting_ = false;
    while (!collected) {
      const std::optional<model_cqe> entry = kernel_.reap_one();
      if (!entry) {
        break;
      }
      if (entry->from == model_cqe::source::wake) {  // wait_on_ring: user_data == wake_tag
        complete(*entry, nullptr);
      } else {
        pending_ = entry;
        collected = true;
      }
    }
    unlock_reaps();
    return collected;
  }

  // reactor::notify.
  void notify() noexcept override { kernel_.eventfd_write(); }

  // reactor::dispatch_ring: what wait() kept, then every CQE there is; then
  // the watches that ended are queued again (submitted by the next flush).
  std::size_t dispatch() noexcept override {
    lock_reaps();
    const std::size_t delivered = reap_completions(nullptr);
    arm_watches();
    unlock_reaps();
    return delivered;
  }

  // reactor::cancel_request on a thread that is not a worker, for a request
  // the kernel has taken (completion_ring::cancel's sync cancel), then
  // wait_until_reaped: until the request's completion is reaped, reap what
  // is there unless the poller is reaping or between its look and its reap
  // (poller_waiting_); then sched_yield and try again. Here, unless its
  // next look at in_flight would end the loop, it waits for the next
  // release of the lock by another thread instead: only a holder of the
  // lock changes what it looks at, so these are the same states without
  // the spinning. A wake-up taken here is passed on with a notify.
  void cancel_from_outside() noexcept {
    kernel_.sync_cancel();
    while (!cancel_reaped_ && !closing_) {                // the request's in_flight flag
      const std::uint32_t seen = reap_lock_.fetch_or(1);  // reap_lock_.try_lock()
      if ((seen & 1) != 0) {
        if (!cancel_reaped_) {
          park_on(&reap_lock_, seen, reap_lock_.peek());
        }
        continue;
      }
      const bool reaped = !poller_waiting_;
      bool rewake = false;
      if (reaped) {
        static_cast<void>(reap_completions(&rewake));
      }
      const std::uint32_t released = unlock_reaps();
      if (rewake) {
        notify();  // wait_until_reaped: the wake-up it took, passed on
      }
      if (!reaped && !cancel_reaped_) {
        park_on(&reap_lock_, released, reap_lock_.peek());  // sched_yield
      }
    }
  }
  // The teardown: a canceller still waiting stops.
  void close_for_teardown() noexcept {
    closing_ = true;
    unpark_on(&reap_lock_);
  }

  // reactor::submit: enter only when the hint says entries are queued.
  void submit() noexcept override {
    if (kernel_.has_unsubmitted()) {
      const std::uint32_t entries = kernel_.publish();
      if (entries != 0) {
        kernel_.enter(entries, /*wait=*/false);
      }
    }
  }

  // uring_backend::start on a worker: queued, not submitted.
  void queue_request() noexcept { kernel_.queue_request(); }
  // uring_backend::start on a thread that is not a worker: queued, and
  // the poller woken, whose wait submits it (never submitted here).
  void queue_request_from_outside() noexcept {
    kernel_.queue_request();
    notify();
  }

  void set_completion_handler(void (*handler)(void*), void* target) noexcept {
    on_completion_ = handler;
    on_completion_target_ = target;
  }
  [[nodiscard]] bool holds_collected() const noexcept { return pending_.has_value(); }
  [[nodiscard]] bool cancel_reaped() const noexcept { return cancel_reaped_; }
  // Whether the completion the poller's wait() kept was reaped by the
  // canceller since the last call (then the poller wakes for nothing: the
  // cost of a cancel racing it, not a lost or wasted wake-up CQE).
  bool take_kept_reaped_elsewhere() noexcept {
    return std::exchange(kept_reaped_elsewhere_, false);
  }

 private:
  // reactor::reap_completions (reap_lock_ held); `rewake` as there.
  std::size_t reap_completions(bool* rewake) noexcept {
    std::size_t delivered = 0;
    if (pending_) {
      kept_reaped_elsewhere_ = rewake != nullptr;
      complete(*pending_, rewake);
      pending_.reset();
      ++delivered;
    }
    while (const std::optional<model_cqe> entry = kernel_.reap_one()) {
      complete(*entry, rewake);
      ++delivered;
    }
    return delivered;
  }

  // reactor::arm_watches (reap_lock_ held): queue the eventfd's poll unless
  // it is armed (queue only: the poller's wait or a worker submits it).
  void arm_watches() noexcept {
    if (!eventfd_watched_) {
      kernel_.queue_wake_poll();
      eventfd_watched_ = true;
    }
  }

  // reap_lock_: odd while held; each release moves it to the next even
  // value, so a canceller can wait for the next release.
  void lock_reaps() noexcept {
    if (!canceller_) {
      return;
    }
    for (;;) {
      const std::uint32_t seen = reap_lock_.fetch_or(1);
      if ((seen & 1) == 0) {
        return;
      }
      park_on(&reap_lock_, seen, reap_lock_.peek());
    }
  }
  // The released (even) value.
  std::uint32_t unlock_reaps() noexcept {
    if (!canceller_) {
      return 0;
    }
    const std::uint32_t released = reap_lock_.fetch_add(1) + 1;
    unpark_on(&reap_lock_);
    return released;
  }

  // reactor::complete: `rewake` null for the poller.
  void complete(const model_cqe& entry, bool* rewake) noexcept {
    switch (entry.from) {
      case model_cqe::source::wake:
        if (rewake == nullptr) {
          kernel_.eventfd_drain();
        } else {
          *rewake = true;  // left for the poller to drain after the new wake
        }
        eventfd_watched_ = eventfd_watched_ && entry.more;  // a poll that ended is armed again
        return;
      case model_cqe::source::cancelled:
        cancel_reaped_ = true;  // abandoned: nothing delivered
        return;
      case model_cqe::source::request:
        on_completion_(on_completion_target_);  // the waiting task's waker
        return;
    }
  }

  model_ring_kernel& kernel_;
  bool canceller_;
  canopy::detail::atomics::atomic<std::uint32_t> reap_lock_{0};
  std::optional<model_cqe> pending_;  // reactor::pending_completion_
  bool eventfd_watched_ = false;      // open_ring arms nothing: the poller's arm_watches does
  bool poller_waiting_ = false;       // reactor::poller_waiting_
  bool closing_ = false;              // the teardown: a waiting canceller stops
  bool cancel_reaped_ = false;
  bool kept_reaped_elsewhere_ = false;
  void (*on_completion_)(void*) = nullptr;
  void* on_completion_target_ = nullptr;
};

}  // namespace canopy::detail::model
