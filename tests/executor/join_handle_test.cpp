// Join handles, the same for every task kind (callable, coroutine, fiber):
// timed waits (wait_for / wait_until), a coroutine awaiting another
// executor's handle, and where a detached task's exception goes
// (executor_config::on_detached_exception).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "fiber/fiber.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::async_event;
using canopy::executor;
using canopy::executor_config;
using canopy::task;
using canopy::testing::config_with;
using canopy::testing::destroy_flag;
using canopy::testing::eventually;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

namespace {

// Collects exceptions given to on_detached_exception.
struct detached_errors {
  std::mutex mutex;
  std::vector<std::string> messages;

  executor_config configure(executor_config config) {
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
  std::size_t count() {
    const std::lock_guard lock(mutex);
    return messages.size();
  }
  bool saw(const std::string& text) {
    const std::lock_guard lock(mutex);
    for (const std::string& message : messages) {
      if (message == text) {
        return true;
      }
    }
    return false;
  }
};

}  // namespace

TEST_CASE("wait_for / wait_until on callables, coroutines and fibers; not on a worker thread") {
  watchdog guard("timed waits", 30);
  executor pool(config_with(2));
  async_event go;
  auto callable = pool.spawn([&] {
    while (!go.is_set()) {
      std::this_thread::sleep_for(1ms);
    }
    return 1;
  });
  auto coroutine = pool.spawn([](async_event& event) -> task<int> {
    co_await event;
    co_return 2;
  }(go));
  auto fiber = pool.spawn(canopy::fiber([&] {
    canopy::this_fiber::await(go);
    return 3;
  }));
  CHECK_FALSE(callable.wait_for(10ms));
  CHECK_FALSE(coroutine.wait_until(std::chrono::steady_clock::now() + 10ms));
  CHECK_FALSE(fiber.wait_until(std::chrono::system_clock::now() + 10ms));
  const auto before = std::chrono::steady_clock::now();
  CHECK_FALSE(fiber.wait_for(30ms));
  CHECK(std::chrono::steady_clock::now() - before >= 30ms);
  go.set();
  CHECK(callable.wait_for(10s));
  CHECK(coroutine.wait_for(10s));
  CHECK(fiber.wait_until(std::chrono::steady_clock::now() + 10s));
  CHECK(callable.get() + coroutine.get() + fiber.get() == 6);

  // A handle of another executor, waited for on a worker thread: the same
  // worker_thread error as for the worker's own executor, and the message
  // does not claim it is the same executor.
  executor other(config_with(1));
  auto foreign_handle = other.spawn([] { return 1; });
  auto tries_to_block = pool.spawn([&] {
    try {
      static_cast<void>(foreign_handle.wait_for(1ms));
    } catch (const std::system_error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  });
  const std::string message = tries_to_block.get();
  CHECK(message.find("worker thread of a canopy executor") != std::string::npos);
  CHECK(message.find("same executor") == std::string::npos);
  CHECK(foreign_handle.get() == 1);
}

TEST_CASE("a coroutine awaits another executor's task and resumes on its own executor") {
  watchdog guard("cross-executor resume", 30);
  executor other(config_with(1));
  executor own(config_with(1));
  auto body = [&]() -> task<bool> {
    const int value = co_await other.spawn([] { return 7; });
    co_return value == 7 && own.core().is_worker_thread();
  };
  CHECK(canopy::block_on(own, body()));
}

TEST_CASE("a task awaiting another executor's task leaves nothing behind when its executor goes") {
  watchdog guard("cross-executor await", 30);
  executor other(config_with(1));
  std::atomic<bool> child_done{false};
  std::atomic<int> frames_destroyed{0};
  {
    executor own(config_with(1));
    auto waiter = [&]() -> task<void> {
      destroy_flag flag(frames_destroyed);
      co_await other.spawn([&] {
        std::this_thread::sleep_for(150ms);
        child_done = true;
      });
    };
    own.spawn(waiter()).detach();
    // Usually the waiter is suspended on the other executor by now; if it has
    // not started, shutdown's drain runs it up to that suspension first.
    std::this_thread::sleep_for(30ms);
  }  // `own` is destroyed here, its waiting task with it
  REQUIRE(eventually([&] { return child_done.load(); }));
  // The child's completion must not call into the destroyed executor (it
  // crashed, or ASan reported a use-after-free, before issue 19's fix); the
  // waiter's frame, handed to the child's completion, is freed there.
  CHECK(eventually([&] { return frames_destroyed.load() == 1; }));
  CHECK(other.spawn([] { return 5; }).get() == 5);
}

TEST_CASE("every detached task's exception reaches on_detached_exception, a joined one does not") {
  watchdog guard("detached exceptions", 30);
  detached_errors errors;
  {
    executor pool(errors.configure(config_with(2)));
    async_event go;
    auto thrower = [](async_event& event, std::string text) -> task<void> {
      co_await event;
      throw std::runtime_error(text);
    };
    pool.spawn_detached(thrower(go, "member spawn_detached"));  // silently dropped before
    pool.spawn_detached(thrower(go, "free spawn_detached"));
    pool.spawn(thrower(go, "handle dropped")).detach();
    pool.spawn(canopy::fiber([&] {
          canopy::this_fiber::await(go);
          throw std::runtime_error("fiber handle dropped");  // lost before
        }))
        .detach();
    pool.spawn_detached(canopy::fiber([&] {
      canopy::this_fiber::await(go);
      throw std::runtime_error("fiber detached");
    }));
    auto joined = pool.spawn(thrower(go, "joined"));
    go.set();
    CHECK_THROWS_WITH(joined.get(), "joined");
    REQUIRE(eventually([&] { return errors.count() == 5; }));
  }
  CHECK(errors.saw("member spawn_detached"));
  CHECK(errors.saw("free spawn_detached"));
  CHECK(errors.saw("handle dropped"));
  CHECK(errors.saw("fiber handle dropped"));
  CHECK(errors.saw("fiber detached"));
  CHECK_FALSE(errors.saw("joined"));
}
