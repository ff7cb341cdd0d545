// Fork-join of coroutine tasks by continuation stealing: co_await
// canopy::join(...) and canopy::join_n (coroutine/fork_join_await.hpp).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <set>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "executor/fork_stack.hpp"
#include "fork_join/join.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::testing::config_with;
using canopy::testing::eventually;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

namespace {

long plain_fib(int n) { return n < 2 ? n : plain_fib(n - 1) + plain_fib(n - 2); }

task<long> fib(int n) {
  if (n < 2) {
    co_return n;
  }
  auto [a, b] = co_await canopy::join(canopy::call(fib, n - 1), canopy::call(fib, n - 2));
  co_return a + b;
}

// The same with frames made before the join.
task<long> fib_made(int n) {
  if (n < 2) {
    co_return n;
  }
  auto [a, b] = co_await canopy::join(fib_made(n - 1), fib_made(n - 2));
  co_return a + b;
}

// skynet: each level joins ten children (join_n).
task<std::int64_t> skynet(int depth, std::int64_t number) {
  if (depth == 0) {
    co_return number;
  }
  std::vector<std::int64_t> parts = co_await canopy::join_n(10, [depth, number](std::size_t i) {
    return canopy::call(skynet, depth - 1, number * 10 + static_cast<std::int64_t>(i));
  });
  std::int64_t sum = 0;
  for (const std::int64_t part : parts) {
    sum += part;
  }
  co_return sum;
}

std::int64_t plain_skynet(int depth, std::int64_t number) {
  if (depth == 0) {
    return number;
  }
  std::int64_t sum = 0;
  for (int i = 0; i < 10; ++i) {
    sum += plain_skynet(depth - 1, number * 10 + i);
  }
  return sum;
}

int rounds(int full) {
  const int value = full / static_cast<int>(canopy::testing::stress_divisor());
  return value < 1 ? 1 : value;
}

}  // namespace

TEST_CASE("join of calls computes fib on 1, 2 and 4 workers") {
  watchdog guard("task join fib", 120);
  for (const std::size_t workers : {1, 2, 4}) {
    executor pool(config_with(workers));
    for (int round = 0; round < rounds(20); ++round) {
      const int n = 12 + round % 10;
      CHECK(canopy::block_on(pool, fib(n)) == plain_fib(n));
    }
    CHECK(canopy::block_on(pool, fib_made(20)) == plain_fib(20));
  }
}

TEST_CASE("join returns a pair for two children, a tuple for more, monostate for void") {
  watchdog guard("task join shapes", 60);
  executor pool(config_with(2));
  std::atomic<int> ran{0};
  auto none = [&]() -> task<void> {
    ran.fetch_add(1);
    co_return;
  };
  auto text = [](int n) -> task<std::string> {
    co_return std::string(static_cast<std::size_t>(n), 'x');
  };
  auto body = [&]() -> task<int> {
    auto pair = co_await canopy::join(canopy::call(fib, 10), text(3));
    static_assert(std::is_same_v<decltype(pair), std::pair<long, std::string>>);
    auto triple = co_await canopy::join(none(), canopy::call(fib, 5), canopy::call(text, 2));
    static_assert(std::is_same_v<decltype(triple), std::tuple<std::monostate, long, std::string>>);
    auto one = co_await canopy::join(canopy::call(fib, 7));
    static_assert(std::is_same_v<decltype(one), std::tuple<long>>);
    co_return static_cast<int>(pair.first + static_cast<long>(pair.second.size()) +
                               std::get<1>(triple) + static_cast<long>(std::get<2>(triple).size()) +
                               std::get<0>(one));
  };
  CHECK(canopy::block_on(pool, body()) == 55 + 3 + 5 + 2 + 13);
  CHECK(ran.load() == 1);
}

