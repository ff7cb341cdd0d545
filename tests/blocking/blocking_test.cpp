// run_blocking and the blocking pool (include/canopy/blocking.hpp): values and
// exceptions in the coroutine and fiber forms, the worker stays free, the
// pool's maximum (queueing) and queue bound (at_capacity), calls outside a
// task, cancellation while fn runs (the shared call outlives the task),
// shutdown with calls running and queued, idle threads exiting; over
// executors of 1 and 2 workers.
#include <doctest/doctest.h>

#include <atomic>
#include <canopy/blocking.hpp>
#include <canopy/fiber.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::blocking_pool;
using canopy::blocking_pool_config;
using canopy::executor;
using canopy::task;
using canopy::testing::config_with;
using canopy::testing::destroy_flag;
using canopy::testing::eventually;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

namespace {

std::size_t thread_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator("/proc/self/task")) {
    ++count;
  }
  return count;
}

// Blocks its caller until opened (bounded: a test that never opens it fails
// by its own checks, not by a hang).
struct gate {
  std::atomic<bool> open{false};
  bool wait() const {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!open.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    return open.load();
  }
};

blocking_pool_config small_pool(std::size_t threads, std::size_t queued = 0) {
  blocking_pool_config config;
  config.max_threads = threads;
  config.max_queued = queued;
  return config;
}

}  // namespace

TEST_CASE("run_blocking returns fn's value off the workers, in tasks and fibers") {
  watchdog dog("run_blocking value", 30);
  for (std::size_t workers : {1, 2}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    blocking_pool blocking(pool);
    auto coroutine = [&]() -> task<int> {
      const bool on_worker =
          co_await canopy::run_blocking([] { return canopy::detail::current_worker() != nullptr; });
      CHECK_FALSE(on_worker);
      co_return co_await canopy::run_blocking(
          [](std::stop_token token) { return token.stop_requested() ? -1 : 42; });
    };
    CHECK(pool.spawn(coroutine()).get() == 42);
    auto fiber = pool.spawn(canopy::fiber([] {
      return canopy::this_fiber::run_blocking([] { return std::string("from a fiber"); });
    }));
    CHECK(fiber.get() == "from a fiber");
    auto nothing = [&]() -> task<void> { co_await canopy::run_blocking([] {}); };
    pool.spawn(nothing()).get();
    // A call counts as completed just after it woke its task.
    CHECK(eventually([&] { return blocking.stats().completed == 4; }));
  }
}

TEST_CASE("an exception from fn is rethrown at the await (task and fiber)") {
  watchdog dog("run_blocking exception", 30);
  executor pool(config_with(2));
  blocking_pool blocking(pool);
  auto coroutine = []() -> task<int> {
    co_return co_await canopy::run_blocking([]() -> int { throw std::runtime_error("boom"); });
  };
  CHECK_THROWS_WITH_AS(pool.spawn(coroutine()).get(), "boom", std::runtime_error);
  auto fiber = pool.spawn(canopy::fiber([] {
    return canopy::this_fiber::run_blocking([]() -> int { throw std::out_of_range("fiber boom"); });
  }));
  CHECK_THROWS_AS(fiber.get(), std::out_of_range);
}

TEST_CASE("bad input: outside a task, an empty callable, an invalid config, a second pool") {
  watchdog dog("run_blocking bad input", 30);
  CHECK_THROWS_AS((void)canopy::run_blocking([] { return 1; }), std::logic_error);
  CHECK_THROWS_AS(canopy::this_fiber::run_blocking([] { return 1; }), std::logic_error);
  executor pool(config_with(1));
  blocking_pool blocking(pool);
  auto empty = []() -> task<int> {
    co_return co_await canopy::run_blocking(std::function<int()>{});
  };
  CHECK_THROWS_AS(pool.spawn(empty()).get(), std::invalid_argument);
  // A coroutine task calling the fiber form.
  auto wrong_form = []() -> task<int> {
    co_return canopy::this_fiber::run_blocking([] { return 1; });
  };
  CHECK_THROWS_AS(pool.spawn(wrong_form()).get(), std::logic_error);
  CHECK_THROWS_AS(blocking_pool{pool}, std::logic_error);
  executor other(config_with(1));
  CHECK_THROWS_AS((blocking_pool{other, small_pool(0)}), std::invalid_argument);
  blocking_pool_config zero_timeout;
  zero_timeout.idle_timeout = 0ms;
  CHECK_THROWS_AS((blocking_pool{other, zero_timeout}), std::invalid_argument);
}

