// The README's executor promises that executor_api_test does not cover,
// through the public headers only: executor_config's ranges (each field
// named), the trace file loading as JSON, stats()' live_tasks, capacity and
// the counters a cancel and a shutdown move, and a null function pointer or
// empty std::function refused by every spawn verb.
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <canopy/canopy.hpp>
#include <canopy/fiber.hpp>
#include <canopy/sync.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::async_event;
using canopy::executor;
using canopy::executor_config;
using canopy::task;
using canopy::testing::config_with;
using canopy::testing::eventually;
using canopy::testing::watchdog;

namespace {

// Checks that constructing an executor with `config` throws
// std::invalid_argument whose message names `field`.
void check_refused(const executor_config& config, const std::string& field) {
  INFO("field: ", field);
  bool thrown = false;
  try {
    executor pool(config);
  } catch (const std::invalid_argument& error) {
    thrown = true;
    INFO("message: ", error.what());
    CHECK(std::string(error.what()).find(field) != std::string::npos);
  }
  CHECK(thrown);
}

task<int> wait_counted(async_event& event, std::atomic<int>& started) {
  started.fetch_add(1, std::memory_order_relaxed);
  co_await event;
  co_return 1;
}

}  // namespace

TEST_CASE("executor_config: every documented range is checked, the field named") {
  watchdog dog("executor_config ranges", 60);
  auto base = [] { return config_with(1); };
  executor_config config = base();
  config.worker_count = executor_config::max_worker_count + 1;
  check_refused(config, "worker_count");
  for (std::size_t bad : {std::size_t{0}, std::size_t{3}, std::size_t{128}}) {
    config = base();
    config.signals_per_leaf = bad;
    check_refused(config, "signals_per_leaf");
  }
  config = base();
  config.max_leaves = 0;
  check_refused(config, "max_leaves");
  config = base();
  config.max_leaves = executor_config::max_leaf_limit + 1;
  check_refused(config, "max_leaves");
  config = config_with(4);
  config.max_leaves = 2;  // "at least worker_count"
  check_refused(config, "max_leaves");
  config = base();
  config.idle_yield_rounds = 100'001;
  check_refused(config, "idle_yield_rounds");
  for (std::uint32_t bad : {0u, 1'000'001u}) {
    config = base();
    config.driver_poll_interval = bad;
    check_refused(config, "driver_poll_interval");
  }
  for (std::size_t bad :
       {executor_config::min_trace_events - 1, executor_config::max_trace_events + 1}) {
    config = base();
    config.trace_events_per_worker = bad;
    check_refused(config, "trace_events_per_worker");
  }
  config = base();
  config.pin_workers = true;
  config.worker_cpus = {1 << 20};  // no process may use CPU 1048576
  check_refused(config, "worker_cpus");
  config.worker_count = 0;  // no worker to pin, but the list is still checked
  check_refused(config, "worker_cpus");
  config.worker_cpus = {-1};
  check_refused(config, "worker_cpus");
  // The edges of each range are accepted.
  config = base();
  config.signals_per_leaf = 1;
  config.max_leaves = 1;
  config.idle_yield_rounds = 100'000;
  config.driver_poll_interval = 1'000'000;
  config.trace_events_per_worker = executor_config::min_trace_events;
  executor edges(config);
  CHECK(edges.spawn([] { return 7; }).get() == 7);
}

TEST_CASE("trace_path: shutdown writes JSON that loads, and an SVG beside it") {
  watchdog dog("trace file", 60);
  const std::string path = "/tmp/canopy_readme_trace_" + std::to_string(::getpid()) + ".json";
  const std::string svg = path.substr(0, path.size() - 5) + ".svg";
  std::remove(path.c_str());
  std::remove(svg.c_str());
  {
    executor_config config = config_with(2);
    config.trace_path = path;
    executor pool(config);
    std::vector<canopy::join_handle<int>> handles;
    for (int i = 0; i < 200; ++i) handles.push_back(pool.spawn([i] { return i; }));
    for (auto& each : handles) (void)each.get();
    pool.shutdown();
  }
  const std::string check = "python3 -m json.tool " + path + " > /dev/null";
  CHECK(std::system(check.c_str()) == 0);
  std::ifstream image(svg);
  CHECK(image.good());
  std::string head;
  std::getline(image, head);
  CHECK(head.find("<") != std::string::npos);
  std::remove(path.c_str());
  std::remove(svg.c_str());
}

TEST_CASE(
    "stats(): live_tasks, capacity; a cancel counts as finished, shutdown's leftovers as dropped") {
  watchdog dog("stats", 60);
  executor pool(config_with(2));
  CHECK(pool.stats().capacity == pool.capacity());
  async_event never;
  std::atomic<int> started{0};
  auto cancelled = pool.spawn(wait_counted(never, started));
  auto left = pool.spawn(wait_counted(never, started));
  REQUIRE(eventually([&] { return started.load() == 2; }));
  CHECK(pool.stats().live_tasks == 2);
  CHECK(cancelled.cancel());
  CHECK(eventually([&] { return pool.stats().live_tasks == 1; }));
  CHECK(pool.stats().total().finished == 1);
  CHECK(pool.stats().dropped_tasks == 0);
  pool.shutdown();
  const canopy::executor_stats after = pool.stats();
  CHECK(after.live_tasks == 0);
  CHECK(after.dropped_tasks == 1);
  CHECK(after.total().finished == 1);
  CHECK_THROWS_AS((void)left.get(), canopy::task_cancelled);
}

TEST_CASE("a null function pointer or an empty std::function is refused by every spawn verb") {
  // Before, a null pointer crashed the worker that called it (SIGSEGV) and
  // an empty std::function failed only at get() with bad_function_call.
  watchdog dog("empty callables", 60);
  executor pool(config_with(1));
  using pointer = int (*)();
  const auto refused = [](auto&& spawn_it) {
    try {
      spawn_it();
    } catch (const std::invalid_argument& error) {
      return std::string(error.what()).find("empty callable") != std::string::npos;
    }
    return false;
  };
  CHECK(refused([&] { (void)pool.spawn(pointer{}); }));
  CHECK(refused([&] { (void)pool.spawn(std::function<int()>{}); }));
  CHECK(refused([&] { (void)pool.try_spawn(pointer{}); }));
  CHECK(refused([&] { pool.spawn_detached(std::function<void()>{}); }));
  CHECK(refused([&] { pool.post(static_cast<void (*)()>(nullptr)); }));
  CHECK(refused([&] { (void)pool.spawn(canopy::fiber(pointer{})); }));
  CHECK(refused([&] { (void)pool.spawn(canopy::fiber(std::function<int()>{})); }));
  // Fork-join: from outside and inside a task, join and parallel_invoke.
  const auto one = [] { return 1; };
  CHECK(refused([&] { (void)canopy::join(pool, pointer{}, one); }));
  CHECK(refused([&] { (void)canopy::parallel_invoke(pool, one, std::function<int()>{}); }));
  CHECK(pool.spawn([&refused, one] {
              return refused([&] { (void)canopy::join(one, pointer{}); }) &&
                     refused([&] { (void)canopy::parallel_invoke(std::function<int()>{}, one); });
            })
            .get());
  CHECK(pool.spawn(std::function<int()>([] { return 6; })).get() == 6);  // a full one runs
  CHECK(eventually([&] { return pool.stats().live_tasks == 0; }));       // nothing refused was left
}
