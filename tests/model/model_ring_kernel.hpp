// model_ring_kernel — the kernel side of an io_uring ring, for the model
// check of the io_uring park path (tests/model/model_ring_test.cpp): the
// user-space submission queue, the requests in the kernel and a device
// that completes them, a request that a sync cancel ends, the eventfd and
// its multishot poll, the completion queue, and io_uring_enter's wait.
// Every kernel operation is one step (one schedule point: the ring's
// lock), and every one that posts a CQE or submits a request wakes the
// threads waiting in the kernel.
//
// Threads: the submission queue is an atomic word (any thread); the kernel
// state is plain and changed only inside a step (the model checker switches
// threads only at schedule points), so the cases that use it run without
// the sleep-set reduction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

#include "atomics/atomics.hpp"
#include "tests/model/model_checker.hpp"

namespace canopy::detail::model {

// One completion-queue entry.
struct model_cqe {
  enum class source : std::uint8_t {
    wake,       // the eventfd's poll (the reactor's wake_tag)
    request,    // a socket request the device completed
    cancelled,  // the canceller's request, ended by its sync cancel
  };
  source from;
  bool more;  // IORING_CQE_F_MORE: the multishot poll stays armed
};

class model_ring_kernel {
 public:
  // `multishot_posts`: how many CQEs the eventfd's poll posts before it
  // ends (the last without IORING_CQE_F_MORE); 0: it never ends.
  explicit model_ring_kernel(std::uint32_t multishot_posts) noexcept
      : multishot_posts_(multishot_posts), posts_left_(multishot_posts) {}

  // ---- the submission queue (user space, any thread) ----
  // completion_ring::queue: a socket request, or the eventfd's poll
  // (reactor::arm_watches).
  void queue_request() noexcept { queued_.fetch_add(1); }
  void queue_wake_poll() noexcept { queued_.fetch_or(wake_poll_entry); }
  // completion_ring::has_unsubmitted (the hint reactor::submit reads).
  [[nodiscard]] bool has_unsubmitted() const noexcept { return queued_.load() != 0; }
  // publish_locked: the entries the next io_uring_enter consumes.
  std::uint32_t publish() noexcept { return queued_.exchange(0); }

  // ---- the kernel ----
  // io_uring_enter: consume `entries`; then, with `wait`, block until the
  // completion queue is non-empty (min_complete 1).
  void enter(std::uint32_t entries, bool wait) noexcept {
    if (entries != 0) {
      begin_step();
      in_flight_ += entries & request_mask;
      if ((entries & wake_poll_entry) != 0) {
        arm_wake_poll();
      }
      end_step();
    }
    if (!wait) {
      return;
    }
    for (;;) {
      const std::uint32_t seen = step_.load();
      if (!completions_.empty() || closing_) {
        return;
      }
      park_on(&step_, seen, step_.peek());
    }
  }

  // notify(): the eventfd write; an armed poll posts one CQE for it.
  void eventfd_write() noexcept {
    begin_step();
    ++eventfd_;
    if (wake_poll_armed_) {
      post_wake();
    }
    end_step();
  }

  // reactor::drain_eventfd.
  void eventfd_drain() noexcept {
    begin_step();
    eventfd_ = 0;
  }

  // The device: once a request is in the kernel, complete it (post its CQE).
  void complete_request() noexcept {
    for (;;) {
      const std::uint32_t seen = step_.load();
      if (in_flight_ != 0) {
        break;
      }
      if (closing_) {
        return;
      }
      park_on(&step_, seen, step_.peek());
    }
    begin_step();
    --in_flight_;
    completions_.push_back({model_cqe::source::request, false});
    end_step();
  }

  // IORING_REGISTER_SYNC_CANCEL of a request the kernel has taken (the
  // canceller's, in the kernel from the start and never completed by the
  // device): when it returns, the request's CQE is posted.
  void sync_cancel() noexcept {
    begin_step();
    completions_.push_back({model_cqe::source::cancelled, false});
    end_step();
  }

  // completion_ring::reap with a limit of one: the oldest CQE, if any.
  std::optional<model_cqe> reap_one() noexcept {
    static_cast<void>(step_.load());  // the completion queue's tail
    if (completions_.empty()) {
      return std::nullopt;
    }
    const model_cqe entry = completions_.front();
    completions_.pop_front();
    return entry;
  }

  // ---- the verdict and the teardown (no schedule points) ----
  [[nodiscard]] std::uint32_t queued_requests() const noexcept {
    return queued_.peek() & request_mask;
  }
  [[nodiscard]] std::size_t unreaped() const noexcept { return completions_.size(); }
  [[nodiscard]] bool wake_poll_armed() const noexcept { return wake_poll_armed_; }
  // io_uring_queue_exit: every wait in the kernel returns.
  void close_for_teardown() noexcept {
    closing_ = true;
    unpark_on(&step_);
  }

 private:
  static constexpr std::uint32_t request_mask = 0xffff;
  static constexpr std::uint32_t wake_poll_entry = 0x10000;

  void begin_step() noexcept { step_.fetch_add(1); }
  void end_step() noexcept { unpark_on(&step_); }

  void post_wake() noexcept {
    bool more = true;
    if (multishot_posts_ != 0 && --posts_left_ == 0) {
      more = false;
      wake_poll_armed_ = false;
    }
    completions_.push_back({model_cqe::source::wake, more});
  }

  // A poll armed on a readable eventfd posts at once.
  void arm_wake_poll() noexcept {
    wake_poll_armed_ = true;
    posts_left_ = multishot_posts_;
    if (eventfd_ != 0) {
      post_wake();
    }
  }

  // The user-space submission queue: queued requests, plus wake_poll_entry.
  atomics::atomic<std::uint32_t> queued_{0};
  // The kernel's lock; every step bumps it, and a waiter in the kernel
  // parks on it (a waiter that looked before a step sees it moved).
  atomics::atomic<std::uint32_t> step_{0};
  // Kernel state, changed only inside a step.
  std::uint32_t in_flight_ = 0;
  std::uint32_t eventfd_ = 0;
  bool wake_poll_armed_ = false;  // armed by the poller's first arm_watches, not by open_ring
  std::uint32_t multishot_posts_;
  std::uint32_t posts_left_;
  std::deque<model_cqe> completions_;
  bool closing_ = false;
};

}  // namespace canopy::detail::model
