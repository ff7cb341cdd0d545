// Fork-join: canopy::join and canopy::parallel_invoke for plain callables
// (fork_join/join.hpp), and co_await canopy::await_all over many children
// (coroutine/await_all.hpp).
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "coroutine/await_all.hpp"
#include "fork_join/join.hpp"
#include "tests/allocation_counter.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::executor_config;
using canopy::task;
using canopy::testing::config_with;

namespace {

long scaled(long iterations) {
  const long value = iterations / canopy::testing::stress_divisor();
  return value < 1 ? 1 : value;
}

long join_fib(int n) {
  if (n < 2) {
    return n;
  }
  auto [first, second] =
      canopy::join([n] { return join_fib(n - 1); }, [n] { return join_fib(n - 2); });
  return first + second;
}

long plain_fib(int n) { return n < 2 ? n : plain_fib(n - 1) + plain_fib(n - 2); }

// Runs fn() as a task of `pool` and returns its result on this thread.
template <class Fn>
auto on_worker(executor& pool, Fn fn) {
  return pool.spawn(std::move(fn)).get();
}

}  // namespace

TEST_CASE("join on a worker returns both results; void gives std::monostate") {
  canopy::testing::watchdog guard("join on a worker", 60);
  executor pool(config_with(2));
  const auto [number, text] = on_worker(pool, [] {
    return canopy::join([] { return 40 + 2; }, [] { return std::string("forty-two"); });
  });
  CHECK(number == 42);
  CHECK(text == "forty-two");
  std::atomic<int> ran{0};
  const auto both_void = on_worker(pool, [&ran] {
    return canopy::join([&ran] { ran.fetch_add(1); }, [&ran] { ran.fetch_add(10); });
  });
  static_assert(
      std::is_same_v<decltype(both_void), const std::pair<std::monostate, std::monostate>>);
  CHECK(both_void == std::pair<std::monostate, std::monostate>{});
  CHECK(ran.load() == 11);
  // The form that names the executor behaves the same on its own worker.
  const auto named = on_worker(pool, [&pool] {
    return canopy::join(
        pool, [] { return 1; }, [] { return 2; });
  });
  CHECK(named == std::pair<int, int>{1, 2});
}

TEST_CASE("join from outside runs both callables on the pool and blocks until both ended") {
  canopy::testing::watchdog guard("join from outside", 60);
  executor pool(config_with(2));
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> first_on_caller{true};
  std::atomic<bool> second_on_caller{true};
  const auto [a, b] = canopy::join(
      pool,
      [&] {
        first_on_caller = std::this_thread::get_id() == caller;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return 7;
      },
      [&] {
        second_on_caller = std::this_thread::get_id() == caller;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return 8L;
      });
  CHECK(a == 7);
  CHECK(b == 8L);
  CHECK_FALSE(first_on_caller.load());
  CHECK_FALSE(second_on_caller.load());
  CHECK(canopy::join(
            pool, [] { return join_fib(15); }, [] { return join_fib(16); }) ==
        std::pair<long, long>{610, 987});
}

TEST_CASE("join from outside an executor with no workers runs the callables on the caller") {
  canopy::testing::watchdog guard("join without workers", 60);
  executor pool(config_with(0));
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> on_caller{false};
  CHECK(canopy::join(
            pool,
            [&] {
              on_caller = std::this_thread::get_id() == caller;
              return join_fib(15);
            },
            [] { return join_fib(16); }) == std::pair<long, long>{610, 987});
  CHECK(on_caller.load());
  const auto three = canopy::parallel_invoke(
      pool, [] { return 1; }, [] { return join_fib(10); }, [] { return 3; });
  CHECK(three == std::tuple<int, long, int>{1, 55, 3});
}

