// join_state (executor/join_state.hpp): the completion record shared by a
// task and its handle, driven directly: outcomes and take(), the two
// references, the detached / continuation / cancel bits, the blocking wait
// with and without a deadline, and complete_with_error's rule for
// on_detached_exception (reported only when detached and not cancelled).
#include "executor/join_state.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "executor/executor.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::detail::join_state_base;
using outcome = canopy::detail::join_state_base::outcome;
using namespace std::chrono_literals;

namespace {

// A record that counts its destruction (the last release_ref's delete).
template <class T>
class counted_state final : public canopy::detail::join_state<T> {
 public:
  explicit counted_state(std::atomic<int>& destroyed) : destroyed_(&destroyed) {}
  counted_state(const counted_state&) = delete;
  counted_state& operator=(const counted_state&) = delete;
  ~counted_state() override { destroyed_->fetch_add(1); }

 private:
  std::atomic<int>* destroyed_;
};

std::int64_t steady_ns_after(std::chrono::nanoseconds delay) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             (std::chrono::steady_clock::now() + delay).time_since_epoch())
      .count();
}

// Counts each run of a continuation.
void count_run(void* context) noexcept { static_cast<std::atomic<int>*>(context)->fetch_add(1); }

// Collects what reaches on_detached_exception.
struct detached_log {
  std::mutex mutex;
  std::vector<std::string> messages;

  canopy::executor_config configure() {
    canopy::executor_config config = canopy::testing::config_with(0);  // no threads
    config.on_detached_exception = [this](std::exception_ptr error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& failure) {
        const std::lock_guard lock(mutex);
        messages.emplace_back(failure.what());
      }
    };
    return config;
  }
  std::vector<std::string> seen() {
    const std::lock_guard lock(mutex);
    return messages;
  }
};

}  // namespace

TEST_CASE("join_state: a value outcome is set once, taken by the joiner; two references") {
  std::atomic<int> destroyed{0};
  auto* state = new counted_state<int>(destroyed);
  CHECK(state->status() == outcome::pending);
  CHECK_FALSE(state->ready());
  CHECK_FALSE(state->cancel_requested());
  state->set_value(42);
  CHECK_FALSE(state->ready());                   // the value alone publishes nothing
  CHECK_FALSE(state->complete(outcome::value));  // not detached
  CHECK(state->ready());
  CHECK(state->status() == outcome::value);
  CHECK(state->take() == 42);
  state->release_ref();  // the task's reference
  CHECK(destroyed.load() == 0);
  state->release_ref();  // the handle's: the last one
  CHECK(destroyed.load() == 1);

  // add_ref makes a third owner: the record outlives two releases.
  auto* shared = new counted_state<void>(destroyed);
  shared->add_ref();
  CHECK_FALSE(shared->complete(outcome::value));
  shared->take();
  shared->release_ref();
  shared->release_ref();
  CHECK(destroyed.load() == 1);
  shared->release_ref();
  CHECK(destroyed.load() == 2);
}

TEST_CASE("join_state: take rethrows the task's exception, or throws task_cancelled") {
  std::atomic<int> destroyed{0};
  auto* failed = new counted_state<int>(destroyed);
  failed->set_error(std::make_exception_ptr(std::runtime_error("task failed")));
  CHECK_FALSE(failed->complete(outcome::error));
  CHECK(failed->status() == outcome::error);
  CHECK_THROWS_WITH_AS(failed->take(), "task failed", std::runtime_error);
  failed->release_ref();
  failed->release_ref();

  auto* cancelled = new counted_state<void>(destroyed);
  CHECK(cancelled->request_cancel());
  CHECK(cancelled->status() == outcome::pending);  // a request is not an outcome
  CHECK_FALSE(cancelled->complete(outcome::cancelled));
  CHECK(cancelled->status() == outcome::cancelled);
  CHECK_THROWS_AS(cancelled->take(), canopy::task_cancelled);
  cancelled->release_ref();
  cancelled->release_ref();
  CHECK(destroyed.load() == 2);
}

