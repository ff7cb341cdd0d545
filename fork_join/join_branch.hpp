// join_branch — the records of one canopy::join (join.hpp), all on the
// joiner's stack: the countdown of callables still running (spin, yield,
// then a futex), one callable's outcome, the task body of a callable
// offered as a task (past the deque's capacity, or from outside the pool),
// and the deque entry of a callable offered to thieves (join_worker.hpp).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#include "../executor/errors.hpp"
#include "../executor/scheduler.hpp"
#include "../executor/offer_deque.hpp"
#include "../executor/task_slot.hpp"
#include "../atomics/atomics.hpp"
#include "../atomics/futex.hpp"

namespace canopy {

// What a callable returning R contributes to a join's result.
namespace detail {
template <class R>
using joined_value_t = std::conditional_t<std::is_void_v<R>, std::monostate, R>;

// The joiner's countdown of callables still running, on its stack. Bits
// 0..29 count; bit 30: the joiner sleeps on the futex; bit 31: the last
// count_down() is done with the word (after its FUTEX_WAKE), so the joiner
// may let the stack frame go.
class join_countdown {
 public:
  explicit join_countdown(std::uint32_t count) noexcept : word_(count) {}
  join_countdown(const join_countdown&) = delete;
  join_countdown& operator=(const join_countdown&) = delete;

  [[nodiscard]] bool done() const noexcept { return remaining() == 0; }

  [[nodiscard]] std::uint32_t remaining() const noexcept {
    // acquire: pairs with count_down()'s release; the results the finished
    // callables wrote are visible once their decrements are seen.
    return word_.load(atomics::acquire) & count_mask;
  }

  // The joiner takes `finished` off the count: callables it ran itself,
  // which end without a count_down() (branch_body::run_entry). Before
  // wait() only, so that the count then names the callables still running
  // elsewhere and the last count_down() knows to wake a sleeper.
  void forgive(std::uint32_t finished) noexcept {
    if (finished != 0) {
      // acq_rel: one more RMW in the chain of count_down()s (their releases
      // still reach the joiner's acquire in wait()).
      word_.fetch_sub(finished, atomics::acq_rel);
    }
  }

  // One callable ended (its result is written). After this returns for the
  // last one the joiner may return, so the caller touches nothing of the
  // join afterwards.
  void count_down() noexcept {
    // release: publishes this callable's result to the joiner's acquire
    // load (every count_down is an RMW, so the joiner that reads zero
    // synchronises with all of them).
    const std::uint32_t previous = word_.fetch_sub(1, atomics::release);
    if ((previous & count_mask) == 1 && (previous & sleeper_bit) != 0) {
      atomics::futex_wake_one(word_);
      // release: the joiner's acquire spin on this bit; after it the word
      // is no longer ours.
      word_.fetch_or(released_bit, atomics::release);
    }
  }

  // Block until the count is zero: spin, yield, then sleep on the futex.
  // `help()` runs some other work, if there is any, and says whether it
  // did: a joiner on a worker runs callables other joins offered while it
  // waits (rayon's join does the same), and starts its spinning again after
  // each. Once a spin and a yield phase found nothing, it sleeps.
  template <class Help>
  void wait(Help&& help) noexcept {
    for (int round = 0; round < spin_rounds; ++round) {
      if (done()) {
        return;
      }
      if (help()) {
        round = 0;
        continue;
      }
      atomics::spin_pause();
    }
    for (int round = 0; round < yield_rounds; ++round) {
      if (done()) {
        return;
      }
      if (!help()) {
        atomics::yield_thread();
      }
    }
    // acquire (all loads below): as in done().
    std::uint32_t word = word_.load(atomics::acquire);
    while ((word & count_mask) != 0) {
      if ((word & sleeper_bit) == 0) {
        // Set only while the count is non-zero (the CAS compares it), so
        // the count_down that reaches zero sees the bit and wakes us.
        if (!word_.compare_exchange_weak(word, word | sleeper_bit, atomics::acquire,
                                         atomics::acquire)) {
          continue;
        }
        word |= sleeper_bit;
      }
      atomics::futex_wait(word_, word);
      word = word_.load(atomics::acquire);
    }
    if ((word & sleeper_bit) != 0) {
      // The last count_down saw us asleep: wait until its FUTEX_WAKE
      // returned, so it never touches a word whose stack frame is gone.
      while ((word_.load(atomics::acquire) & released_bit) == 0) {
        atomics::spin_pause();
      }
    }
  }

 private:
  static constexpr std::uint32_t count_mask = (1U << 30U) - 1;
  static constexpr std::uint32_t sleeper_bit = 1U << 30U;
  static constexpr std::uint32_t released_bit = 1U << 31U;
  static constexpr int spin_rounds = 2048;
  static constexpr int yield_rounds = 16;

