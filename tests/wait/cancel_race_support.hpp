// The cancel races' shared machinery (tests/wait/cancel_race_test.cpp: the
// wait kinds without a reactor, run once; tests/io/io_cancel_race_test.cpp:
// timers, with_timeout and readiness, run on each I/O backend): a racer
// thread that releases both halves of a race together, the bounded wait
// for a task to reach its wait, the count of ended frames, how a raced task
// ended, the round count, and the round loop of a fire-against-cancel race.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <thread>
#include <utility>

#include "coroutine/coroutine.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

namespace canopy::testing {

// A second thread that runs one job per round, released together with the
// caller's own half of the race (a spin on a shared round counter, so that
// both halves start within a few hundred nanoseconds of each other).
class racer {
 public:
  racer() : thread_([this] { loop(); }) {}
  racer(const racer&) = delete;
  racer& operator=(const racer&) = delete;
  ~racer() {
    stop_.store(true, std::memory_order_release);
    thread_.join();
  }

  // Run `theirs` on the racer and `ours` here, at the same moment; return
  // when both are done.
  void race(std::function<void()> theirs, const std::function<void()>& ours) {
    job_ = std::move(theirs);
    const int round = round_.load(std::memory_order_relaxed) + 1;
    round_.store(round, std::memory_order_release);  // publishes job_
    ours();
    while (done_.load(std::memory_order_acquire) != round) {
      std::this_thread::yield();
    }
  }

 private:
  void loop() {
    int seen = 0;
    while (!stop_.load(std::memory_order_acquire)) {
      const int round = round_.load(std::memory_order_acquire);
      if (round == seen) {
        std::this_thread::yield();
        continue;
      }
      seen = round;
      job_();
      done_.store(round, std::memory_order_release);
    }
  }

  std::function<void()> job_;
  std::atomic<int> round_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Spin until `flag` is set (the task reached its wait), bounded.
inline bool reached(const std::atomic<bool>& flag) {
  // A round's task usually sets the flag within microseconds: yield for a
  // while before eventually()'s naps of a millisecond, which would otherwise
  // set the pace of every round.
  for (int spin = 0; spin < 2000; ++spin) {
    if (flag.load(std::memory_order_acquire)) {
      return true;
    }
    std::this_thread::yield();
  }
  return eventually([&] { return flag.load(std::memory_order_acquire); });
}

// Counts the end of the coroutine frame or fiber callable that holds it (a
// parameter or a capture; a moved-from one counts nothing), so that a task
// cancelled before it started, whose body never ran, is counted too.
class end_counter {
 public:
  explicit end_counter(std::atomic<int>& count) noexcept : count_(&count) {}
  end_counter(end_counter&& other) noexcept : count_(std::exchange(other.count_, nullptr)) {}
  end_counter(const end_counter&) = delete;
  end_counter& operator=(const end_counter&) = delete;
  end_counter& operator=(end_counter&&) = delete;
  ~end_counter() {
    if (count_ != nullptr) {
      count_->fetch_add(1);
    }
  }

 private:
  std::atomic<int>* count_;
};

// How one raced task ended: 1 with its value, 0 cancelled.
template <class Handle>
int outcome_of(Handle& handle, int expected) {
  try {
    const int value = handle.get();
    CHECK(value == expected);
    return 1;
  } catch (const canopy::task_cancelled&) {
    return 0;
  }
}

// Rounds: CANOPY_RACE_ROUNDS overrides (to run the reproductions
// 100,000 times by hand). Otherwise `count`, shrunk by the stress divisor
// but never below 5,000 (or `count` if smaller): the sanitizer runs are the
// ones that see a use-after-free, so they race thousands of times too.
inline long race_round_count(long count) {
  if (const char* forced = std::getenv("CANOPY_RACE_ROUNDS"); forced != nullptr) {
    return std::max(1L, std::atol(forced));
  }
  return std::max(std::min(count, 5000L), std::max(1L, count / stress_divisor()));
}

struct race_counts {
  int finished = 0;
  int cancelled = 0;
};

// `total` rounds: spawn(waiting) starts a task that sets `waiting` just
// before its wait; once it has, fire() runs on the racer thread while this
// thread cancels the task (the other way round every second round). Then
// the task is joined and after() checks what its wait left behind.
template <class Spawn, class Fire, class After>
race_counts race_rounds(racer& other, long total, std::atomic<int>& destroyed, Spawn spawn,
                        Fire fire, After after) {
  race_counts counts;
  const int destroyed_before = destroyed.load();
  for (long round = 0; round < total; ++round) {
    std::atomic<bool> waiting{false};
    auto handle = spawn(waiting);
    REQUIRE(reached(waiting));
    if (round % 2 == 0) {
      other.race([&] { fire(); }, [&] { handle.cancel(); });
    } else {
      other.race([&] { handle.cancel(); }, [&] { fire(); });
    }
    const int ended = outcome_of(handle, 7);
    counts.finished += ended;
    counts.cancelled += 1 - ended;
    after();
  }
  // A fiber whose wait's fire() was already coming is unwound by that
  // fire(), which may finish just after the join returned.
  CHECK(eventually([&] { return destroyed.load() - destroyed_before == total; }));
  return counts;
}

}  // namespace canopy::testing