TEST_CASE("join_state: complete reports a detach only when the handle went first, unawaited") {
  std::atomic<int> destroyed{0};
  SUBCASE("detached before completion: complete says so") {
    auto* state = new counted_state<int>(destroyed);
    state->detach_and_release();  // the handle's reference goes with it
    CHECK(destroyed.load() == 0);
    CHECK(state->complete(outcome::error));
    state->release_ref();
  }
  SUBCASE("detached after completion: complete had nothing to report") {
    auto* state = new counted_state<int>(destroyed);
    state->set_value(1);
    CHECK_FALSE(state->complete(outcome::value));
    state->detach_and_release();
    CHECK(destroyed.load() == 0);
    state->release_ref();
  }
  SUBCASE("detached with a continuation registered: its awaiter reads the outcome") {
    std::atomic<int> runs{0};
    auto* state = new counted_state<int>(destroyed);
    CHECK(state->set_continuation({&count_run, &runs}));
    state->detach_and_release();
    CHECK_FALSE(state->complete(outcome::error));
    CHECK(runs.load() == 1);
    state->release_ref();
  }
  CHECK(destroyed.load() == 1);
}

TEST_CASE("join_state: a continuation registered while pending runs once, at completion") {
  std::atomic<int> destroyed{0};
  std::atomic<int> runs{0};
  auto* state = new counted_state<int>(destroyed);
  CHECK(state->set_continuation({&count_run, &runs}));
  CHECK(runs.load() == 0);
  state->set_value(3);
  CHECK_FALSE(state->complete(outcome::value));
  CHECK(runs.load() == 1);
  // After completion nothing is registered (the caller must not suspend),
  // and nothing runs.
  std::atomic<int> late_runs{0};
  CHECK_FALSE(state->set_continuation({&count_run, &late_runs}));
  CHECK(late_runs.load() == 0);
  CHECK(runs.load() == 1);
  CHECK(state->take() == 3);
  state->release_ref();
  state->release_ref();
  CHECK(destroyed.load() == 1);
}

TEST_CASE("join_state: a cancel request counts only before completion") {
  std::atomic<int> destroyed{0};
  auto* early = new counted_state<int>(destroyed);
  CHECK(early->request_cancel());
  CHECK(early->cancel_requested());
  CHECK(early->request_cancel());  // asking twice is still registered
  // No task recorded (set_task): cancel_and_wake has nothing to wake but
  // still registers the request.
  CHECK(early->cancel_and_wake());
  CHECK_FALSE(early->complete(outcome::cancelled));
  early->release_ref();
  early->release_ref();

  auto* late = new counted_state<int>(destroyed);
  late->set_value(5);
  CHECK_FALSE(late->complete(outcome::value));
  CHECK_FALSE(late->request_cancel());
  CHECK_FALSE(late->cancel_and_wake());
  CHECK(late->status() == outcome::value);  // the outcome stands
  CHECK(late->take() == 5);
  late->release_ref();
  late->release_ref();
  CHECK(destroyed.load() == 2);
}

TEST_CASE("join_state: wait_blocking_until gives up at its deadline, returns once completed") {
  canopy::testing::watchdog guard("join_state waits", 60);
  std::atomic<int> destroyed{0};
  auto* state = new counted_state<int>(destroyed);

  // Nobody completes it: false, and not before the deadline.
  const auto before = std::chrono::steady_clock::now();
  CHECK_FALSE(state->wait_blocking_until(steady_ns_after(30ms)));
  CHECK(std::chrono::steady_clock::now() - before >= 30ms);
  // A deadline already past: false at once.
  CHECK_FALSE(state->wait_blocking_until(steady_ns_after(-1s)));
  CHECK_FALSE(state->wait_blocking_until(0));
  CHECK_FALSE(state->ready());

  // Completed by another thread while this one sleeps in the wait.
  std::thread completer([&] {
    std::this_thread::sleep_for(20ms);
    state->set_value(9);
    static_cast<void>(state->complete(outcome::value));
  });
  const auto far = std::chrono::seconds(static_cast<long>(60 * canopy::testing::timeout_scale()));
  CHECK(state->wait_blocking_until(steady_ns_after(far)));
  completer.join();
  CHECK(state->ready());
  CHECK(state->take() == 9);
  // Already completed: true at once, whatever the deadline.
  CHECK(state->wait_blocking_until(0));
  state->release_ref();
  state->release_ref();

  // wait_blocking (no deadline) returns once another thread completes.
  auto* unbounded = new counted_state<void>(destroyed);
  std::thread finisher([&] {
    std::this_thread::sleep_for(10ms);
    static_cast<void>(unbounded->complete(outcome::value));
  });
  unbounded->wait_blocking();
  CHECK(unbounded->status() == outcome::value);
  finisher.join();
  unbounded->release_ref();
  unbounded->release_ref();
  CHECK(destroyed.load() == 2);
}

