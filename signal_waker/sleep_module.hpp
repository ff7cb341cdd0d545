// sleep_module — when a worker parks and whom a poster wakes.
//
// It owns the workers' SignalWakers and the packed atomic_counters, and
// shares the summary tree's permit_semaphore. The full protocol, with the
// argument for why no wakeup is lost, is docs/architecture.md; in short:
//
// A worker that found no work calls no_work_found() once per failed search:
//   1. rounds < spin_rounds: pause briefly (every fourth round: yield the
//      CPU), search again. spin_rounds is yield_rounds, or 0 while the
//      worker's spin_history says recent spins did not pay, and no rounds
//      are spun while the poller token is free (this worker would park as
//      the poller: readiness waits for it).
//   2. rounds == spin_rounds: announce sleepy (JEC active -> sleepy), keep
//      the JEC snapshot taken after the toggle, search again.
//   3. then try_sleep():
//      a. latch UNSET -> SLEEPY (fails if a waker set it: search again);
//      b. probe for work (partition summary sync + tree + shutdown flag);
//      c. CAS counters: only if the JEC still equals the snapshot, sleeping+1;
//      d. permit_semaphore.add_sleeper();
//      e. latch SLEEPY -> SLEEPING (now claimable by wakers);
//      f. take an outstanding permit or probe once more (seq_cst loads);
//         if either succeeds, abort (SLEEPING -> UNSET, undo c and d);
//      g. block on the latch word until a waker claims it (SLEEPING -> SET).
// Poller role (when the executor has an idle driver): between c and e the
// worker takes the one poller token if it is free and then blocks in step g
// on the poller backend (epoll_wait) instead of the futex; a waker's unpark
// then writes the poller's eventfd. If the backend returns with readiness
// or a due timer, the worker claims its own latch and does the bookkeeping
// a waker would have done. It keeps the token until the executor has
// dispatched what the poller collected (release_poller()). Wakers prefer
// futex sleepers, so the poller stays in epoll_wait while others can work.
// A poster calls wake_for_permits(n) when the tree granted n permits, and
// new_jobs(n) otherwise (the JEC path). A waker that claims a sleeper's latch
// — not the sleeper — decrements the sleeping count and the semaphore's
// sleeper count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "../summary_tree/permit_semaphore.hpp"
#include "../atomics/atomics.hpp"
#include "atomic_counters.hpp"
#include "signal_waker.hpp"
#include "spin_history.hpp"

namespace canopy::detail {

// Per-worker progress through the idle rounds. Owned by the worker thread.
struct idle_state {
  std::uint32_t rounds = 0;
  std::uint32_t jec_snapshot = 0;
  std::uint32_t spin_rounds = 0;  // this idle period's spin rounds (set by start_looking)
  bool parked = false;            // this idle period has parked at least once
  spin_history spin;              // kept across idle periods
};

// The final checks a worker runs before committing to park. Implemented by
// the executor; called only from the worker's own thread.
class sleep_probe {
 public:
  virtual ~sleep_probe() = default;
  // True if `worker` must not park: visible work anywhere, or shutdown.
  [[nodiscard]] virtual bool must_stay_awake(std::size_t worker) noexcept = 0;
  // Called with the latch SLEEPING, right before blocking (drain detection).
  virtual void about_to_block(std::size_t worker) noexcept = 0;
};

// What one no_work_found() call did, for the worker's statistics.
struct idle_report {
  bool parked = false;  // the worker blocked and was woken
  wake_reason reason = wake_reason::none;
  std::uint32_t spurious_wakeups = 0;
  bool holds_poller = false;  // parked as the poller: dispatch, then release_poller()
};

// Told about every wake a poster delivers (the trace, executor/trace.hpp).
// woke() runs on the poster's thread, after its claim and before its
// unpark; it must not block.
class wake_observer {
 public:
  virtual void woke(std::size_t worker, wake_reason reason) noexcept = 0;

 protected:
  wake_observer() = default;
  wake_observer(const wake_observer&) = default;
  wake_observer& operator=(const wake_observer&) = default;
  ~wake_observer() = default;
};

class sleep_module {
 public:
  sleep_module(std::size_t worker_count, std::size_t max_partition_leaves,
               std::uint32_t yield_rounds, permit_semaphore& permits);

  [[nodiscard]] std::size_t worker_count() const noexcept { return wakers_.size(); }
  signal_waker& waker(std::size_t worker) noexcept { return *wakers_[worker]; }

  // Worker: ran out of work and starts searching (inactive + 1). Also
  // closes the previous idle period in idle.spin and picks this one's spin
  // rounds.
  void start_looking(idle_state& idle) noexcept;