TEST_CASE("join_n returns the results in index order; zero children is an empty vector") {
  watchdog guard("task join_n", 60);
  executor pool(config_with(4));
  CHECK(canopy::block_on(pool, skynet(4, 0)) == plain_skynet(4, 0));
  auto body = []() -> task<std::size_t> {
    std::vector<long> values = co_await canopy::join_n(
        64, [](std::size_t i) { return canopy::call(fib, static_cast<int>(i % 16)); });
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (values[i] != plain_fib(static_cast<int>(i % 16))) {
        co_return 0;
      }
    }
    std::vector<long> none =
        co_await canopy::join_n(0, [](std::size_t) { return canopy::call(fib, 1); });
    std::array<long, 5> written{};
    co_await canopy::join_n(
        written.size(), [](std::size_t i) { return fib(static_cast<int>(i) + 10); },
        written.begin());
    for (std::size_t i = 0; i < written.size(); ++i) {
      if (written[i] != plain_fib(static_cast<int>(i) + 10)) {
        co_return 1;
      }
    }
    co_return values.size() + none.size();
  };
  CHECK(canopy::block_on(pool, body()) == 64);
}

TEST_CASE(
    "a child's exception reaches the join after every sibling ended; the first in order wins") {
  watchdog guard("task join exceptions", 60);
  executor pool(config_with(4));
  std::atomic<int> ended{0};
  auto leaf = [&](int n, bool fail) -> task<long> {
    long value = plain_fib(n);  // some work, so that siblings overlap
    ended.fetch_add(1);
    if (fail) {
      throw std::runtime_error("child " + std::to_string(n));
    }
    co_return value;
  };
  auto body = [&]() -> task<std::string> {
    try {
      co_await canopy::join(canopy::call(leaf, 18, false), canopy::call(leaf, 17, true),
                            canopy::call(leaf, 16, true), canopy::call(leaf, 15, false));
    } catch (const std::runtime_error& error) {
      co_return error.what();
    }
    co_return "no exception";
  };
  for (int round = 0; round < rounds(50); ++round) {
    ended = 0;
    CHECK(canopy::block_on(pool, body()) == "child 17");
    CHECK(ended.load() == 4);
  }
}

TEST_CASE("an exception deep in a region reaches the outermost join") {
  watchdog guard("task join deep exception", 60);
  executor pool(config_with(4));
  struct thrower {
    static task<long> run(int n, int fail_at) {
      if (n == fail_at) {
        throw std::out_of_range("depth");
      }
      if (n < 2) {
        co_return n;
      }
      auto [a, b] = co_await canopy::join(canopy::call(run, n - 1, fail_at),
                                          canopy::call(run, n - 2, fail_at));
      co_return a + b;
    }
  };
  for (int round = 0; round < rounds(20); ++round) {
    CHECK_THROWS_AS(canopy::block_on(pool, thrower::run(18, 3 + round % 10)), std::out_of_range);
    CHECK(canopy::block_on(pool, thrower::run(18, -1)) == plain_fib(18));
  }
}

TEST_CASE("a child may await a task inline (which may join) but nothing that suspends") {
  watchdog guard("task join awaits", 60);
  executor pool(config_with(2));
  auto inner = [](int n) -> task<long> { co_return co_await fib(n) + 1; };
  auto body = [&]() -> task<long> {
    auto [a, b] = co_await canopy::join(canopy::call(inner, 15), canopy::call(inner, 14));
    co_return a + b;
  };
  CHECK(canopy::block_on(pool, body()) == plain_fib(15) + plain_fib(14) + 2);

  auto yielder = []() -> task<long> {
    co_await canopy::yield_now();
    co_return 1;
  };
  auto refused = [&]() -> task<std::string> {
    try {
      co_await canopy::join(canopy::call(fib, 12), canopy::call(yielder));
    } catch (const std::logic_error& error) {
      co_return error.what();
    }
    co_return "";
  };
  CHECK(canopy::block_on(pool, refused()).find("fork-join child") != std::string::npos);
  // The task that opened the region may await anything after it.
  auto after = [&]() -> task<long> {
    auto [a, b] = co_await canopy::join(canopy::call(fib, 12), canopy::call(fib, 11));
    co_await canopy::yield_now();
    co_return a + b;
  };
  CHECK(canopy::block_on(pool, after()) == plain_fib(12) + plain_fib(11));
}