TEST_CASE("the worker stays free while fn blocks (1 worker)") {
  watchdog dog("run_blocking worker free", 30);
  executor pool(config_with(1));
  blocking_pool blocking(pool);
  gate opened;
  auto waiter = [&]() -> task<bool> {
    co_return co_await canopy::run_blocking([&] { return opened.wait(); });
  };
  auto handle = pool.spawn(waiter());
  // Runs on the only worker while fn blocks on a pool thread; it opens fn's gate.
  auto opener = pool.spawn([&] { opened.open = true; });
  opener.get();
  CHECK(handle.get());
}

TEST_CASE("at the maximum calls queue in order; past max_queued: at_capacity") {
  watchdog dog("run_blocking maximum", 30);
  for (std::size_t workers : {1, 2}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    blocking_pool blocking(pool, small_pool(1, 2));
    gate opened;
    std::mutex order_mutex;
    std::vector<int> order;
    auto call = [&](int index) -> task<int> {
      co_return co_await canopy::run_blocking([&, index] {
        opened.wait();
        const std::lock_guard lock(order_mutex);
        order.push_back(index);
        return index;
      });
    };
    auto first = pool.spawn(call(0));
    REQUIRE(eventually([&] { return blocking.stats().running == 1; }));
    auto second = pool.spawn(call(1));
    REQUIRE(eventually([&] { return blocking.stats().queued == 1; }));
    auto third = pool.spawn(call(2));
    REQUIRE(eventually([&] { return blocking.stats().queued == 2; }));
    auto refused = pool.spawn(call(3));
    try {
      refused.get();
      FAIL("a call past max_queued was accepted");
    } catch (const std::system_error& error) {
      CHECK(error.code() == canopy::errc::at_capacity);
    }
    CHECK(blocking.stats().threads == 1);
    opened.open = true;
    CHECK(first.get() == 0);
    CHECK(second.get() == 1);
    CHECK(third.get() == 2);
    CHECK(order == std::vector<int>{0, 1, 2});
  }
}

TEST_CASE("queued calls whose tasks were cancelled do not count against max_queued") {
  watchdog dog("run_blocking max_queued after cancels", 30);
  executor pool(config_with(2));
  blocking_pool blocking(pool, small_pool(1, 2));
  gate opened;
  std::atomic<int> started{0};
  auto call = [&](int index) -> task<int> {
    co_return co_await canopy::run_blocking([&, index] {
      started.fetch_add(1);
      opened.wait();
      return index;
    });
  };
  auto running = pool.spawn(call(0));
  REQUIRE(eventually([&] { return blocking.stats().running == 1; }));
  // Two calls queue (the bound), then their tasks are cancelled (as a
  // with_timeout over a queued call does): neither will ever start.
  auto first = pool.spawn(call(1));
  REQUIRE(eventually([&] { return blocking.stats().queued == 1; }));
  auto second = pool.spawn(call(2));
  REQUIRE(eventually([&] { return blocking.stats().queued == 2; }));
  CHECK(first.cancel());
  CHECK(second.cancel());
  CHECK_THROWS_AS(first.get(), canopy::task_cancelled);
  CHECK_THROWS_AS(second.get(), canopy::task_cancelled);
  // Nothing waits for a thread now: a new call is queued, not refused.
  auto accepted = pool.spawn(call(3));
  CHECK_FALSE(accepted.wait_for(20ms));  // queued behind the running call
  CHECK(blocking.stats().queued == 1);
  opened.open = true;
  CHECK(running.get() == 0);
  CHECK(accepted.get() == 3);
  CHECK(started.load() == 2);
  CHECK(blocking.stats().dropped == 2);
}

TEST_CASE("cancelling a task while fn runs: stop requested; the task ends only after fn returned") {
  watchdog dog("run_blocking cancel", 60);
  for (std::size_t workers : {1, 2}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    blocking_pool blocking(pool, small_pool(1));
    std::atomic<bool> started{false};
    std::atomic<bool> saw_stop{false};
    std::atomic<bool> frame_alive_at_return{false};
    std::atomic<int> frames_destroyed{0};
    auto call = [&]() -> task<int> {
      destroy_flag flag(frames_destroyed);
      // fn borrows the task's frame (flag): the frame must outlive fn.
      co_return co_await canopy::run_blocking([&](std::stop_token token) {
        started = true;
        const auto limit = std::chrono::steady_clock::now() + 20s;
        while (!token.stop_requested() && std::chrono::steady_clock::now() < limit) {
          std::this_thread::sleep_for(1ms);
        }
        saw_stop = token.stop_requested();
        std::this_thread::sleep_for(50ms);  // the cancelled task waits meanwhile
        frame_alive_at_return = frames_destroyed.load() == 0 && flag.count == &frames_destroyed;
        return 1;
      });
    };
    auto handle = pool.spawn(call());
    REQUIRE(eventually([&] { return started.load(); }));
    // A second call queued behind it, whose task is cancelled too: never
    // runs, and its task ends at once.
    std::atomic<bool> queued_ran{false};
    auto queued = [&]() -> task<int> {
      co_return co_await canopy::run_blocking([&] {
        queued_ran = true;
        return 1;
      });
    };
    auto queued_handle = pool.spawn(queued());
    REQUIRE(eventually([&] { return blocking.stats().queued == 1; }));
    CHECK(handle.cancel());
    CHECK(queued_handle.cancel());
    CHECK_THROWS_AS(queued_handle.get(), canopy::task_cancelled);
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
    CHECK(saw_stop);
    CHECK(frame_alive_at_return);
    CHECK(frames_destroyed == 1);
    REQUIRE(eventually([&] {
      const auto stats = blocking.stats();
      return stats.completed == 1 && stats.dropped == 1 && stats.running == 0;
    }));
    CHECK_FALSE(queued_ran);
  }
}