  // Worker: a search started by start_looking() found work (inactive - 1).
  // Then, if a worker sleeps and no other is awake and idle, it calls
  // `more_work_visible()` (the caller's seq_cst look at the tree) and, if
  // that sees work, wakes one sleeper to share the backlog (the chain wake).
  // The look must come after the decrement (docs/architecture.md, "The
  // chain wake"); returns how many were woken.
  template <class MoreWorkVisible>
  std::uint32_t work_found(MoreWorkVisible&& more_work_visible) noexcept {
    // seq_cst RMW before the caller's seq_cst look: pairs with a poster's
    // tree RMW and then its counter RMW in new_jobs(). Either the poster's
    // counter RMW comes later (it sees us busy and wakes for itself), or
    // our look comes after its tree RMW and sees its task.
    const atomic_counters::counters after = counters_.sub_inactive();
    if (after.sleeping() > 0 && after.awake_but_idle() == 0 && more_work_visible()) {
      return wake_any(1, wake_reason::jec);
    }
    return 0;
  }

  // Worker: a search started by start_looking() ended without work (the
  // executor is stopping): stop counting as idle (inactive - 1).
  void stop_looking() noexcept;

  // Worker: a search failed. Progresses through the idle rounds and may park.
  idle_report no_work_found(std::size_t worker, idle_state& idle, sleep_probe& probe) noexcept;

  // Poster, permit path: the tree granted `permits` permits; wake that many.
  std::uint32_t wake_for_permits(std::uint32_t permits) noexcept;

  // Poster, JEC path: `jobs` tasks became runnable without a permit. Wakes
  // sleepers only if fewer workers are awake and idle than there are jobs.
  std::uint32_t new_jobs(std::uint32_t jobs) noexcept;

  // new_jobs(1) for a fork's offer, inline: when no worker is sleepy or
  // parked, new_jobs would do nothing but this load.
  [[gnu::always_inline]] void new_offer() noexcept {
    // seq_cst load: new_jobs' fast case, unchanged (its comment has the
    // pairing); new_jobs loads again before it decides anything.
    const atomic_counters::counters seen = counters_.load();
    if (seen.sleeping() != 0 || atomic_counters::counters::jec_is_sleepy(seen.jec())) {
      static_cast<void>(new_jobs(1));
    }
  }

  // Before workers start: the backend the poller parks on (null: none).
  void set_poller_backend(park_backend* backend) noexcept { poller_backend_ = backend; }
  [[nodiscard]] bool has_poller() const noexcept { return poller_backend_ != nullptr; }
  // The poller token: held by at most one worker, parked on the poller
  // backend or dispatching/polling without blocking. Any worker.
  [[nodiscard]] bool try_take_poller() noexcept {
    // acquire: pairs with release_poller(), so the previous holder's use of
    // the driver's buffers happens-before ours.
    return !poller_taken_.load(atomics::relaxed) && !poller_taken_.exchange(true, atomics::acquire);
  }
  // Whether the executor has a poller backend and no worker holds the
  // token (relaxed: a hint for how long to spin; try_take_poller decides).
  [[nodiscard]] bool poller_is_free() const noexcept {
    return poller_backend_ != nullptr && !poller_taken_.load(atomics::relaxed);
  }
  void release_poller() noexcept {
    // release: pairs with try_take_poller()'s acquire exchange.
    poller_taken_.store(false, atomics::release);
  }

  // Before workers start: who is told about each wake (null: nobody).
  void set_wake_observer(wake_observer* observer) noexcept { wake_observer_ = observer; }

  // Shutdown: set every latch; unpark the parked ones.
  void wake_all_for_shutdown() noexcept;

  [[nodiscard]] atomic_counters::counters counters() const noexcept { return counters_.load(); }

  // Incremented (owner only) each time a worker enters try_sleep; lets the
  // executor tell "parked the whole time" from "woke and parked again".
  [[nodiscard]] std::uint64_t park_epoch(std::size_t worker) const noexcept {
    return park_epochs_[worker].value.load(atomics::seq_cst);
  }

 private:
  idle_report try_sleep(std::size_t worker, idle_state& idle, sleep_probe& probe) noexcept;
  std::uint32_t wake_any(std::uint32_t count, wake_reason reason) noexcept;
  // Bookkeeping owed by whoever moved a latch out of SLEEPING; a permit
  // wake also consumes the permit it was for.
  void forget_sleeper(wake_reason reason = wake_reason::none) noexcept;

  struct alignas(atomics::cache_line) padded_epoch {
    atomics::atomic<std::uint64_t> value{0};
  };

  std::uint32_t yield_rounds_;
  permit_semaphore& permits_;
  atomic_counters counters_;
  std::unique_ptr<park_backend> backend_;
  park_backend* poller_backend_ = nullptr;
  wake_observer* wake_observer_ = nullptr;
  alignas(atomics::cache_line) atomics::atomic<bool> poller_taken_{false};
  std::vector<std::unique_ptr<signal_waker>> wakers_;
  std::unique_ptr<padded_epoch[]> park_epochs_;
  // Where the next wake scan starts, so wakes spread over workers. A hint only.
  atomics::atomic<std::uint32_t> wake_cursor_{0};
};

}  // namespace canopy::detail
