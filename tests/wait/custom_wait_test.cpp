// Custom wait sources (wait/wait_source.hpp): canopy::wait_on in a
// task and canopy::this_fiber::wait_on in a fiber, a spurious wake, a source
// already ready (never armed), and a cancel during the wait (the source is
// disarmed once for its one arm, the waiter's destructors run).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "fiber/fiber.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::testing::config_with;
using canopy::testing::destroy_flag;
using canopy::testing::eventually;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

namespace {

// A custom wait source (wait/wait_source.hpp): a flag set by another
// thread, which then wakes the registered waker. Counts arm/disarm calls.
struct flag_source {
  std::atomic<bool>* flag;
  std::mutex* mutex;
  canopy::waker* registered;
  std::atomic<int>* arms;
  std::atomic<int>* disarms;

  bool ready() const noexcept { return flag->load(std::memory_order_acquire); }
  bool arm(const canopy::waker& wake) {
    const std::lock_guard lock(*mutex);
    if (ready()) {
      return false;
    }
    *registered = wake;
    arms->fetch_add(1);
    return true;
  }
  void disarm() noexcept {
    const std::lock_guard lock(*mutex);
    *registered = canopy::waker();
    disarms->fetch_add(1);
  }
  int result() const { return 99; }
};

struct flag_setter {
  std::atomic<bool> flag{false};
  std::mutex mutex;
  canopy::waker registered;
  std::atomic<int> arms{0};
  std::atomic<int> disarms{0};

  flag_source source() { return {&flag, &mutex, &registered, &arms, &disarms}; }
  void set() {
    canopy::waker to_wake;
    {
      const std::lock_guard lock(mutex);
      flag.store(true, std::memory_order_release);
      to_wake = registered;
    }
    to_wake.wake();
  }
  bool armed() {
    const std::lock_guard lock(mutex);
    return registered.valid();
  }
};

}  // namespace

TEST_CASE("a custom wait source works for tasks and fibers; one disarm per arm, none when ready") {
  watchdog guard("custom waits", 30);
  executor pool(config_with(2));

  flag_setter for_task;
  auto waiting_task = [&]() -> task<int> {
    flag_source source = for_task.source();
    canopy::current_waker().wake();  // a stale/spurious wake must not end the wait
    co_return co_await canopy::wait_on(source);
  };
  auto join_handle = pool.spawn(waiting_task());
  REQUIRE(eventually([&] { return for_task.armed(); }));
  CHECK_FALSE(join_handle.wait_for(20ms));
  for_task.set();
  CHECK(join_handle.get() == 99);
  CHECK(for_task.arms.load() == 1);
  CHECK(for_task.disarms.load() == 1);

  flag_setter for_fiber;
  auto fiber_handle = pool.spawn(canopy::fiber([&] {
    flag_source source = for_fiber.source();
    return canopy::this_fiber::wait_on(source);
  }));
  REQUIRE(eventually([&] { return for_fiber.armed(); }));
  for_fiber.set();
  CHECK(fiber_handle.get() == 99);
  CHECK(for_fiber.disarms.load() == for_fiber.arms.load());

  flag_setter already;
  already.set();
  auto ready_task = [&]() -> task<int> {
    flag_source source = already.source();
    co_return co_await canopy::wait_on(source);
  };
  CHECK(pool.spawn(ready_task()).get() == 99);
  CHECK(already.arms.load() == 0);
  CHECK(already.disarms.load() == 0);
}

TEST_CASE("cancelling a task or fiber in a custom wait destroys it and disarms the source") {
  watchdog guard("custom wait cancel", 30);
  executor pool(config_with(1));
  flag_setter for_task;
  std::atomic<int> destroyed{0};
  auto waiting_task = [&]() -> task<int> {
    destroy_flag flag(destroyed);
    flag_source source = for_task.source();
    co_return co_await canopy::wait_on(source);
  };
  auto join_handle = pool.spawn(waiting_task());
  REQUIRE(eventually([&] { return for_task.armed(); }));
  CHECK(join_handle.cancel());
  CHECK_THROWS_AS(join_handle.get(), canopy::task_cancelled);
  CHECK(destroyed.load() == 1);
  CHECK(for_task.disarms.load() == 1);
  CHECK_FALSE(for_task.armed());

  flag_setter for_fiber;
  auto fiber_handle = pool.spawn(canopy::fiber([&] {
    destroy_flag flag(destroyed);
    flag_source source = for_fiber.source();
    return canopy::this_fiber::wait_on(source);
  }));
  REQUIRE(eventually([&] { return for_fiber.armed(); }));
  canopy::join_handle<int> as_base = std::move(fiber_handle);
  CHECK(as_base.cancel());
  CHECK_THROWS_AS(as_base.get(), canopy::task_cancelled);
  CHECK(destroyed.load() == 2);
  CHECK(for_fiber.disarms.load() == 1);
}

namespace {

// A result with a vector and an error_code: the shape whose co_return after
// a custom wait Clang 19 at -O2 lost when return_value was inlined.
struct lookup_result {
  std::vector<int> values;
  std::error_code error;
};

struct late_source_state {
  std::mutex mutex;
  canopy::waker waiter;
  bool done = false;
  lookup_result value;
};

// Completed by another thread after the task suspended on it.
struct late_source {
  late_source_state* state;
  bool ready() noexcept {
    const std::lock_guard lock(state->mutex);
    return state->done;
  }
  bool arm(const canopy::waker& wake) {
    const std::lock_guard lock(state->mutex);
    if (state->done) {
      return false;
    }
    state->waiter = wake;
    return true;
  }
  void disarm() noexcept {
    const std::lock_guard lock(state->mutex);
    state->waiter = canopy::waker();
  }
  lookup_result result() { return std::move(state->value); }
};

task<lookup_result> wait_late(late_source_state* state) {
  late_source source{state};
  co_return co_await canopy::wait_on(source);
}

task<std::size_t> await_late_inline(late_source_state* state) {
  const lookup_result result = co_await wait_late(state);
  co_return result.values.size();
}

task<std::size_t> await_late_spawned(late_source_state* state) {
  const lookup_result result = co_await canopy::spawn(wait_late(state));
  co_return result.values.size();
}

}  // namespace

TEST_CASE("a value co_returned after a custom wait reaches the joiner") {
  const watchdog guard("custom wait value", 60);
  executor pool(config_with(2));
  for (int inline_await = 0; inline_await < 2; ++inline_await) {
    late_source_state state;
    auto handle =
        pool.spawn(inline_await != 0 ? await_late_inline(&state) : await_late_spawned(&state));
    std::thread completer([&state] {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const std::lock_guard lock(state.mutex);
      state.value.values = {1, 2, 3};
      state.value.error = std::make_error_code(std::errc::timed_out);
      state.done = true;
      state.waiter.wake();
    });
    CHECK(handle.get() == 3);
    completer.join();
  }
}