TEST_CASE("join_state: many joiners blocked on one record all return at completion") {
  canopy::testing::watchdog guard("join_state joiners", 60);
  std::atomic<int> destroyed{0};
  auto* state = new counted_state<int>(destroyed);
  std::atomic<int> returned{0};
  std::vector<std::thread> joiners;
  for (int index = 0; index < 4; ++index) {
    joiners.emplace_back([&] {
      state->wait_blocking();
      if (state->status() == outcome::value) {
        returned.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(10ms);  // most likely all asleep in the futex by now
  CHECK(returned.load() == 0);
  state->set_value(1);
  static_cast<void>(state->complete(outcome::value));
  for (auto& joiner : joiners) {
    joiner.join();
  }
  CHECK(returned.load() == 4);
  state->release_ref();
  state->release_ref();
  CHECK(destroyed.load() == 1);
}

TEST_CASE(
    "complete_with_error reports to on_detached_exception only when detached, not cancelled") {
  detached_log log;
  canopy::executor pool(log.configure());
  canopy::detail::scheduler& core = pool.core();
  std::atomic<int> destroyed{0};
  const auto failing = [&](const char* text) {
    auto* state = new counted_state<int>(destroyed);
    state->set_error(std::make_exception_ptr(std::runtime_error(text)));
    return state;
  };

  // Joined: the joiner gets the exception; nothing is reported.
  auto* joined = failing("joined");
  joined->complete_with_error(core);
  CHECK(joined->status() == outcome::error);
  CHECK_THROWS_WITH(joined->take(), "joined");
  joined->release_ref();
  joined->release_ref();

  // Detached, not cancelled: reported, once.
  auto* detached = failing("detached");
  detached->detach_and_release();
  detached->complete_with_error(core);
  detached->release_ref();

  // Detached after a cancel request (the canceller gave the outcome up):
  // never reported.
  auto* cancelled_detached = failing("cancelled and detached");
  CHECK(cancelled_detached->request_cancel());
  cancelled_detached->detach_and_release();
  cancelled_detached->complete_with_error(core);
  cancelled_detached->release_ref();

  // Cancelled but still held: not reported, and the cancel decides the
  // outcome (cancel() answered true, so the joiner gets task_cancelled).
  auto* cancelled_held = failing("cancelled, held");
  CHECK(cancelled_held->request_cancel());
  cancelled_held->complete_with_error(core);
  CHECK(cancelled_held->status() == outcome::cancelled);
  CHECK_THROWS_AS(cancelled_held->take(), canopy::task_cancelled);
  cancelled_held->release_ref();
  cancelled_held->release_ref();

  // Detached while an awaiter is registered: the awaiter reads it.
  std::atomic<int> runs{0};
  auto* awaited = failing("awaited");
  CHECK(awaited->set_continuation({&count_run, &runs}));
  awaited->detach_and_release();
  awaited->complete_with_error(core);
  CHECK(runs.load() == 1);
  awaited->release_ref();

  const std::vector<std::string> seen = log.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen.front() == "detached");
  CHECK(destroyed.load() == 5);
}