TEST_CASE("join without an executor, or from another executor's worker, throws") {
  canopy::testing::watchdog guard("join misuse", 60);
  CHECK_THROWS_AS(canopy::join([] { return 1; }, [] { return 2; }), std::logic_error);
  CHECK_THROWS_AS(canopy::parallel_invoke([] {}, [] {}), std::logic_error);
  executor first(config_with(1));
  executor second(config_with(1));
  std::error_code seen;
  on_worker(first, [&] {
    try {
      canopy::join(
          second, [] {}, [] {});
    } catch (const std::system_error& error) {
      seen = error.code();
    }
  });
  CHECK(seen == canopy::errc::worker_thread);
}

// Exceptions are caught on the thread that joined and described as text:
// an exception that leaves a task is handed to another thread by libstdc++'s
// reference count, which ThreadSanitizer does not see (join_state::take).
template <class Fn>
std::string failure_of(Fn fn) {
  try {
    fn();
  } catch (const std::runtime_error& error) {
    return std::string("runtime_error: ") + error.what();
  } catch (const std::logic_error& error) {
    return std::string("logic_error: ") + error.what();
  }
  return "none";
}

TEST_CASE("join rethrows after both ended: f's exception, g's, and f's when both throw") {
  canopy::testing::watchdog guard("join exceptions", 60);
  executor pool(config_with(2));
  for (const bool from_outside : {false, true}) {
    CAPTURE(from_outside);
    const auto join_failure = [&](auto f, auto g) {
      if (from_outside) {
        return failure_of([&] { canopy::join(pool, f, g); });
      }
      return on_worker(pool, [&] { return failure_of([&] { canopy::join(f, g); }); });
    };
    std::atomic<bool> g_finished{false};
    CHECK(join_failure([]() -> int { throw std::runtime_error("from f"); },
                       [&] {
                         std::this_thread::sleep_for(std::chrono::milliseconds(10));
                         g_finished = true;
                         return 1;
                       }) == "runtime_error: from f");
    CHECK(g_finished.load());  // the join waited for g before rethrowing
    std::atomic<bool> f_finished{false};
    CHECK(join_failure(
              [&] {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
                f_finished = true;
                return 1;
              },
              []() -> int { throw std::runtime_error("from g"); }) == "runtime_error: from g");
    CHECK(f_finished.load());
    CHECK(join_failure([]() -> int { throw std::runtime_error("from f"); },
                       []() -> int { throw std::logic_error("from g"); }) ==
          "runtime_error: from f");
    CHECK(join_failure([] { return 1; }, [] { return 2; }) == "none");
  }
}

TEST_CASE("nested joins compute fib(20) on a worker, from outside, and on one worker") {
  canopy::testing::watchdog guard("nested join fib", 60);
  for (const std::size_t workers : {1U, 2U, 4U}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    CHECK(on_worker(pool, [] { return join_fib(20); }) == 6765);
    CHECK(canopy::join(
              pool, [] { return join_fib(20); }, [] { return join_fib(19); }) ==
          std::pair<long, long>{6765, 4181});
  }
}

TEST_CASE("a join's callables are not tasks; one taken back is part of the joining task") {
  // On one worker nobody steals: every offered callable goes into the
  // worker's deque and is taken back (executor/offer_deque.hpp), so a join
  // spawns no task, and current_waker() inside names the joiner's task.
  // Tracing changes neither.
  canopy::testing::watchdog guard("join accounting", 60);
  for (const bool traced : {false, true}) {
    CAPTURE(traced);
    executor_config config = config_with(1);
    if (traced) {
      // NOLINTNEXTLINE(concurrency-mt-unsafe): nothing in the test sets the environment
      const char* directory = std::getenv("TMPDIR");
      config.trace_path = std::string(directory != nullptr ? directory : "/tmp") +
                          "/canopy_fork_join_test_" + std::to_string(::getpid()) + ".json";
    }
    executor pool(config);
    const bool same_waker = on_worker(pool, [] {
      const canopy::waker joiner = canopy::current_waker();
      bool inside_is_joiner = false;
      static_cast<void>(canopy::join([] { return 0; },
                                     [&] {
                                       inside_is_joiner = canopy::current_waker() == joiner;
                                       return 0;
                                     }));
      return inside_is_joiner;
    });
    CHECK(same_waker);
    CHECK(on_worker(pool, [] { return join_fib(15); }) == 610);
    pool.shutdown();  // quiescent: the counts are exact (a join returns before its task's slot
                      // ends)
    const canopy::worker_stats total = pool.stats().total();
    CHECK(pool.stats().live_tasks == 0);
    CHECK(total.spawned == 0);    // fib(15)'s 986 joins and the first test's one: no task
    CHECK(total.tasks_run == 2);  // the two on_worker tasks, spawned from outside
    if (traced) {
      std::remove(config.trace_path.c_str());
      std::remove((config.trace_path.substr(0, config.trace_path.size() - 5) + ".svg").c_str());
    }
  }
}

