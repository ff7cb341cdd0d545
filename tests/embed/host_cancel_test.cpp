// A task queued for the host (after resume_on_host()) and then cancelled:
// the cancel takes effect when a host next runs (include/canopy/task.hpp,
// "resume_on_host"). Such a task is runnable only on the host thread, so
// until a run_* call (or, with no owned workers, a get() or wait_*() that
// runs the executor's tasks) it stays queued; it is then destroyed on that
// thread without running further, and its handle reports task_cancelled.
#include <doctest/doctest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

#include "coroutine/coroutine.hpp"
#include "fiber/fiber.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::executor_config;
using canopy::task;
using canopy::testing::eventually;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

namespace {

executor_config pool_of(std::size_t workers) {
  executor_config config;
  config.worker_count = workers;
  return config;
}

// The calling thread's id by a system call (a coroutine may move between
// threads; see embed_test.cpp).
long thread_id() { return ::syscall(SYS_gettid); }

struct host_seen {
  std::atomic<bool> queued{false};
  std::atomic<bool> resumed{false};
  std::atomic<long> destroyed_on{0};  // the thread that ran the task's destructors
};

struct records_destruction {
  host_seen* seen;
  ~records_destruction() { seen->destroyed_on = thread_id(); }
};

task<void> goes_to_host(host_seen* seen) {
  records_destruction guard{seen};
  seen->queued = true;
  co_await canopy::resume_on_host();
  seen->resumed = true;
}

}  // namespace

TEST_CASE("owned workers: a task cancelled while queued for the host ends at the host's next run") {
  watchdog guard("cancel of a host-queued task", 30);
  executor pool(pool_of(1));
  for (int kind = 0; kind < 2; ++kind) {
    CAPTURE(kind);
    host_seen seen;
    canopy::join_handle<void> handle;
    if (kind == 0) {
      handle = pool.spawn(goes_to_host(&seen));
    } else {
      handle = pool.spawn(canopy::fiber([&seen] {
        records_destruction on_stack{&seen};
        seen.queued = true;
        canopy::this_fiber::resume_on_host();
        seen.resumed = true;
      }));
    }
    REQUIRE(eventually([&] { return seen.queued.load(); }));
    CHECK(handle.cancel());
    // No host runs: the task is still queued for it, not ended.
    CHECK_FALSE(handle.wait_for(50ms));
    CHECK(seen.destroyed_on.load() == 0);
    pool.run_until_idle();
    REQUIRE(handle.ready());
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
    CHECK_FALSE(seen.resumed.load());                // destroyed, not resumed
    CHECK(seen.destroyed_on.load() == thread_id());  // on the host thread
  }
}

TEST_CASE("no owned workers: get() on a cancelled host-queued task runs it to its cancel") {
  watchdog guard("cancel of a host-queued task, host-driven", 30);
  executor pool(pool_of(0));
  host_seen seen;
  auto handle = pool.spawn(goes_to_host(&seen));
  pool.run_once();  // runs until resume_on_host() queues it for the host
  REQUIRE(seen.queued.load());
  REQUIRE_FALSE(handle.ready());
  CHECK(handle.cancel());
  CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
  CHECK_FALSE(seen.resumed.load());
  CHECK(seen.destroyed_on.load() == thread_id());
}
