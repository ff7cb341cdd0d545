// Edge cases of the executor's public API found by using it from outside,
// through the installed headers only: misuse that must give a clear error
// instead of a crash, and what a task holds released before anyone is told
// it ended.
#include <doctest/doctest.h>

#include <atomic>
#include <canopy/canopy.hpp>
#include <chrono>
#include <stdexcept>
#include <utility>

#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::testing::config_with;
using canopy::testing::watchdog;

namespace {

task<int> seven() { co_return 7; }

}  // namespace

TEST_CASE("co_await of an empty task (default-made, moved from, already awaited) throws "
          "std::invalid_argument in the awaiting task instead of crashing") {
  const watchdog guard("co_await an empty task", 60);
  executor pool(config_with(2));
  CHECK_THROWS_AS(canopy::block_on(pool,
                                   []() -> task<int> {
                                     task<int> empty;
                                     co_return co_await std::move(empty);
                                   }()),
                  std::invalid_argument);
  CHECK_THROWS_AS(canopy::block_on(pool,
                                   []() -> task<int> {
                                     task<int> once = seven();
                                     const int first = co_await once;
                                     co_return first + co_await once;  // already awaited
                                   }()),
                  std::invalid_argument);
  // The awaiting task goes on after catching it.
  CHECK(canopy::block_on(pool, []() -> task<int> {
          task<int> once = seven();
          task<int> taken = std::move(once);
          int value = co_await std::move(taken);
          try {
            value += co_await std::move(once);  // moved from
          } catch (const std::invalid_argument&) {
            value += 100;
          }
          co_return value;
        }()) == 107);
}