TEST_CASE("a callable another worker steals runs under the joiner's task, and the join waits") {
  // The first callable waits (bounded) until the second started, which only
  // a thief can make happen. The wake for an offered callable is a hint
  // (docs/architecture.md, "Offered callables"): an attempt whose wake was
  // missed ends with the joiner running it itself, so the case retries, and
  // asserts that stealing happened at least once and was right each time.
  canopy::testing::watchdog guard("join steal", 120);
  executor pool(config_with(2));
  int stolen_attempts = 0;
  for (int attempt = 0; attempt < 20 && stolen_attempts < 3; ++attempt) {
    struct outcome {
      bool stolen = false;
      bool waker_is_joiner = false;
      long sum = 0;
    };
    const outcome seen = on_worker(pool, [] {
      const canopy::waker joiner = canopy::current_waker();
      std::atomic<bool> second_started{false};
      outcome result;
      auto [first, second] = canopy::join(
          [&] {
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
            while (!second_started.load() && std::chrono::steady_clock::now() < deadline) {
              std::this_thread::yield();
            }
            result.stolen = second_started.load();
            return join_fib(12);
          },
          [&] {
            second_started = true;
            result.waker_is_joiner = canopy::current_waker() == joiner;
            return join_fib(13);
          });
      result.sum = first + second;
      return result;
    });
    CHECK(seen.sum == 144 + 233);
    CHECK(seen.waker_is_joiner);
    if (seen.stolen) {
      ++stolen_attempts;
    }
  }
  CHECK(stolen_attempts >= 1);
  CHECK(pool.stats().total().steals >= static_cast<std::uint64_t>(stolen_attempts));
}

TEST_CASE("a joiner whose callable was stolen runs another join's offered callable meanwhile") {
  // Worker A joins (f, g); f waits until a thief (B) started g. g joins
  // (h1, h2) on B, and h1 waits until h2 started: only A, waiting for g,
  // can start h2, by helping (join_worker::help). Bounded
  // waits, retried as above: at least one attempt must see A run h2.
  canopy::testing::watchdog guard("join helping", 120);
  executor pool(config_with(2));
  int helped_attempts = 0;
  for (int attempt = 0; attempt < 20 && helped_attempts < 2; ++attempt) {
    const auto wait_for = [](const std::atomic<bool>& flag) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (!flag.load() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
      return flag.load();
    };
    const bool helped = on_worker(pool, [&wait_for] {
      const std::thread::id joiner = std::this_thread::get_id();
      std::atomic<bool> g_started{false};
      std::atomic<bool> h2_started{false};
      bool h2_on_joiner = false;
      auto [f_value, g_value] = canopy::join(
          [&] {
            static_cast<void>(wait_for(g_started));
            return 1;
          },
          [&] {
            g_started = true;
            auto [h1_value, h2_value] = canopy::join(
                [&] {
                  static_cast<void>(wait_for(h2_started));
                  return 10;
                },
                [&] {
                  h2_started = true;
                  h2_on_joiner = std::this_thread::get_id() == joiner;
                  return 100;
                });
            return h1_value + h2_value;
          });
      CHECK(f_value + g_value == 111);
      return h2_on_joiner;
    });
    if (helped) {
      ++helped_attempts;
    }
  }
  CHECK(helped_attempts >= 1);
}