TEST_CASE("cancelling a fiber while fn runs: it unwinds only after fn returned") {
  watchdog dog("run_blocking fiber cancel", 60);
  executor pool(config_with(2));
  blocking_pool blocking(pool, small_pool(1));
  std::atomic<bool> started{false};
  std::atomic<bool> stack_alive_at_return{false};
  std::atomic<int> unwound{0};
  auto handle = pool.spawn(canopy::fiber([&] {
    destroy_flag flag(unwound);
    return canopy::this_fiber::run_blocking([&](std::stop_token token) {
      started = true;
      const auto limit = std::chrono::steady_clock::now() + 20s;
      while (!token.stop_requested() && std::chrono::steady_clock::now() < limit) {
        std::this_thread::sleep_for(1ms);
      }
      std::this_thread::sleep_for(50ms);
      stack_alive_at_return = unwound.load() == 0 && flag.count == &unwound;
      return 1;
    });
  }));
  REQUIRE(eventually([&] { return started.load(); }));
  CHECK(handle.cancel());
  CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
  CHECK(stack_alive_at_return);
  CHECK(unwound == 1);
}

// The window between a cancel's request and its worker acting on it: the
// only worker is kept busy, so the cancelled task cannot run its cancel
// while the pool thread frees up and takes its queued call.
TEST_CASE("a queued call whose task's cancel is requested never starts, before its worker acts") {
  watchdog dog("run_blocking cancel window", 60);
  for (const bool as_fiber : {false, true}) {
    CAPTURE(as_fiber);
    executor pool(config_with(1));
    blocking_pool blocking(pool, small_pool(1));
    gate first_release;
    gate worker_release;
    std::atomic<bool> first_started{false};
    std::atomic<bool> queued_ran{false};
    std::atomic<bool> worker_busy{false};
    auto first_call = [&]() -> task<int> {
      co_return co_await canopy::run_blocking([&] {
        first_started = true;
        return first_release.wait() ? 1 : 0;
      });
    };
    auto first = pool.spawn(first_call());
    REQUIRE(eventually([&] { return first_started.load(); }));
    auto queued_body = [&] {
      queued_ran = true;
      return 2;
    };
    auto queued_call = [&]() -> task<int> {
      co_return co_await canopy::run_blocking(queued_body);
    };
    canopy::join_handle<int> queued;
    if (as_fiber) {
      queued = pool.spawn(
          canopy::fiber([&] { return canopy::this_fiber::run_blocking(queued_body); }));
    } else {
      queued = pool.spawn(queued_call());
    }
    REQUIRE(eventually([&] { return blocking.stats().queued == 1; }));
    auto busy = pool.spawn([&] {
      worker_busy = true;
      return worker_release.wait();
    });
    REQUIRE(eventually([&] { return worker_busy.load(); }));
    CHECK(queued.cancel());  // requested; the busy worker cannot act on it yet
    first_release.open = true;
    REQUIRE(eventually([&] {
      const auto stats = blocking.stats();
      return stats.queued == 0 && stats.running == 0 && stats.completed + stats.dropped == 2;
    }));
    CHECK_FALSE(queued_ran.load());
    CHECK(blocking.stats().dropped == 1);
    worker_release.open = true;
    CHECK(busy.get());
    CHECK(first.get() == 1);
    CHECK_THROWS_AS(queued.get(), canopy::task_cancelled);
  }
}

