#include "sleep_module.hpp"

#include <algorithm>
#include <chrono>

namespace canopy::detail {

sleep_module::sleep_module(std::size_t worker_count, std::size_t max_partition_leaves,
                           std::uint32_t yield_rounds, permit_semaphore& permits)
    : yield_rounds_(yield_rounds),
      permits_(permits),
      backend_(std::make_unique<futex_park_backend>()),
      park_epochs_(std::make_unique<padded_epoch[]>(worker_count)) {
  wakers_.reserve(worker_count);
  for (std::size_t index = 0; index < worker_count; ++index) {
    wakers_.push_back(std::make_unique<signal_waker>(max_partition_leaves, *backend_));
  }
}

void sleep_module::start_looking(idle_state& idle) noexcept {
  if (!idle.parked) {
    idle.spin.found_work_without_parking();  // the previous period ended early
  }
  idle.parked = false;
  idle.spin_rounds = idle.spin.rounds_to_spin(yield_rounds_);
  idle.rounds = 0;
  counters_.add_inactive();
}

void sleep_module::stop_looking() noexcept { static_cast<void>(counters_.sub_inactive()); }

idle_report sleep_module::no_work_found(std::size_t worker, idle_state& idle,
                                        sleep_probe& probe) noexcept {
  if (idle.rounds < idle.spin_rounds && poller_is_free()) {
    // Nobody waits in the driver: while we spin, readiness and due timers
    // wait for us. Park as the poller at once (as Asio's thread blocks in
    // epoll_wait at once); the spin's sched_yield cost I/O round trips
    // milliseconds on a loaded machine (docs/io.md).
    idle.rounds = idle.spin_rounds;
  }
  if (idle.rounds < idle.spin_rounds) {
    ++idle.rounds;
    // Mostly spin briefly in place: a sched_yield on a loaded machine gives
    // the CPU away for a whole time slice, so work posted to a "searching"
    // worker could wait milliseconds before that worker saw it. Every
    // fourth round still yields, so that a thread oversubscribing the cores
    // (an outside spawner) is not starved by searching workers.
    if (idle.rounds % 4 == 0) {
      atomics::yield_thread();
    } else {
      for (int pause = 0; pause < 64; ++pause) {
        atomics::spin_pause();
      }
    }
    return {};
  }
  if (idle.rounds == idle.spin_rounds) {
    // A seq_cst RMW on the counters word: a poster's later counter RMW
    // (new_jobs) moves the JEC, which our CAS in try_sleep() compares with
    // this snapshot: one word's modification order, no fence needed.
    idle.jec_snapshot = counters_.announce_sleepy();
    ++idle.rounds;
    return {};
  }
  return try_sleep(worker, idle, probe);
}

idle_report sleep_module::try_sleep(std::size_t worker, idle_state& idle,
                                    sleep_probe& probe) noexcept {
  signal_waker& waker = *wakers_[worker];
  sleep_latch& latch = waker.latch();
  // Owner-only counter; seq_cst store so the drain check's seq_cst reads
  // order it against our latch transitions below.
  park_epochs_[worker].value.store(park_epochs_[worker].value.load(atomics::relaxed) + 1,
                                   atomics::seq_cst);

  if (!latch.get_sleepy()) {  // a waker set us: search again from scratch
    latch.reset();
    idle.rounds = 0;
    return {};
  }
  if (probe.must_stay_awake(worker)) {
    latch.reset();
    idle.rounds = idle.spin_rounds;  // re-announce sleepy after the next search
    return {};
  }
  // Count ourselves as a sleeper while still SLEEPY: wakers claim only
  // SLEEPING latches, so every latch they can claim belongs to a counted
  // sleeper and the claimer's decrement never underflows.
  for (;;) {
    const atomic_counters::counters seen = counters_.load();
    if (seen.jec() != idle.jec_snapshot) {
      // Work was posted since we got sleepy: search again before parking.
      latch.reset();
      idle.rounds = idle.spin_rounds;
      return {};
    }
    if (counters_.try_add_sleeping(seen)) {
      break;
    }
  }
  permits_.add_sleeper();
  // The poller role, if free: park on the poller backend (epoll) instead of
  // the futex. Chosen before SLEEPING so a claiming waker unparks the right way.
  const bool polling = poller_backend_ != nullptr && try_take_poller();
  waker.use_backend(polling ? poller_backend_ : nullptr);
  if (!latch.fall_asleep()) {
    // Only a forced wake (shutdown) sets a SLEEPY latch; it saw no SLEEPING
    // latch, so the bookkeeping is ours.
    forget_sleeper();
    latch.reset();
    if (polling) {
      release_poller();
    }
    idle.rounds = 0;
    return {};
  }
  // The final probe. Our seq_cst RMWs (counters CAS, add_sleeper, the
  // SLEEPY -> SLEEPING CAS) come before its seq_cst root loads; a producer's
  // seq_cst root RMW comes before its seq_cst semaphore RMW, counter RMW
  // (new_jobs) or latch read. In the single total order either we see its
  // task, or it sees us counted / SLEEPING and wakes us (docs/architecture.md,
  // "Why no wakeup is lost"). No fence: Relacy finds the lost wakeup only
  // when the root load is weakened (docs/correctness.md).
  if (permits_.try_acquire() || probe.must_stay_awake(worker)) {
    if (latch.abort_sleep()) {
      forget_sleeper();
    }  // else a waker claimed us first and did the bookkeeping
    latch.reset();
    if (polling) {
      release_poller();
    }
    idle.rounds = 0;
    return {};
  }
  probe.about_to_block(worker);
  idle_report report;
  const auto parked_at = std::chrono::steady_clock::now();
  bool self_claimed = false;
  report.spurious_wakeups = waker.park(&self_claimed);
  if (self_claimed) {
    forget_sleeper();  // the poller woke itself: no waker did this for us
  }
  report.holds_poller = polling;
  idle.spin.parked(std::chrono::steady_clock::now() - parked_at);
  idle.parked = true;
  idle.spin_rounds = idle.spin.rounds_to_spin(yield_rounds_);
  report.parked = true;
  report.reason = waker.take_wake_reason();
  latch.reset();
  idle.rounds = 0;
  return report;
}

std::uint32_t sleep_module::wake_for_permits(std::uint32_t permits) noexcept {
  return wake_any(permits, wake_reason::permit);
}

std::uint32_t sleep_module::new_jobs(std::uint32_t jobs) noexcept {
  // seq_cst RMW after the caller's seq_cst task-bit RMW: pairs with a
  // parker's counter CAS before its seq_cst probe, and with a finder's
  // decrement before its look (work_found): either we see it counted, or it
  // sees our bit. (A fence here was not needed: docs/correctness.md.)
  const atomic_counters::counters seen = counters_.announce_new_jobs();
  const std::uint32_t sleeping = seen.sleeping();
  if (sleeping == 0) {
    return 0;
  }
  const std::uint32_t awake_but_idle = seen.awake_but_idle();
  if (awake_but_idle >= jobs) {
    return 0;  // searching workers will find the work without a wake
  }
  return wake_any(std::min(jobs - awake_but_idle, sleeping), wake_reason::jec);
}

std::uint32_t sleep_module::wake_any(std::uint32_t count, wake_reason reason) noexcept {
  const std::size_t workers = wakers_.size();
  const std::size_t start = wake_cursor_.fetch_add(1, atomics::relaxed) % workers;
  std::uint32_t woken = 0;
  // Pass 0 skips the poller (a hint), so that it stays in epoll_wait while
  // futex sleepers take the work; pass 1 takes whoever is left.
  const int passes = poller_backend_ != nullptr ? 2 : 1;
  for (int pass = passes == 2 ? 0 : 1; pass < 2 && woken < count; ++pass) {
    for (std::size_t step = 0; step < workers && woken < count; ++step) {
      const std::size_t index = (start + step) % workers;
      signal_waker& waker = *wakers_[index];
      if (pass == 0 && waker.parks_on_other_backend()) {
        continue;
      }
      if (waker.claim(reason)) {
        forget_sleeper(reason);
        if (wake_observer_ != nullptr) [[unlikely]] {
          wake_observer_->woke(index, reason);
        }
        waker.unpark();
        ++woken;
      }
    }
  }
  return woken;
}

void sleep_module::forget_sleeper(wake_reason reason) noexcept {
  counters_.sub_sleeping();
  if (reason == wake_reason::permit) {
    static_cast<void>(permits_.remove_sleeper_woken_by_permit());
  } else {
    static_cast<void>(permits_.remove_sleeper());
  }
}

void sleep_module::wake_all_for_shutdown() noexcept {
  for (auto& waker : wakers_) {
    if (waker->force_wake(wake_reason::shutdown)) {
      forget_sleeper();
    }
  }
}

}  // namespace canopy::detail