namespace {

// A chain of joins nested `depth` deep: each level offers a leaf and
// recurses in its first callable.
long nested_chain(int depth) {
  if (depth == 0) {
    return 0;
  }
  auto [deeper, leaf] = canopy::join([depth] { return nested_chain(depth - 1); },
                                     [depth] { return static_cast<long>(depth); });
  return deeper + leaf;
}

}  // namespace

TEST_CASE("joins nested deeper than the deque's capacity offer the rest as tasks") {
  canopy::testing::watchdog guard("deep joins", 60);
  executor pool(config_with(1));
  constexpr int depth = 600;
  CHECK(on_worker(pool, [] { return nested_chain(depth); }) == depth * (depth + 1) / 2);
  pool.shutdown();
  // On one worker nothing is stolen: the first offer_deque::capacity
  // levels fill the deque, each deeper one became a task.
  CHECK(pool.stats().total().spawned ==
        static_cast<std::uint64_t>(depth - canopy::detail::offer_deque::capacity));
}

TEST_CASE("parallel_invoke runs 3 and 4 callables and returns a tuple in argument order") {
  canopy::testing::watchdog guard("parallel_invoke", 60);
  executor pool(config_with(2));
  const auto three = on_worker(pool, [] {
    return canopy::parallel_invoke([] { return 1; }, [] { return join_fib(12); },
                                   [] { return std::string("three"); });
  });
  CHECK(std::get<0>(three) == 1);
  CHECK(std::get<1>(three) == 144);
  CHECK(std::get<2>(three) == "three");
  std::atomic<int> side{0};
  const auto four = canopy::parallel_invoke(
      pool, [] { return 1.5; }, [&side] { side.fetch_add(1); }, [] { return join_fib(10); },
      [] { return 'x'; });
  CHECK(std::get<0>(four) == 1.5);
  CHECK(std::get<2>(four) == 55);
  CHECK(std::get<3>(four) == 'x');
  CHECK(side.load() == 1);
  // The first failure in argument order wins, after all ended.
  std::atomic<int> finished{0};
  CHECK(on_worker(pool, [&finished] {
          return failure_of([&finished] {
            canopy::parallel_invoke([&finished] { finished.fetch_add(1); },
                                    [&finished]() -> int {
                                      finished.fetch_add(1);
                                      throw std::runtime_error("second");
                                    },
                                    [&finished]() -> int {
                                      finished.fetch_add(1);
                                      throw std::runtime_error("third");
                                    },
                                    [&finished] { finished.fetch_add(1); });
          });
        }) == "runtime_error: second");
  CHECK(finished.load() == 4);
}

TEST_CASE("join on a worker allocates nothing once warm") {
  canopy::testing::watchdog guard("join allocations", 60);
  executor pool(config_with(1));
  const long allocations = on_worker(pool, [] {
    long sum = 0;
    for (int round = 0; round < 200; ++round) {  // warm: slot reservation, block caches
      sum += join_fib(8);
    }
    canopy::testing::count_allocations(true);
    for (int round = 0; round < 1000; ++round) {
      sum += join_fib(8);
    }
    const long counted = canopy::testing::allocations_counted();
    canopy::testing::count_allocations(false);
    return sum == 1200L * 21 ? counted : -1;
  });
  CHECK(allocations == 0);
  // The counter itself sees an allocation on this thread (a call of
  // operator new, which unlike a new-expression the compiler may not elide).
  canopy::testing::count_allocations(true);
  void* const block = ::operator new(16);
  const long seen = canopy::testing::allocations_counted();
  canopy::testing::count_allocations(false);
  ::operator delete(block);
  CHECK(seen == 1);
}