  atomics::atomic<std::uint32_t> word_;
};

// One callable's outcome, on the joiner's stack: written by whoever runs
// it, read by the joiner after the countdown reached zero. Nothing of it is
// written when the join starts but the two flags (one store): the value or
// the exception is constructed only by the run, so that a fork that nobody
// stole writes as little as rayon's does.
template <class R>
class branch_outcome {
 public:
  using value_type = joined_value_t<R>;

  // The union is left unwritten on purpose: run() constructs one member.
  branch_outcome() noexcept {}  // NOLINT(modernize-use-equals-default)
  branch_outcome(const branch_outcome&) = delete;
  branch_outcome& operator=(const branch_outcome&) = delete;
  ~branch_outcome() {
    if (ended_ == ending::value) {
      value_.~value_type();
    } else if (ended_ == ending::error) {
      error_.~exception_ptr();
    }
  }

  template <class Fn>
  void run(Fn& fn) noexcept {
    try {
      if constexpr (std::is_void_v<R>) {
        std::invoke(fn);
        ::new (static_cast<void*>(&value_)) value_type();
      } else {
        ::new (static_cast<void*>(&value_)) value_type(std::invoke(fn));
      }
      ended_ = ending::value;
    } catch (...) {
      // Nothing was constructed in the union (the value's construction is
      // the last step that may throw).
      ::new (static_cast<void*>(&error_)) std::exception_ptr(std::current_exception());
      ended_ = ending::error;
    }
  }

  // Destroyed unrun (shutdown): the join reports task_cancelled.
  void mark_dropped() noexcept { ended_ = ending::dropped; }

  void rethrow_if_failed() {
    if (ended_ == ending::error) {
      std::exception_ptr error = std::move(error_);
      error_.~exception_ptr();
      ended_ = ending::none;
      std::rethrow_exception(std::move(error));
    }
    if (ended_ == ending::dropped) {
      throw task_cancelled();
    }
  }

  // After rethrow_if_failed() returned: the callable's result.
  value_type&& value() noexcept { return std::move(value_); }

 private:
  enum class ending : std::uint8_t { none, value, error, dropped };
  union {
    value_type value_;
    std::exception_ptr error_;
  };
  ending ended_ = ending::none;

 public:
  // Run by the joiner's own thread (taken back, or never offered): no
  // count_down() was made for it. Written and read by that thread only.
  // Beside ended_, so that both start with one store.
  bool finished_here = false;
};

// The task body of an offered callable: 32 bytes in the slot, trivially
// copyable. It touches nothing of the join after its count_down().
template <class Fn, class R>
struct branch_body {
  Fn* fn;
  branch_outcome<R>* outcome;
  join_countdown* countdown;
  const detail::worker_context* joiner;  // the joining thread's; null when joined from outside

  static detail::run_outcome run_entry(void* storage) {
    const branch_body body = *std::launder(static_cast<branch_body*>(storage));
    body.outcome->run(*body.fn);
    if (body.joiner != nullptr && detail::current_worker() == body.joiner) {
      // The joiner runs it, nested in its join: it learns of the end from
      // this flag, and the locked decrement is saved (most forks).
      body.outcome->finished_here = true;
    } else {
      body.countdown->count_down();
    }
    return detail::run_outcome::completed;
  }
  static void destroy_entry(void* storage, detail::task_end end) noexcept {
    if (end == detail::task_end::dropped) {  // never ran (shutdown): the joiner must still wake
      const branch_body body = *std::launder(static_cast<branch_body*>(storage));
      body.outcome->mark_dropped();
      body.countdown->count_down();
    }
  }
  static void construct(void* storage, void* context) noexcept {
    ::new (storage) branch_body(*static_cast<const branch_body*>(context));
  }
  static constexpr detail::task_vtable table{&run_entry, &destroy_entry};
};

// An offered callable in its joiner's deque (offer_deque.hpp):
// what a thief runs. It lives in the fork_join on the joiner's stack,
// constructed when it is offered, and touches nothing of the join after
// its count_down().
template <class Fn, class R>
struct branch_job : detail::offered_job {
  Fn* fn;
  branch_outcome<R>* outcome;
  join_countdown* countdown;

  // Every field written once (the offer writes nothing else of the job).
  branch_job(const detail::worker_context& joiner, Fn& callable, branch_outcome<R>& result,
             join_countdown& count) noexcept
      : detail::offered_job{&run_stolen, joiner.running, joiner.has_running},
        fn(&callable),
        outcome(&result),
        countdown(&count) {}

  static void run_stolen(detail::offered_job& base) noexcept {
    auto& job = static_cast<branch_job&>(base);
    job.outcome->run(*job.fn);
    job.countdown->count_down();
  }
};

// Room for a trivially destructible T that is constructed only on the path
// that uses it (a branch_job when its callable goes to the deque, a task id
// when it becomes a task): a join writes nothing for the others.
template <class T>
union deferred {
  static_assert(std::is_trivially_destructible_v<T>);
  deferred() noexcept {}  // NOLINT(modernize-use-equals-default): constructs no member
  T value;
};

}  // namespace detail

}  // namespace canopy
