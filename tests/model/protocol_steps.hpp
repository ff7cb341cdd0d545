// protocol_steps — the producer's and the searcher's steps of executor_core,
// and the worker loop's idle bookkeeping around them,
// on the real protocol objects, shared by the checkers' worlds
// (model_check_test, model_poller_test, relacy/wake_protocol_relacy).
// Also: whether this is a ThreadSanitizer build (its bounds are lower: TSan
// keeps about a megabyte for each execution's fiber switches).
#pragma once

#include <cstddef>
#include <cstdint>

#include "signal_waker/sleep_module.hpp"
#include "summary_tree/summary_tree.hpp"

namespace canopy::detail::model {

// The protocol's parts are the executor's internals (canopy::detail).
using detail::idle_report;
using detail::idle_state;
using detail::signal_waker;
using detail::sleep_module;
using detail::sleep_probe;
using detail::summary_tree;
using detail::wake_reason;

#if defined(__SANITIZE_THREAD__)
inline constexpr bool under_thread_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool under_thread_sanitizer = true;
#else
inline constexpr bool under_thread_sanitizer = false;
#endif
#else
inline constexpr bool under_thread_sanitizer = false;
#endif

// executor_core::signal_task: make one task runnable, then wake per the
// protocol (the permits the tree granted, else the JEC path).
inline void post_task(summary_tree& tree, sleep_module& sleep, std::size_t leaf, std::size_t signal,
                      unsigned bit) {
  const auto outcome = tree.set_task_bit(leaf, signal, bit);
  if (outcome.upward.wakes_owed != 0) {
    sleep.wake_for_permits(outcome.upward.wakes_owed);
  } else {
    sleep.new_jobs(1);
  }
}

// executor_core::claim_in_leaf behind claim_from_roots' root-bit filter:
// if `leaf`'s root bit is set, claim one task bit in it; permits the claim
// owes go out as wakes. Returns the bit's index within the leaf, or -1.
inline int claim_in_active_leaf(summary_tree& tree, sleep_module& sleep, std::size_t leaf) {
  if ((tree.root_word(leaf / 64) & (std::uint64_t{1} << (leaf % 64))) == 0) {
    return -1;
  }
  summary_tree::activation upward;
  const int index = tree.claim_in_leaf(leaf, upward);
  if (upward.wakes_owed != 0) {
    sleep.wake_for_permits(upward.wakes_owed);
  }
  return index;
}

// One search over every leaf whose root bit is set, the worker's own
// (leaf == worker) first: claims at most one task.
inline bool claim_any_task(summary_tree& tree, sleep_module& sleep, std::size_t worker,
                           std::size_t leaves) {
  for (std::size_t step = 0; step < leaves; ++step) {
    if (claim_in_active_leaf(tree, sleep, (worker + step) % leaves) >= 0) {
      return true;
    }
  }
  return false;
}

// executor_core::worker_main's bookkeeping around a search, one per worker
// thread: the first failed search of an idle period starts it
// (start_looking) and every failed one goes through the idle protocol
// (no_work_found); a claim that ends the period stops the idle count and
// hands a visible backlog on (work_found's chain wake).
class search_steps {
 public:
  void found_work(summary_tree& tree, sleep_module& sleep) {
    if (looking_) {
      static_cast<void>(sleep.work_found([&tree] { return tree.any_active(); }));
      looking_ = false;
    }
  }

  idle_report found_none(sleep_module& sleep, std::size_t worker, sleep_probe& probe) {
    if (!looking_) {
      sleep.start_looking(idle_);
      looking_ = true;
    }
    return sleep.no_work_found(worker, idle_, probe);
  }

 private:
  idle_state idle_;
  bool looking_ = false;
};

}  // namespace canopy::detail::model