TEST_CASE("an outside join whose callables shutdown(cancel_pending) drops throws task_cancelled") {
  canopy::testing::watchdog guard("join dropped at shutdown", 60);
  executor_config config = config_with(1);
  config.on_shutdown = canopy::shutdown_policy::cancel_pending;
  std::atomic<int> ran{0};
  bool threw_cancelled = false;
  {
    executor pool(config);
    std::mutex gate_mutex;
    std::condition_variable gate_cv;
    bool open = false;
    std::latch started(1);
    pool.spawn_detached([&] {
      started.count_down();
      std::unique_lock lock(gate_mutex);
      gate_cv.wait(lock, [&] { return open; });
    });
    started.wait();
    std::thread joiner([&] {
      try {
        canopy::join(
            pool, [&ran] { ran.fetch_add(1); }, [&ran] { ran.fetch_add(1); });
      } catch (const canopy::task_cancelled&) {
        threw_cancelled = true;
      }
    });
    REQUIRE(canopy::testing::eventually([&] { return pool.stats().live_tasks == 3; }));
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const std::lock_guard lock(gate_mutex);
      open = true;
      gate_cv.notify_all();
    });
    pool.shutdown();
    opener.join();
    joiner.join();
    CHECK(pool.stats().dropped_tasks + static_cast<std::uint64_t>(ran.load()) == 2);
  }
  // Either callable dropped unrun makes the join throw; none dropped, it returns.
  CHECK(threw_cancelled == (ran.load() < 2));
}

namespace {

task<std::uint64_t> child_value(std::uint64_t index) { co_return index* index; }

task<std::uint64_t> fan_out_sum(std::size_t count, int rounds) {
  std::vector<canopy::join_handle<std::uint64_t>> children;
  children.reserve(count);
  std::uint64_t sum = 0;
  for (int round = 0; round < rounds; ++round) {
    children.clear();
    for (std::size_t index = 0; index < count; ++index) {
      children.push_back(canopy::spawn(child_value(index)));
    }
    co_await canopy::await_all(children);
    for (auto& child : children) {
      if (!child.ready()) {
        throw std::logic_error("await_all returned before a child ended");
      }
      sum += co_await child;
    }
  }
  co_return sum;
}

task<int> slow_value(int value) {
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  co_return value;
}

task<int> failing_value(int value) {
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  throw std::runtime_error("child " + std::to_string(value));
  co_return value;
}

}  // namespace

TEST_CASE("await_all waits for N spawned children in one co_await") {
  canopy::testing::watchdog guard("await_all", 60);
  for (const std::size_t workers : {1U, 2U, 4U}) {
    CAPTURE(workers);
    executor pool(config_with(workers));
    const std::size_t count = 1000;
    const std::uint64_t expected = (count - 1) * count * (2 * count - 1) / 6;
    CHECK(pool.spawn(fan_out_sum(count, 5)).get() == 5 * expected);
  }
}

