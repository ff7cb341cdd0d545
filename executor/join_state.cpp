#include "join_state.hpp"

#include <bit>
#include <cerrno>
#include <chrono>
#include <ctime>

#include "../atomics/futex.hpp"
#include "scheduler.hpp"

namespace canopy::detail {

namespace {

// The state word is a plain 32-bit futex word: blocked joiners sleep on it
// with atomics::futex_wait_until (FUTEX_WAIT_BITSET: an absolute
// CLOCK_MONOTONIC deadline, or none) and complete() wakes them all with
// atomics::futex_wake_all. (std::atomic::wait has no timeout, and its notify
// may skip the syscall for waiters it did not register.)

std::int64_t steady_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool join_state_base::complete(outcome result) noexcept {
  // A cancel registered before this RMW (request_cancel() returned true)
  // decides the outcome even if the task ran to its end: both RMWs are on
  // this word, so exactly one of them sees the other, and "cancel() returned
  // true" always means "get() throws task_cancelled".
  std::uint32_t previous = word_.load(atomics::relaxed);
  std::uint32_t decided = 0;
  do {
    decided = (previous & cancel_bit) != 0 ? static_cast<std::uint32_t>(outcome::cancelled)
                                           : static_cast<std::uint32_t>(result);
    // acq_rel: release publishes the value/exception written before; acquire
    // pairs with set_continuation()'s release so the continuation is
    // readable, and with detach_and_release()'s and request_cancel()'s
    // fetch_or. A failed CAS only retries with the value it read.
  } while (!word_.compare_exchange_weak(previous, previous | decided, atomics::acq_rel,
                                        atomics::relaxed));
  if ((previous & blocked_bit) != 0) {
    atomics::futex_wake_all(word_);
  }
  if ((previous & continuation_bit) != 0) {
    const continuation next = continuation_;
    if (next.resume == nullptr) {
      // A waiting task of this task's executor (set_waiting_task; its
      // release CAS published task_core_ and the id, and this fetch_or's
      // acquire pairs with it): the task itself may already have run (a
      // spurious wake saw ready()).
      task_core_->schedule(std::bit_cast<task_id>(next.context));
    } else {
      next.resume(next.context);
    }
  }
  return (previous & (detached_bit | continuation_bit)) == detached_bit;
}

void join_state_base::complete_with_error(const scheduler& core) noexcept {
  // A cancelled task's outcome was given up by whoever cancelled it (a
  // running task that throws before its next suspension point): kept in
  // the record for a joiner, never reported.
  if (complete(outcome::error) && !cancel_requested()) {
    // Only the task's reference is left: nobody else reads error_ now.
    core.report_detached_exception(std::exchange(error_, nullptr));
  }
}

void join_state_base::detach_and_release() noexcept {
  // acquire: an outcome already set means complete() has run its RMW and
  // decided (it reads the detached bit only there): nothing to tell it.
  if ((word_.load(atomics::acquire) & outcome_mask) == 0) {
    // acq_rel: pairs with complete()'s fetch_or; whichever RMW comes second
    // sees the other's bit, so complete() reports the error exactly when
    // the handle was gone before the outcome was published.
    word_.fetch_or(detached_bit, atomics::acq_rel);
  }
  release_ref();
}

bool join_state_base::set_continuation(continuation next) noexcept {
  continuation_ = next;
  // acquire: if the outcome is already set, the result written before
  // complete()'s release is visible to the caller that then reads it.
  std::uint32_t word = word_.load(atomics::acquire);
  while ((word & outcome_mask) == 0) {
    // release: publishes continuation_ to complete(); pairs with its acq_rel.
    if (word_.compare_exchange_weak(word, word | continuation_bit, atomics::acq_rel,
                                    atomics::acquire)) {
      return true;
    }
  }
  return false;
}

bool join_state_base::set_waiting_task(task_id waiter) noexcept {
  static_assert(sizeof(task_id) == sizeof(void*), "a task id travels in continuation::context");
  return set_continuation(continuation{nullptr, std::bit_cast<void*>(waiter)});
}

void join_state_base::wait_blocking() noexcept { wait_blocking_until(-1); }

bool join_state_base::wait_blocking_until(std::int64_t steady_deadline_ns) noexcept {
  // task_core_ is alive while the outcome is pending (shutdown ends every
  // task before the executor goes). A host-driven executor runs its tasks
  // only on a thread that drives it: the joiner becomes that thread, or
  // waits for the thread that is; a joiner that drives it hands the role
  // back when its own wait ends, so this one tries again every
  // host_role_retry until its outcome is set.
  while (!ready() && task_core_ != nullptr) {
    const host_drive drive = task_core_->run_host_until(
        [](const void* state) noexcept {
          return static_cast<const join_state_base*>(state)->ready();
        },
        this, steady_deadline_ns);
    if (drive == host_drive::ran) {
      if (steady_deadline_ns >= 0 && steady_now_ns() >= steady_deadline_ns) {
        return ready();
      }
      continue;  // ready, or shutdown began: the next call says not_needed
    }
    if (drive != host_drive::held_by_joiner) {
      break;
    }
    const std::int64_t retry =
        steady_now_ns() +
        std::chrono::duration_cast<std::chrono::nanoseconds>(scheduler::host_role_retry)
            .count();
    const bool bounded = steady_deadline_ns >= 0 && steady_deadline_ns < retry;
    if (wait_outcome_until(bounded ? steady_deadline_ns : retry)) {
      return true;
    }
    if (bounded) {
      return false;
    }
  }
  return wait_outcome_until(steady_deadline_ns);
}

bool join_state_base::wait_outcome_until(std::int64_t steady_deadline_ns) noexcept {
  timespec deadline{};
  if (steady_deadline_ns >= 0) {
    deadline.tv_sec = static_cast<std::time_t>(steady_deadline_ns / 1'000'000'000);
    deadline.tv_nsec = static_cast<long>(steady_deadline_ns % 1'000'000'000);
  }
  // acquire (here and after each wait): pairs with complete()'s acq_rel
  // fetch_or, so the value or exception is readable once the outcome is seen.
  std::uint32_t word = word_.load(atomics::acquire);
  while ((word & outcome_mask) == 0) {
    if (steady_deadline_ns >= 0 && steady_now_ns() >= steady_deadline_ns) {
      return false;
    }
    if ((word & blocked_bit) == 0) {
      // acquire on failure/success: we re-read the outcome after the CAS.
      if (!word_.compare_exchange_weak(word, word | blocked_bit, atomics::acq_rel,
                                       atomics::acquire)) {
        continue;
      }
      word |= blocked_bit;
    }
    atomics::futex_wait_until(word_, word, steady_deadline_ns >= 0 ? &deadline : nullptr);
    word = word_.load(atomics::acquire);
  }
  return true;
}

bool join_state_base::request_cancel() noexcept {
  // acq_rel: the task body reads the bit with acquire before starting.
  const std::uint32_t previous = word_.fetch_or(cancel_bit, atomics::acq_rel);
  return (previous & outcome_mask) == 0;
}

bool join_state_base::cancel_and_wake() noexcept {
  if (!request_cancel()) {
    return false;
  }
  if (task_core_ != nullptr) {
    task_core_->wake_cancelled(task_);  // stale (already finished) is a no-op
  }
  return true;
}

void report_detached_exception_here(const std::exception_ptr& error) noexcept {
  current_worker()->core->report_detached_exception(error);
}

}  // namespace canopy::detail