TEST_CASE("children may spawn tasks and call the callable join") {
  watchdog guard("task join spawn", 60);
  executor pool(config_with(4));
  std::atomic<long> detached{0};
  auto add = [&detached](int n) -> task<void> {
    detached.fetch_add(n);
    co_return;
  };
  auto child = [&](int n) -> task<long> {
    canopy::spawn(add(n)).detach();
    auto [x, y] = canopy::join([n] { return plain_fib(n); }, [n] { return plain_fib(n - 1); });
    co_return x + y + co_await fib(n - 2);
  };
  auto body = [&]() -> task<long> {
    long total = 0;
    for (int i = 0; i < 20; ++i) {
      auto [a, b] = co_await canopy::join(canopy::call(child, 12), canopy::call(child, 11));
      total += a + b;
    }
    co_return total;
  };
  const long expected = 20 * (plain_fib(12) + plain_fib(11) + plain_fib(10) + plain_fib(11) +
                              plain_fib(10) + plain_fib(9));
  CHECK(canopy::block_on(pool, body()) == expected);
  CHECK(eventually([&] { return detached.load() == 20L * (12 + 11); }));
}

TEST_CASE("many tasks run regions at once; every result is right") {
  watchdog guard("task join concurrent", 120);
  executor pool(config_with(4));
  std::vector<canopy::join_handle<long>> handles;
  const int tasks = 64;
  handles.reserve(tasks);
  for (int i = 0; i < tasks; ++i) {
    handles.push_back(pool.spawn(fib(10 + i % 8)));
  }
  for (int i = 0; i < tasks; ++i) {
    CHECK(handles[static_cast<std::size_t>(i)].get() == plain_fib(10 + i % 8));
  }
}