TEST_CASE("shutdown: tasks cancelled, running calls waited for, queued calls dropped") {
  watchdog dog("run_blocking shutdown", 30);
  for (std::size_t workers : {1, 2}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    auto blocking = std::make_unique<blocking_pool>(pool, small_pool(1));
    std::atomic<bool> running_ended{false};
    std::atomic<bool> queued_ran{false};
    std::atomic<bool> started{false};
    auto running = [&]() -> task<int> {
      co_return co_await canopy::run_blocking([&](std::stop_token token) {
        started = true;
        while (!token.stop_requested()) {
          std::this_thread::sleep_for(1ms);
        }
        // Its stop comes when the shutdown destroys its task, maybe before
        // the queued call's: the thread it frees must not run that call.
        std::this_thread::sleep_for(20ms);  // still running when shutdown waits
        running_ended = true;
        return 1;
      });
    };
    auto queued = [&]() -> task<int> {
      co_return co_await canopy::run_blocking([&] {
        queued_ran = true;
        return 2;
      });
    };
    auto first = pool.spawn(running());
    REQUIRE(eventually([&] { return started.load(); }));
    auto second = pool.spawn(queued());
    REQUIRE(eventually([&] { return blocking->stats().queued == 1; }));
    blocking->shutdown();  // the executor's shutdown first, then the pool's
    CHECK(running_ended);  // waited for
    CHECK_FALSE(queued_ran);
    CHECK_THROWS_AS(first.get(), canopy::task_cancelled);
    CHECK_THROWS_AS(second.get(), canopy::task_cancelled);
    const auto stats = blocking->stats();
    CHECK(stats.threads == 0);
    CHECK(stats.completed == 1);
    CHECK(stats.dropped == 1);
    CHECK_THROWS_AS(pool.spawn([] {}), canopy::spawn_error);
    blocking.reset();  // idempotent
  }
}

TEST_CASE("idle threads exit after idle_timeout") {
  watchdog dog("run_blocking idle exit", 30);
  executor pool(config_with(2));
  blocking_pool_config config = small_pool(8);
  config.idle_timeout = 50ms;
  blocking_pool blocking(pool, config);
  const std::size_t before = thread_count();
  std::atomic<int> arrived{0};
  auto call = [&]() -> task<int> {
    co_return co_await canopy::run_blocking([&] {
      arrived.fetch_add(1);
      // All four at once: four threads.
      eventually([&] { return arrived.load() >= 4; });
      return 1;
    });
  };
  std::vector<canopy::join_handle<int>> handles;
  for (int i = 0; i < 4; ++i) {
    handles.push_back(pool.spawn(call()));
  }
  int sum = 0;
  for (auto& handle : handles) {
    sum += handle.get();
  }
  CHECK(sum == 4);
  CHECK(blocking.stats().started == 4);
  CHECK(eventually([&] { return blocking.stats().threads == 0; }));
  CHECK(blocking.stats().exited == 4);
  CHECK(eventually([&] { return thread_count() <= before; }));
}

TEST_CASE("an executor with no attached pool uses the process default") {
  watchdog dog("run_blocking default pool", 30);
  executor pool(config_with(1));
  auto call = []() -> task<int> { co_return co_await canopy::run_blocking([] { return 5; }); };
  CHECK(pool.spawn(call()).get() == 5);
  CHECK(&blocking_pool::for_executor(pool.core()) == &blocking_pool::process_default());
  CHECK(eventually([] { return blocking_pool::process_default().stats().completed >= 1; }));
}

TEST_CASE("shutdown while a task's or a fiber's call runs: freed when the call returns, not before") {
  watchdog dog("run_blocking shutdown borrow", 60);
  std::atomic<int> started{0};
  std::atomic<int> alive_at_return{0};
  std::atomic<int> task_released{0};
  std::atomic<int> fiber_released{0};
  // Counts a return at which the frame (or stack) holding `flag` is alive.
  const auto body = [&](std::stop_token token, const destroy_flag& flag) {
    started.fetch_add(1);
    const auto limit = std::chrono::steady_clock::now() + 20s;
    while (!token.stop_requested() && std::chrono::steady_clock::now() < limit) {
      std::this_thread::sleep_for(1ms);
    }
    std::this_thread::sleep_for(50ms);  // the shutdown goes on meanwhile
    if (flag.count->load() == 0) {
      alive_at_return.fetch_add(1);
    }
    return 1;
  };
  // Named: the coroutine's captures must outlive its frame.
  const auto waiting_task = [&]() -> task<void> {
    destroy_flag flag(task_released);
    co_await canopy::run_blocking([&](std::stop_token token) { return body(token, flag); });
  };
  {
    executor pool(config_with(2));
    pool.spawn_detached(waiting_task());
    pool.spawn_detached(canopy::fiber([&] {
      destroy_flag flag(fiber_released);
      canopy::this_fiber::run_blocking([&](std::stop_token token) { return body(token, flag); });
    }));
    REQUIRE(eventually([&] { return started.load() == 2; }));
  }  // the executor's shutdown: both tasks destroyed while their calls run
  REQUIRE(eventually([&] { return task_released.load() == 1 && fiber_released.load() == 1; }));
  CHECK(alive_at_return == 2);
}