TEST_CASE("await_all with an output iterator writes values in order or rethrows the first failure") {
  canopy::testing::watchdog guard("await_all values", 60);
  executor pool(config_with(2));
  const auto values = pool.spawn([]() -> task<std::vector<int>> {
                            std::vector<canopy::join_handle<int>> children;
                            children.reserve(8);
                            for (int index = 0; index < 8; ++index) {
                              children.push_back(canopy::spawn(slow_value(index)));
                            }
                            std::vector<int> out(children.size());
                            co_await canopy::await_all(children, out.begin());
                            for (const auto& child : children) {
                              if (child.valid()) {
                                throw std::logic_error("await_all(handles, out) left a handle");
                              }
                            }
                            co_return out;
                          }())
                          .get();
  CHECK(values == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(pool.spawn([]() -> task<std::string> {
              std::vector<canopy::join_handle<int>> children;
              children.push_back(canopy::spawn(slow_value(1)));
              children.push_back(canopy::spawn(failing_value(2)));
              children.push_back(canopy::spawn(failing_value(3)));
              children.push_back(canopy::spawn(slow_value(4)));
              std::vector<int> out;
              try {
                co_await canopy::await_all(children, std::back_inserter(out));
              } catch (const std::runtime_error& error) {
                for (const auto& child : children) {
                  if (child.valid()) {
                    co_return "a handle was left";
                  }
                }
                co_return std::string(error.what()) + " after " + std::to_string(out.size());
              }
              co_return "none";
            }())
            .get() == "child 2 after 1");
  // Empty ranges and ranges of finished children do not suspend.
  const int finished = pool.spawn([]() -> task<int> {
                             std::vector<canopy::join_handle<int>> none;
                             co_await canopy::await_all(none);
                             std::array<canopy::join_handle<int>, 3> done{
                                 canopy::spawn(slow_value(1)), canopy::spawn(slow_value(2)),
                                 canopy::spawn(slow_value(3))};
                             co_await canopy::await_all(done);
                             co_await canopy::await_all(done);  // all ready now
                             int sum = 0;
                             for (auto& child : done) {
                               sum += co_await child;
                             }
                             co_return sum;
                           }())
                           .get();
  CHECK(finished == 6);
  CHECK(pool.spawn([]() -> task<std::string> {
              std::vector<canopy::join_handle<int>> holes(2);
              try {
                co_await canopy::await_all(holes);
              } catch (const std::logic_error& error) {
                co_return error.what();
              }
              co_return "none";
            }())
            .get() == "canopy::await_all: the range holds an empty join handle");
}

TEST_CASE("a task cancelled inside await_all cancels its children and its frame goes after them") {
  canopy::testing::watchdog guard("await_all cancel", 60);
  std::atomic<int> frames_destroyed{0};
  std::atomic<int> children_destroyed{0};
  {
    executor pool(config_with(2));
    canopy::async_event never;
    auto child = [&children_destroyed](canopy::async_event& event) -> task<int> {
      const canopy::testing::destroy_flag flag(children_destroyed);
      co_await event;
      co_return 1;
    };
    auto parent = [&](canopy::async_event& event) -> task<int> {
      const canopy::testing::destroy_flag flag(frames_destroyed);
      std::vector<canopy::join_handle<int>> children;
      children.reserve(16);
      for (int index = 0; index < 16; ++index) {
        children.push_back(canopy::spawn(child(event)));
      }
      co_await canopy::await_all(children);
      co_return 0;
    };
    auto handle = pool.spawn(parent(never));
    REQUIRE(canopy::testing::eventually([&] { return pool.stats().live_tasks == 17; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(handle.cancel());
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
    REQUIRE(canopy::testing::eventually([&] { return frames_destroyed.load() == 1; }));
    CHECK(children_destroyed.load() == 16);
  }
  CHECK(frames_destroyed.load() == 1);
}

TEST_CASE("stress: many concurrent joins from outside threads and workers") {
  canopy::testing::watchdog guard("join stress", 120);
  executor pool(config_with(4));
  const long rounds = scaled(400);
  std::atomic<long> wrong{0};
  std::vector<std::thread> outside;
  outside.reserve(3);
  for (int thread = 0; thread < 3; ++thread) {
    outside.emplace_back([&, thread] {
      for (long round = 0; round < rounds; ++round) {
        const int n = 6 + static_cast<int>((round + thread) % 8);
        const auto [left, right] = canopy::join(
            pool, [n] { return join_fib(n); }, [n] { return join_fib(n - 1); });
        if (left != plain_fib(n) || right != plain_fib(n - 1)) {
          wrong.fetch_add(1);
        }
        const auto [x, y, z] = canopy::parallel_invoke(
            pool, [n] { return join_fib(n); }, [] { return 1; }, [n] { return join_fib(n / 2); });
        if (x != plain_fib(n) || y != 1 || z != plain_fib(n / 2)) {
          wrong.fetch_add(1);
        }
      }
    });
  }
  // Meanwhile coroutine tasks fan out and await_all, and callables join deep.
  const long fan_rounds = scaled(40);
  auto fan = pool.spawn(fan_out_sum(500, static_cast<int>(fan_rounds)));
  const long deep = on_worker(pool, [] { return join_fib(22); });
  for (auto& thread : outside) {
    thread.join();
  }
  CHECK(wrong.load() == 0);
  CHECK(deep == 17711);
  CHECK(fan.get() == static_cast<std::uint64_t>(fan_rounds) * (499ULL * 500 * 999 / 6));
}