TEST_CASE(
    "cancelling the joining task waits for its running children; unlaunched ones do not run") {
  watchdog guard("task join cancel", 60);
  executor pool(config_with(2));
  std::atomic<bool> release{false};
  std::atomic<bool> spinning{false};
  std::atomic<int> ended{0};
  std::atomic<int> started{0};
  // The first child holds the opening worker until the other worker stole
  // the rest of the join and runs the spinner; then the opening worker
  // leaves and the task is suspended on its region.
  auto holder = [&]() -> task<int> {
    started.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration<double>(10 * canopy::testing::timeout_scale());
    while (!spinning.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    ended.fetch_add(1);
    co_return 1;
  };
  auto spinner = [&]() -> task<int> {
    started.fetch_add(1);
    spinning = true;
    while (!release.load()) {
      std::this_thread::yield();
    }
    ended.fetch_add(1);
    co_return 1;
  };
  auto quick = [&]() -> task<int> {
    started.fetch_add(1);
    ended.fetch_add(1);
    co_return 2;
  };
  auto body = [&]() -> task<int> {
    auto [a, b, c] =
        co_await canopy::join(canopy::call(holder), canopy::call(spinner), canopy::call(quick));
    co_return a + b + c;
  };
  auto handle = pool.spawn(body());
  REQUIRE(eventually([&] { return spinning.load(); }));
  std::this_thread::sleep_for(20ms);
  handle.cancel();
  std::this_thread::sleep_for(20ms);
  CHECK_FALSE(handle.ready());  // the spinner still runs: the task must not end before it
  CHECK(ended.load() < started.load());
  release = true;
  CHECK(eventually([&] { return handle.ready(); }));
  // Cancelled if it was suspended on its region when the cancel came, else
  // finished in the run the cancel could not interrupt.
  bool cancelled = false;
  int value = 0;
  try {
    value = handle.get();
  } catch (const canopy::task_cancelled&) {
    cancelled = true;
  }
  CHECK(ended.load() == started.load());
  if (!cancelled) {
    CHECK(value == 4);
    CHECK(started.load() == 3);
  }
}

TEST_CASE("join_n of calls of a capturing lambda: each child's lambda lives until the join ends") {
  // The lambda's operator() is the coroutine: its frame points at the
  // lambda object inside the call make(i) returned.
  watchdog guard("task join_n lambda calls", 60);
  for (const unsigned workers : {1U, 2U}) {
    executor pool(config_with(workers));
    const std::vector<long> bases{100, 200, 300};
    auto leaf = [&bases](std::size_t index) -> task<long> {
      auto [a, b] = co_await canopy::join(canopy::call(fib, 12), canopy::call(fib, 11));
      // A wrong fib moves the sum away from the expected one.
      co_return bases[index % bases.size()] + static_cast<long>(index) + (a + b - plain_fib(13));
    };
    auto body = [&]() -> task<long> {
      std::vector<long> values =
          co_await canopy::join_n(200, [&](std::size_t index) { return canopy::call(leaf, index); });
      long sum = 0;
      for (const long value : values) {
        sum += value;
      }
      co_return sum;
    };
    long expected = 0;
    for (std::size_t index = 0; index < 200; ++index) {
      expected += bases[index % bases.size()] + static_cast<long>(index);
    }
    CHECK(canopy::block_on(pool, body()) == expected);
  }
}

TEST_CASE("a cancel made while the task's own worker drives its region stops the launches") {
  // One worker: it runs the region, so the task cannot run its cancel
  // until the region ends. The cancel must still keep the children not
  // yet launched from running.
  watchdog guard("task join cancel on its own worker", 60);
  executor pool(config_with(1));
  std::atomic<bool> cancel_sent{false};
  std::atomic<int> started{0};
  std::atomic<int> ended{0};
  auto child = [&](std::size_t /*index*/) -> task<int> {
    started.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration<double>(10 * canopy::testing::timeout_scale());
    while (!cancel_sent.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    ended.fetch_add(1);
    co_return 1;
  };
  auto body = [&]() -> task<int> {
    std::vector<int> ones =
        co_await canopy::join_n(40, [&](std::size_t index) { return canopy::call(child, index); });
    co_return static_cast<int>(ones.size());
  };
  auto handle = pool.spawn(body());
  REQUIRE(eventually([&] { return started.load() >= 1; }));
  CHECK(handle.cancel());
  cancel_sent = true;
  CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
  CHECK(started.load() == 1);
  CHECK(ended.load() == 1);
}

TEST_CASE("an idle worker steals the rest of a join and runs the next child") {
  watchdog guard("task join steal", 60);
  executor pool(config_with(2));
  std::atomic<bool> second_started{false};
  std::thread::id first_thread;
  std::thread::id second_thread;
  // The first child holds its worker until the second child started, which
  // only a thief can do meanwhile.
  auto first = [&]() -> task<int> {
    first_thread = std::this_thread::get_id();
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration<double>(10 * canopy::testing::timeout_scale());
    while (!second_started.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    co_return second_started.load() ? 1 : 0;
  };
  auto second = [&]() -> task<int> {
    second_thread = std::this_thread::get_id();
    second_started = true;
    co_return 2;
  };
  auto body = [&]() -> task<int> {
    auto [a, b] = co_await canopy::join(canopy::call(first), canopy::call(second));
    co_return a + b;
  };
  CHECK(canopy::block_on(pool, body()) == 3);
  CHECK(first_thread != second_thread);
}

TEST_CASE("deep regions with uneven leaves migrate frames between workers and stay exact") {
  watchdog guard("task join migrate", 120);
  executor pool(config_with(4));
  struct uneven {
    // Leaves spin a little, more on some paths, so that thieves take parts
    // of the tree and parents are resumed on the worker that ended their
    // last child.
    static task<long> run(int n, std::uint64_t path) {
      if (n < 2) {
        volatile std::uint64_t spin = 0;
        for (std::uint64_t i = 0; i < (path % 7) * 40; ++i) {
          spin = spin + i;
        }
        co_return n;
      }
      auto [a, b] = co_await canopy::join(canopy::call(run, n - 1, path * 3 + 1),
                                          canopy::call(run, n - 2, path * 3 + 2));
      co_return a + b;
    }
  };
  for (int round = 0; round < rounds(10); ++round) {
    CHECK(canopy::block_on(pool, uneven::run(20, static_cast<std::uint64_t>(round))) ==
          plain_fib(20));
  }
}

TEST_CASE("a child that cannot be made counts as one that threw; the others still run") {
  watchdog guard("task join make errors", 60);
  executor pool(config_with(2));
  std::atomic<int> made{0};
  auto body = [&]() -> task<std::string> {
    try {
      co_await canopy::join_n(4, [&](std::size_t i) {
        if (i == 2) {
          throw std::runtime_error("make 2");
        }
        made.fetch_add(1);
        return canopy::call(fib, 10);
      });
    } catch (const std::runtime_error& error) {
      co_return error.what();
    }
    co_return "";
  };
  CHECK(canopy::block_on(pool, body()) == "make 2");
  CHECK(made.load() == 3);
  auto empty = []() -> task<std::string> {
    task<long> moved_from = fib(3);
    task<long> owner = std::move(moved_from);
    try {
      // NOLINTNEXTLINE(bugprone-use-after-move): an empty task is the point
      co_await canopy::join(std::move(moved_from), std::move(owner));
    } catch (const std::invalid_argument& error) {
      co_return error.what();
    }
    co_return "";
  };
  CHECK(canopy::block_on(pool, empty()).find("empty task") != std::string::npos);
}

TEST_CASE("an executor without workers runs a region on the thread that drives it") {
  watchdog guard("task join host", 60);
  executor pool(config_with(0));
  CHECK(canopy::block_on(pool, fib(18)) == plain_fib(18));
  CHECK(canopy::block_on(pool, skynet(3, 1)) == plain_skynet(3, 1));
}

TEST_CASE("a child may co_await a wait that is ready at once; one that would suspend throws") {
  watchdog guard("task join ready waits", 60);
  executor pool(config_with(2));
  canopy::async_event set_event;
  set_event.set();
  canopy::async_event unset_event;
  auto ready = [&]() -> task<int> {
    co_await set_event;  // ready: no suspension
    co_return 1;
  };
  auto blocked = [&]() -> task<int> {
    co_await unset_event;  // would suspend the child
    co_return 2;
  };
  auto body = [&]() -> task<std::string> {
    auto [a, b] = co_await canopy::join(canopy::call(ready), canopy::call(fib, 10));
    if (a != 1 || b != plain_fib(10)) {
      co_return "wrong results";
    }
    try {
      co_await canopy::join(canopy::call(ready), canopy::call(blocked));
    } catch (const std::logic_error& error) {
      co_return error.what();
    }
    co_return "no exception";
  };
  CHECK(canopy::block_on(pool, body()).find("fork-join child") != std::string::npos);
}

namespace {

// Where each child's frame went: its frame's address, written by the call
// that makes it (the first task it makes is its own).
struct frame_check {
  std::atomic<int> on_stack{0};
  std::atomic<int> off_stack{0};
  std::atomic<int> same_place{0};  // a join's second child where its first was
  std::atomic<int> joins{0};
};

task<long> placed_fib(int n, frame_check* check);

task<long> make_placed(int n, frame_check* check, void** where) {
  task<long> made = placed_fib(n, check);
  const auto handle = made.release();
  *where = handle.address();
  (canopy::detail::on_fork_stack(*where) ? check->on_stack : check->off_stack).fetch_add(1);
  return task<long>(handle);
}

task<long> placed_fib(int n, frame_check* check) {
  if (n < 2) {
    co_return n;
  }
  void* first = nullptr;
  void* second = nullptr;
  auto [a, b] = co_await canopy::join(canopy::call(make_placed, n - 1, check, &first),
                                      canopy::call(make_placed, n - 2, check, &second));
  check->joins.fetch_add(1);
  if (first == second) {
    check->same_place.fetch_add(1);
  }
  co_return a + b;
}

// A chain of joins as deep as `depth`: each join's one child joins the
// next.
task<long> join_chain(int depth) {
  if (depth == 0) {
    co_return 0;
  }
  auto [below] = co_await canopy::join(canopy::call(join_chain, depth - 1));
  co_return below + 1;
}

// The same with two children a level, the second a leaf: each level's
// record is offered while the deep child runs.
task<long> join_spine(int depth) {
  if (depth == 0) {
    co_return 0;
  }
  auto [below, leaf] =
      co_await canopy::join(canopy::call(join_spine, depth - 1), canopy::call(fib, 2));
  co_return below + leaf;
}

// A frame larger than the first stacklet (16 KiB): the stack links larger
// ones as the recursion goes down and steps back as it returns.
task<long> big_frame(int depth) {
  std::array<unsigned char, 40000> pad{};
  pad[static_cast<std::size_t>(depth)] = 1;
  long below = 0;
  if (depth > 0) {
    auto [a, b] = co_await canopy::join(canopy::call(big_frame, depth - 1), canopy::call(fib, 6));
    below = a + b;
  }
  co_return below + pad[static_cast<std::size_t>(depth)];
}

// make() that makes a task, frees it, and then makes the one it returns:
// the first went on the stack and left it; the returned one is an ordinary
// block-pool frame.
task<long> make_after_scratch(int n, frame_check* check, void** where) {
  {
    const task<long> scratch = fib(3);
  }
  return make_placed(n, check, where);
}

// make() that makes its own task first and then a scratch one it frees.
task<long> make_then_scratch(int n) {
  task<long> own = fib(n);
  {
    const task<long> scratch = fib(3);
  }
  return own;
}

task<int> one() { co_return 1; }

// make() whose first task is of another type, freed before its own: that
// one does not start (it is not the child), and the child is a pool frame.
task<long> make_after_other_scratch(int n, void** where) {
  {
    const task<int> scratch = one();
  }
  task<long> made = fib(n);
  *where = made.release().address();
  return task<long>(std::coroutine_handle<canopy::detail::task_promise<long>>::from_address(*where));
}

}  // namespace

TEST_CASE("a call's frame goes on its worker's stack; a join's next child takes its place") {
  watchdog guard("task join stack frames", 60);
  executor pool(config_with(1));
  frame_check check;
  CHECK(canopy::block_on(pool, placed_fib(16, &check)) == plain_fib(16));
  CHECK(check.off_stack.load() == 0);
  CHECK(check.on_stack.load() > 1000);
  // One worker: nothing is stolen, so each join's second child is made
  // after its first was popped, at the same address.
  CHECK(check.same_place.load() == check.joins.load());
  // A task made before the join is not a stack frame.
  auto made_before = []() -> task<bool> {
    task<long> early = fib(5);
    const auto handle = early.release();
    const bool on_stack = canopy::detail::on_fork_stack(handle.address());
    auto [value] = co_await canopy::join(task<long>(handle));
    co_return !on_stack && value == plain_fib(5);
  };
  CHECK(canopy::block_on(pool, made_before()));
}

TEST_CASE("a join chain deeper than the thread's stack allows nesting runs to its end") {
  // Children run nested in their launcher's C++ frame only down to a floor
  // (half a worker's stack); deeper joins go on from the bottom of the run.
  watchdog guard("task join deep chain", 300);
  const int depth = 200000;
  for (const std::size_t workers : {0, 1, 2}) {
    INFO("workers " << workers);
    executor pool(config_with(workers));
    CHECK(canopy::block_on(pool, join_chain(depth)) == depth);
    CHECK(canopy::block_on(pool, join_spine(depth)) == depth * plain_fib(2));
  }
}

TEST_CASE("a child frame larger than a stacklet links a larger one") {
  watchdog guard("task join big frames", 60);
  for (const std::size_t workers : {0, 1, 2}) {
    executor pool(config_with(workers));
    for (int round = 0; round < rounds(10); ++round) {
      CHECK(canopy::block_on(pool, big_frame(6)) == 1 + 6 * (plain_fib(6) + 1));
    }
  }
}

TEST_CASE("make() may make and free another task after the one it returns") {
  watchdog guard("task join scratch make", 60);
  executor pool(config_with(2));
  auto body = [&]() -> task<long> {
    auto [a, b] = co_await canopy::join(canopy::call(make_then_scratch, 12),
                                        canopy::call(make_then_scratch, 11));
    co_return a + b;
  };
  CHECK(canopy::block_on(pool, body()) == plain_fib(12) + plain_fib(11));
  void* where = nullptr;
  auto other = [&]() -> task<long> {
    auto [a, b] = co_await canopy::join(canopy::call(make_after_other_scratch, 12, &where),
                                        canopy::call(fib, 11));
    co_return a + b;
  };
  CHECK(canopy::block_on(pool, other()) == plain_fib(12) + plain_fib(11));
  CHECK_FALSE(canopy::detail::on_fork_stack(where));
}

namespace {

// Runs `body` in a forked child process on a pool of no workers and returns
// what the child printed, after checking that it ended by SIGABRT (a broken
// canopy::call contract stops the program).
template <class Body>
std::string output_of_aborted_join(Body body) {
  int pipe_ends[2];
  REQUIRE(::pipe(pipe_ends) == 0);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(pipe_ends[1], 1);
    ::dup2(pipe_ends[1], 2);
    ::close(pipe_ends[0]);
    std::signal(SIGABRT, SIG_DFL);  // not the test framework's report: the plain end
    executor pool(config_with(0));
    static_cast<void>(canopy::block_on(pool, body()));
    ::_exit(0);
  }
  ::close(pipe_ends[1]);
  std::string output;
  char buffer[512];
  for (ssize_t got = 0; (got = ::read(pipe_ends[0], buffer, sizeof buffer)) > 0;) {
    output.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(pipe_ends[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO(output);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT));
  return output;
}

}  // namespace

TEST_CASE("make() that keeps a task it made before its own is reported, not corrupted") {
  static task<long> kept;
  auto keeps = []() -> task<long> {
    kept = fib(4);
    return fib(5);
  };
  const std::string output = output_of_aborted_join([&]() -> task<long> {
    auto [a, b] = co_await canopy::join(canopy::call(keeps), canopy::call(fib, 3));
    co_return a + b;
  });
  CHECK(output.find("canopy::call") != std::string::npos);
}

TEST_CASE("make() that drops the task it made first is reported") {
  // The first task a call's function makes is the join's child (with GCC
  // it has already run: it starts as it is made).
  const std::string output = output_of_aborted_join([]() -> task<long> {
    frame_check check;
    void* where = nullptr;
    auto [a, b] = co_await canopy::join(canopy::call(make_after_scratch, 6, &check, &where),
                                        canopy::call(fib, 3));
    co_return a + b;
  });
  CHECK(output.find("canopy::call") != std::string::npos);
}

TEST_CASE("make() that throws after making its task is reported") {
  auto throws_after = [](int n) -> task<long> {
    task<long> made = fib(n);
    static_cast<void>(made.release());  // ownership went to the join when it started
    throw std::runtime_error("after the child");
  };
  const std::string output = output_of_aborted_join([&]() -> task<long> {
    auto [a, b] = co_await canopy::join(canopy::call(throws_after, 6), canopy::call(fib, 3));
    co_return a + b;
  });
  CHECK(output.find("canopy::call") != std::string::npos);
}

TEST_CASE("a stolen join hands the joining frame's stack to the worker that ends it") {
  watchdog guard("task join stack hand-over", 120);
  for (const std::size_t workers : {2, 4}) {
    executor pool(config_with(workers));
    std::atomic<int> migrated{0};
    // Whether the second child's worker wins is up to the scheduler of a
    // loaded machine (the first's worker may be descheduled between its
    // last step and its count): rounds go on, up to a cap, until one did.
    for (int round = 0; round < rounds(20) || (migrated.load() == 0 && round < 200); ++round) {
      std::atomic<bool> first_ended{false};
      std::atomic<bool> second_started{false};
      // The first child holds the opening worker until a thief runs the
      // second; the second ends last, so its worker wins the join and goes
      // on with the joining frame, whose stack the first's worker gave up.
      auto first = [&]() -> task<long> {
        const auto deadline = std::chrono::steady_clock::now() +
                              std::chrono::duration<double>(10 * canopy::testing::timeout_scale());
        while (!second_started.load() && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::yield();
        }
        const long value = co_await fib(10);
        first_ended = true;
        co_return value;
      };
      auto second = [&]() -> task<long> {
        second_started = true;
        const auto deadline = std::chrono::steady_clock::now() +
                              std::chrono::duration<double>(10 * canopy::testing::timeout_scale());
        while (!first_ended.load() && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::yield();
        }
        std::this_thread::sleep_for(2ms);
        co_return co_await fib(11);
      };
      auto joining = [&]() -> task<long> {
        const auto before = std::this_thread::get_id();
        auto [a, b] = co_await canopy::join(canopy::call(first), canopy::call(second));
        if (std::this_thread::get_id() != before) {
          migrated.fetch_add(1);
        }
        // Deeper joins on the adopted stack, then this frame's own pop there.
        auto [c, d] = co_await canopy::join(canopy::call(fib, 15), canopy::call(fib, 14));
        co_return a + b + c + d;
      };
      auto body = [&]() -> task<long> {
        auto [x, y] = co_await canopy::join(canopy::call(joining), canopy::call(fib, 12));
        co_return x + y;
      };
      CHECK(canopy::block_on(pool, body()) ==
            plain_fib(10) + plain_fib(11) + plain_fib(15) + plain_fib(14) + plain_fib(12));
    }
    CHECK(migrated.load() > 0);
  }
}

TEST_CASE("deep fib and uneven trees migrate stacks on 2 and 4 workers, round after round") {
  watchdog guard("task join stack migration", 240);
  struct uneven {
    static task<long> run(int n, std::uint64_t path) {
      if (n < 2) {
        volatile std::uint64_t spin = 0;
        for (std::uint64_t i = 0; i < (path % 5) * 60; ++i) {
          spin = spin + i;
        }
        co_return n;
      }
      auto [a, b] = co_await canopy::join(canopy::call(run, n - 1, path * 3 + 1),
                                          canopy::call(run, n - 2, path * 3 + 2));
      co_return a + b;
    }
  };
  for (const std::size_t workers : {2, 4}) {
    executor pool(config_with(workers));
    for (int round = 0; round < rounds(20); ++round) {
      CHECK(canopy::block_on(pool, fib(22)) == plain_fib(22));
      CHECK(canopy::block_on(pool, uneven::run(18, static_cast<std::uint64_t>(round))) ==
            plain_fib(18));
      CHECK(canopy::block_on(pool, skynet(3, round)) == plain_skynet(3, round));
    }
  }
}
