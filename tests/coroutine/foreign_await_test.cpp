// Other libraries' awaitables in a canopy::task (coroutine/foreign_await.hpp):
// whichever way the awaitable resumes the coroutine (from its own thread,
// inline in await_suspend, by declining to suspend, by symmetric transfer),
// the task goes on on its executor; a cancel while the awaitable holds the
// task ends the handle at once and frees the frame when the awaitable lets go.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <thread>

#include "coroutine/coroutine.hpp"
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

// A standard awaitable that is not Canopy's: it resumes the coroutine from a
// thread of its own after a short delay (as a library callback would).
struct resumed_from_thread {
  int value;
  std::thread* resumer;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> handle) {
    *resumer = std::thread([handle] {
      std::this_thread::sleep_for(5ms);
      handle.resume();
    });
  }
  int await_resume() const noexcept { return value; }
};

// Resumes the handle before await_suspend returns, on the same thread.
struct resumed_inline {
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> handle) { handle.resume(); }
  int await_resume() const noexcept { return 3; }
};

// Declines to suspend.
struct declines {
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> /*handle*/) noexcept { return false; }
  int await_resume() const noexcept { return 4; }
};

// Symmetric transfer straight back to the given handle.
struct transfers_back {
  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> handle) noexcept { return handle; }
  int await_resume() const noexcept { return 5; }
};

}  // namespace

TEST_CASE("foreign awaitables resume the task on its executor, however they resume it") {
  watchdog guard("foreign awaitables", 30);
  executor pool(config_with(2));
  std::thread resumer;
  auto body = [&]() -> task<int> {
    int sum = co_await resumed_from_thread{10, &resumer};
    const bool on_worker_after_thread = pool.core().is_worker_thread();
    sum += co_await resumed_inline{};
    sum += co_await declines{};
    sum += co_await transfers_back{};
    const bool on_worker_at_end = pool.core().is_worker_thread();
    co_return on_worker_after_thread&& on_worker_at_end ? sum : -1;
  };
  auto handle = pool.spawn(body());
  REQUIRE(handle.wait_for(10s));  // hung before issue 19: the task finished off the executor
  CHECK(handle.get() == 22);
  resumer.join();
}

TEST_CASE("a task cancelled while a foreign awaitable holds it is freed when that resumes it") {
  watchdog guard("foreign cancel", 30);
  executor pool(config_with(1));
  std::atomic<int> destroyed{0};
  std::coroutine_handle<> parked;
  std::atomic<bool> suspended{false};
  struct hold_handle {
    std::coroutine_handle<>* slot;
    std::atomic<bool>* flag;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> handle) noexcept {
      *slot = handle;
      flag->store(true);
    }
    void await_resume() const noexcept {}
  };
  auto body = [&]() -> task<void> {
    destroy_flag flag(destroyed);
    co_await hold_handle{&parked, &suspended};
  };
  auto handle = pool.spawn(body());
  REQUIRE(eventually([&] { return suspended.load(); }));
  CHECK(handle.cancel());
  CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
  CHECK(destroyed.load() == 0);  // the awaitable still holds the resumer
  parked.resume();               // the foreign side finishes: the frame goes now
  CHECK(eventually([&] { return destroyed.load() == 1; }));
}
