#include "join_state.hpp"

#include "executor_core.hpp"

namespace canopy {

void join_state_base::complete(outcome result) noexcept {
  // acq_rel: release publishes the value/exception written before; acquire
  // pairs with set_continuation()'s release so the continuation is readable.
  const std::uint32_t previous = word_.fetch_or(static_cast<std::uint32_t>(result), sync::acq_rel);
  if ((previous & blocked_bit) != 0) {
    word_.notify_all();
  }
  if ((previous & continuation_bit) != 0) {
    const continuation next = continuation_;
    if (next.resume == nullptr) {
      // A waiting task: this state stays alive until our owner releases
      // its reference, so reading waiter_ after publishing is safe; the
      // task itself may already have run (a spurious wake saw ready()).
      static_cast<executor_core*>(next.context)->schedule(waiter_);
    } else {
      next.resume(next.context);
    }
  }
}

bool join_state_base::set_continuation(continuation next) noexcept {
  continuation_ = next;
  // acquire: if the outcome is already set, the result written before
  // complete()'s release is visible to the caller that then reads it.
  std::uint32_t word = word_.load(sync::acquire);
  while ((word & outcome_mask) == 0) {
    // release: publishes continuation_ to complete(); pairs with its acq_rel.
    if (word_.compare_exchange_weak(word, word | continuation_bit, sync::acq_rel, sync::acquire)) {
      return true;
    }
  }
  return false;
}

bool join_state_base::set_waiting_task(executor_core* core, task_id waiter) noexcept {
  waiter_ = waiter;  // published by set_continuation's release CAS
  return set_continuation(continuation{nullptr, core});
}

void join_state_base::wait_blocking() noexcept {
  // acquire (here and after each wait): pairs with complete()'s acq_rel
  // fetch_or, so the value or exception is readable once the outcome is seen.
  std::uint32_t word = word_.load(sync::acquire);
  while ((word & outcome_mask) == 0) {
    if ((word & blocked_bit) == 0) {
      // acquire on failure/success: we re-read the outcome after the CAS.
      if (!word_.compare_exchange_weak(word, word | blocked_bit, sync::acq_rel, sync::acquire)) {
        continue;
      }
      word |= blocked_bit;
    }
    word_.wait(word, sync::acquire);
    word = word_.load(sync::acquire);
  }
}

bool join_state_base::request_cancel() noexcept {
  // acq_rel: the task body reads the bit with acquire before starting.
  const std::uint32_t previous = word_.fetch_or(cancel_bit, sync::acq_rel);
  return (previous & outcome_mask) == 0;
}

}  // namespace canopy
