// Boost.Context fibers: spawn/join, yield, awaits, fork-join, 100k fibers,
// guard pages (death test), cancellation and shutdown unwinding, races.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "fork_join/join.hpp"
#include "fiber/fiber.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"
#include "tests/worker_gate.hpp"

using canopy::async_event;
using canopy::executor;
using canopy::executor_config;
using canopy::task;
using canopy::testing::config_with;
using canopy::testing::destroy_flag;
using canopy::testing::eventually;
using canopy::testing::worker_gate;
namespace this_fiber = canopy::this_fiber;

namespace {

constexpr std::size_t small_stack = 16 * 1024;

long fib(int n) {
  if (n < 2) {
    return n;
  }
  auto left = canopy::spawn(canopy::fiber([n] { return fib(n - 1); }, small_stack));
  auto right = canopy::spawn(canopy::fiber([n] { return fib(n - 2); }, small_stack));
  return this_fiber::await(left) + this_fiber::await(right);
}

task<int> coroutine_value(int value) {
  co_await canopy::yield_now();
  co_return value;
}

// A coroutine whose frame owns `flag`: destroying the frame destroys it.
task<int> holding(std::shared_ptr<destroy_flag> flag) {
  static_cast<void>(flag);
  co_return 1;
}

// The errc of a spawn_error that `spawn` throws, or nothing if it returns.
template <class Spawn>
std::optional<canopy::errc> spawn_error_of(Spawn&& spawn) {
  try {
    spawn();
  } catch (const canopy::spawn_error& error) {
    return static_cast<canopy::errc>(error.code().value());
  }
  return std::nullopt;
}

// A death test's fork, made before any other thread exists in this process
// (TSan refuses to start threads in the child of a multi-threaded fork).
// In the child (0 returned) each of `fatal` kills the process (no doctest
// or sanitizer handler) and an alarm bounds the run; the parent's watchdog
// starts after the fork (death_signal).
pid_t fork_death_test(std::initializer_list<int> fatal) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(static_cast<unsigned>(60 * canopy::testing::timeout_scale()));
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    for (const int signal : fatal) {
      ::sigaction(signal, &fallback, nullptr);
    }
  }
  return child;
}

// The parent's side: the signal that ended `child` (the test fails if it
// exited instead; its exit code says how).
int death_signal(pid_t child, const char* name) {
  canopy::testing::watchdog guard(name, 90);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO("child status " << status);
  REQUIRE(WIFSIGNALED(status));
  return WTERMSIG(status);
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("a spawned fiber returns the value; exceptions reach join", workers_t,
                          fiber_sizes) {
  canopy::testing::watchdog guard("fiber spawn/join", 60);
  executor pool(config_with(workers_t::value));
  std::vector<canopy::join_handle<int>> handles;
  for (int index = 0; index < 500; ++index) {
    handles.push_back(pool.spawn(canopy::fiber([index] {
      this_fiber::yield();
      return index;
    })));
  }
  long sum = 0;
  for (auto& handle : handles) {
    sum += handle.get();
  }
  CHECK(sum == 499L * 500L / 2);
  auto failing = pool.spawn(canopy::fiber([]() -> int {
    this_fiber::yield();
    throw std::runtime_error("fiber failed");
  }));
  CHECK_THROWS_WITH_AS(failing.get(), "fiber failed", std::runtime_error);
  auto unit = pool.spawn(canopy::fiber([] {}));
  unit.get();
}
TEST_CASE_TEMPLATE_INVOKE(fiber_sizes, std::integral_constant<std::size_t, 1>,
                          std::integral_constant<std::size_t, 2>,
                          std::integral_constant<std::size_t, 4>);

TEST_CASE("this_fiber outside a fiber is an error") {
  CHECK_FALSE(this_fiber::inside());
  CHECK_THROWS_AS(this_fiber::yield(), std::logic_error);
  async_event event;
  CHECK_THROWS_AS(this_fiber::await(event), std::logic_error);
}

TEST_CASE("this_fiber::await(awaitable) outside a fiber: the logic_error names the call") {
  try {
    this_fiber::await(canopy::yield_now());
    FAIL("await outside a fiber did not throw");
  } catch (const std::logic_error& error) {
    CHECK(std::string(error.what()).find("this_fiber::await(awaitable)") != std::string::npos);
  }
}

TEST_CASE("a fiber awaits handles, events, tasks and awaitables without holding its worker") {
  canopy::testing::watchdog guard("fiber awaits", 30);
  executor pool(config_with(1));
  async_event ready;
  std::atomic<bool> waiting{false};
  auto fiber = pool.spawn(canopy::fiber([&] {
    CHECK(this_fiber::inside());
    int total = this_fiber::await(pool.spawn([] { return 1; }));                 // callable task
    total += this_fiber::await(canopy::spawn(canopy::fiber([] { return 2; })));  // another fiber
    total += this_fiber::await(coroutine_value(3));                              // a task<T>
    total += this_fiber::await(canopy::spawn(coroutine_value(4)));               // its handle
    waiting.store(true);
    this_fiber::await(ready);                // an event
    this_fiber::await(canopy::yield_now());  // any awaitable
    return total;
  }));
  REQUIRE(eventually([&] { return waiting.load(); }));
  // The only worker is free while the fiber waits.
  CHECK(pool.spawn([] { return 5; }).get() == 5);
  ready.set();
  CHECK(fiber.get() == 10);

  // A coroutine awaits a fiber's handle, too.
  auto reader = [&]() -> task<int> {
    co_return co_await canopy::spawn(canopy::fiber([] { return 6; }));
  };
  CHECK(canopy::block_on(pool, reader()) == 6);
}

TEST_CASE("a fiber awaiting a pending fiber of another executor waits for it there") {
  // Run-at-join takes only children of the awaiter's own executor.
  canopy::testing::watchdog guard("fiber cross-executor await", 60);
  executor home(config_with(2));
  executor other(config_with(1));
  std::latch blocked(1);
  std::atomic<bool> opened{false};
  auto blocker = other.spawn([&] {
    blocked.count_down();
    while (!opened.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  blocked.wait();
  std::vector<canopy::join_handle<void>> fillers;
  for (int index = 0; index < 9000; ++index) {  // push the child's slot past home's arena
    fillers.push_back(other.spawn([] {}));
  }
  auto child = other.spawn(canopy::fiber([&] { return opened.load(); }));
  auto parent = home.spawn(canopy::fiber([&] { return this_fiber::await(child); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  opened.store(true);
  CHECK(parent.get());  // the child ran on `other`, after the blocker let go
  blocker.get();
  for (auto& filler : fillers) {
    filler.get();
  }
}

TEST_CASE("exceptions propagate through nested fiber awaits") {
  canopy::testing::watchdog guard("fiber exceptions", 30);
  executor pool(config_with(2));
  auto outer = pool.spawn(canopy::fiber([] {
    auto inner = canopy::spawn(canopy::fiber([]() -> int {
      this_fiber::yield();
      throw std::out_of_range("inner");
    }));
    return this_fiber::await(inner) + 1;
  }));
  CHECK_THROWS_WITH_AS(outer.get(), "inner", std::out_of_range);
}

TEST_CASE("this_fiber::yield lets other ready tasks run on a single worker") {
  canopy::testing::watchdog guard("fiber yield", 30);
  executor pool(config_with(1));
  std::mutex log_mutex;
  std::string log;
  worker_gate busy(pool, 1);
  auto writer = [&](char name) {
    return [&, name] {
      for (int index = 0; index < 50; ++index) {
        {
          const std::lock_guard lock(log_mutex);
          log.push_back(name);
        }
        this_fiber::yield();
      }
    };
  };
  auto a = pool.spawn(canopy::fiber(writer('A')));
  auto b = pool.spawn(canopy::fiber(writer('B')));
  busy.open();
  a.get();
  b.get();
  REQUIRE(log.size() == 100);
  CHECK(log.find('B') < log.rfind('A'));
  CHECK(log.find('A') < log.rfind('B'));
}

TEST_CASE("fork-join fib(30) with fibers") {
  canopy::testing::watchdog guard("fiber fib(30)", 300);
  executor pool;
  const int n = canopy::testing::stress_divisor() > 1 ? 20 : 30;
  const auto start = std::chrono::steady_clock::now();
  const long value = pool.spawn(canopy::fiber([n] { return fib(n); }, small_stack)).get();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  CHECK(value == (n == 30 ? 832040 : 6765));
  const auto stats = canopy::stack_pool::stats();
  MESSAGE("fiber fib(" << n << ") = " << value << " in " << ms << " ms on " << pool.worker_count()
                       << " workers; stacks carved " << stats.stacks << " (guarded "
                       << stats.guarded_stacks << ")");
}

TEST_CASE("100,000 concurrent fibers with 16 KiB stacks") {
  canopy::testing::watchdog guard("100k fibers", 600);
  const long count = 100'000 / canopy::testing::stress_divisor();
  executor pool;
  async_event release;
  std::atomic<long> waiting{0};
  std::atomic<long> guarded{0};
  std::vector<canopy::join_handle<long>> handles;
  handles.reserve(static_cast<std::size_t>(count));
  for (long index = 0; index < count; ++index) {
    handles.push_back(pool.spawn(canopy::fiber(
        [&, index] {
          if (this_fiber::stack_guarded()) {
            guarded.fetch_add(1, std::memory_order_relaxed);
          }
          CHECK(this_fiber::stack_size() >= small_stack);
          waiting.fetch_add(1, std::memory_order_relaxed);
          this_fiber::await(release);
          return index;
        },
        small_stack)));
  }
  REQUIRE(eventually([&] { return waiting.load() == count; }, 300));
  const auto stats = canopy::stack_pool::stats();
  MESSAGE(count << " fibers suspended at once; " << guarded.load()
                << " on guarded stacks (guard limit " << stats.guard_limit << " stacks), "
                << stats.chunks << " chunks");
  CHECK(stats.in_use >= static_cast<std::size_t>(count));
  CHECK(guarded.load() > 0);
  release.set();
  long sum = 0;
  for (auto& handle : handles) {
    sum += handle.get();
  }
  CHECK(sum == count * (count - 1) / 2);
}

TEST_CASE("a fiber stack overflow faults at once on the guard page (death test)") {
  const pid_t child = fork_death_test({SIGSEGV, SIGBUS});
  if (child == 0) {
    // Earlier tests may have spent the guard budget on 16 KiB stacks: allow
    // more guards and use a size class of its own, so this stack is fresh.
    canopy::stack_pool::set_guard_limit(canopy::stack_pool::stats().guarded_stacks + 1024);
    executor pool(config_with(1));
    auto overflow = pool.spawn(canopy::fiber(
        []() -> int {
          if (!this_fiber::stack_guarded()) {
            std::_Exit(10);  // no guard page: the test would prove nothing
          }
          struct recurse {
            static int down(volatile char* previous, int level) {
              volatile char block[512];
              block[0] = static_cast<char>(level);
              block[511] = previous != nullptr ? previous[0] : 0;
              if (level == 1 << 30) {  // never: 512 GiB of stack
                return 0;
              }
              return down(block, level + 1) + block[7];
            }
          };
          return recurse::down(nullptr, 0);
        },
        24 * 1024));
    static_cast<void>(overflow.get());
    std::_Exit(11);  // survived: no fault
  }
  const int signal = death_signal(child, "stack overflow");
  CHECK((signal == SIGSEGV || signal == SIGBUS));
}

TEST_CASE(
    "joins whose fibers yield inside their first callables stop with the reason (death test)") {
  // Forbidden (fork_join/join.hpp): a join's first callable suspends the
  // fiber that joins. On one worker, fiber A joins and yields inside until
  // fiber B joined and yields inside too; A, resumed on the same thread,
  // then finds B's callable above its own: without the check both joins
  // would wait for a callable nobody runs.
  const pid_t child = fork_death_test({SIGABRT});
  if (child == 0) {
    executor pool(config_with(1));
    std::atomic<int> arrived{0};
    std::atomic<bool> b_inside{false};
    std::atomic<bool> a_done{false};
    const auto yield_until = [](const std::atomic<bool>& flag) {
      for (int round = 0; round < 100000 && !flag.load(); ++round) {
        this_fiber::yield();
      }
    };
    auto joiner = [&] {
      const bool is_a = arrived.fetch_add(1) == 0;
      auto [first, second] = canopy::join(
          [&] {
            if (is_a) {
              yield_until(b_inside);
              a_done.store(true);
            } else {
              b_inside.store(true);
              yield_until(a_done);
            }
            return 1;
          },
          [] { return 2; });
      return first + second;
    };
    auto a = pool.spawn(canopy::fiber(joiner));
    auto b = pool.spawn(canopy::fiber(joiner));
    static_cast<void>(a.get());
    static_cast<void>(b.get());
    std::_Exit(11);  // no stop: both joins returned
  }
  CHECK(death_signal(child, "join nesting") == SIGABRT);
}

// A callable that counts its live copies, checks that the copy the fiber
// calls (the one stored in its control block) is aligned, and can refuse
// to move.
struct counted_callable {
  static constexpr int answer = 42;
  std::atomic<int>* live;
  std::atomic<int>* misaligned;
  bool refuse_move;
  alignas(64) std::array<unsigned char, 3000> ballast{};

  counted_callable(std::atomic<int>& live_count, std::atomic<int>& misaligned_count, bool refuse)
      : live(&live_count), misaligned(&misaligned_count), refuse_move(refuse) {
    ballast.back() = answer;
    live->fetch_add(1);
  }
  counted_callable(counted_callable&& other)
      : live(other.live),
        misaligned(other.misaligned),
        refuse_move(other.refuse_move),
        ballast(other.ballast) {
    if (refuse_move) {
      throw std::runtime_error("counted_callable refuses to move");
    }
    live->fetch_add(1);
  }
  counted_callable(const counted_callable&) = delete;
  counted_callable& operator=(const counted_callable&) = delete;
  counted_callable& operator=(counted_callable&&) = delete;
  ~counted_callable() { live->fetch_sub(1); }

  int operator()() const {
    if (reinterpret_cast<std::uintptr_t>(this) % alignof(counted_callable) != 0) {
      misaligned->fetch_add(1);
    }
    return ballast.back();
  }
};

TEST_CASE("no stack for a fiber at its first run: join() throws bad_alloc, fn never runs") {
  // In a child process (fork before any other thread exists, as above)
  // whose address space is capped just above what it uses, so that the
  // stack pool's mmap for a 512 MiB stack fails on the worker.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(static_cast<unsigned>(60 * canopy::testing::timeout_scale()));
    executor pool(config_with(1));
    std::atomic<int> ran{0};
    std::atomic<int> live{0};
    std::atomic<int> misaligned{0};
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const auto in_use = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE));
    const rlimit cap{in_use + (rlim_t{64} << 20), in_use + (rlim_t{64} << 20)};
    if (::setrlimit(RLIMIT_AS, &cap) != 0) {
      std::_Exit(10);
    }
    auto starved = pool.spawn(canopy::fiber(
        [&, callable = counted_callable(live, misaligned, false)] {
          ran.fetch_add(1);
          return callable();
        },
        std::size_t{512} << 20));
    try {
      static_cast<void>(starved.get());
      std::_Exit(11);  // got a stack after all: the test would prove nothing
    } catch (const std::bad_alloc&) {
      // fn never ran and its stored copy was destroyed; the worker lives on.
      auto after = pool.spawn(canopy::fiber([] { return 7; }));
      const bool fine = ran.load() == 0 && live.load() == 0 && after.get() == 7;
      std::_Exit(fine ? 0 : 12);
    } catch (...) {
      std::_Exit(13);
    }
  }
  canopy::testing::watchdog guard("fiber without a stack", 90);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO("child status " << status);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a fiber's stored callable: large, over-aligned, cancelled, throwing; bad stack sizes") {
  canopy::testing::watchdog guard("fiber callable storage", 30);
  executor pool(config_with(1));
  std::atomic<int> live{0};
  std::atomic<int> misaligned{0};

  CHECK(pool.spawn(canopy::fiber(counted_callable(live, misaligned, false))).get() ==
        counted_callable::answer);
  CHECK(live.load() == 0);

  // Spawned and cancelled inside a fiber on the only worker: the child
  // cannot have started, so its callable is destroyed without running.
  auto parent = pool.spawn(canopy::fiber([&] {
    auto child = canopy::spawn(canopy::fiber(counted_callable(live, misaligned, false)));
    const int live_while_pending = live.load();
    const bool cancelled = child.cancel();
    bool threw = false;
    try {
      static_cast<void>(this_fiber::await(child));
    } catch (const canopy::task_cancelled&) {
      threw = true;
    }
    return std::array<int, 4>{live_while_pending, cancelled ? 1 : 0, threw ? 1 : 0, live.load()};
  }));
  const std::array<int, 4> seen = parent.get();
  CHECK(seen[0] == 1);  // the stored copy only
  CHECK(seen[1] == 1);
  CHECK(seen[2] == 1);
  CHECK(seen[3] == 0);

  CHECK_THROWS_AS(pool.spawn(canopy::fiber(counted_callable(live, misaligned, true))),
                  std::runtime_error);
  CHECK(live.load() == 0);
  {
    // The move into the fiber's control block throws: the spawn throws it
    // and frees the block; the description keeps its copy.
    auto spec = canopy::fiber(counted_callable(live, misaligned, false));
    spec.fn.refuse_move = true;
    CHECK_THROWS_AS(pool.spawn(std::move(spec)), std::runtime_error);
    CHECK(live.load() == 1);
  }
  CHECK(live.load() == 0);

  // The callable lives in the fiber's control block, not on its stack: one
  // larger than a small stack is fine. A stack size of 0 or above 1 GiB is
  // refused with an error that names the problem.
  std::array<char, 8192> big{};
  big.back() = 5;
  const auto big_callable = [big] { return static_cast<int>(big.back()); };
  CHECK(pool.spawn(canopy::fiber(big_callable, small_stack)).get() == 5);
  CHECK(pool.spawn(canopy::fiber(big_callable)).get() == 5);
  const auto reused = canopy::fiber(big_callable, small_stack);  // a description copies
  CHECK(pool.spawn(reused).get() == 5);
  CHECK(pool.try_spawn(reused).handle.get() == 5);
  for (const std::size_t bad_size : {std::size_t{0}, (std::size_t{1} << 30) + 1}) {
    try {
      static_cast<void>(pool.spawn(canopy::fiber(big_callable, bad_size)));
      FAIL("a stack of " << bad_size << " bytes was accepted");
    } catch (const std::invalid_argument& error) {
      CHECK(std::string(error.what()).find("stack") != std::string::npos);
    }
  }
  CHECK(misaligned.load() == 0);
  CHECK(pool.spawn(canopy::fiber([] { return 7; })).get() == 7);  // the executor is unharmed
}

TEST_CASE("a never-started child that fits runs on its awaiter's stack, as part of it") {
  canopy::testing::watchdog guard("nested fiber children", 60);
  executor pool(config_with(1));
  constexpr std::size_t roomy = 256 * 1024;
  // Seen from inside the child: the stack it runs on (this_fiber::stack_size)
  // and whether the executor ran it as a task of its own (stats).
  auto child_stack_size = [&](std::size_t parent_request, std::size_t child_request) {
    return pool
        .spawn(canopy::fiber(
            [child_request] {
              return this_fiber::await(canopy::spawn(
                  canopy::fiber([] { return this_fiber::stack_size(); }, child_request)));
            },
            parent_request))
        .get();
  };
  auto alone = pool.spawn(canopy::fiber([] { return this_fiber::stack_size(); }, roomy));
  const std::size_t parent_physical = alone.get();
  CHECK(parent_physical >= roomy);
  // Fits: the child sees the parent's stack.
  CHECK(child_stack_size(roomy, small_stack) == parent_physical);
  // Does not fit (asks for more than the parent has left): a stack of its own.
  const std::size_t own = child_stack_size(small_stack, roomy);
  CHECK(own >= roomy);

  // Nested, the child suspends (the parent's fiber waits), is woken from
  // another thread, throws, and its destructors run before the parent sees
  // the result.
  async_event gate;
  std::atomic<int> destroyed{0};
  std::atomic<bool> child_waiting{false};
  auto parent = pool.spawn(canopy::fiber(
      [&] {
        auto child = canopy::spawn(canopy::fiber(
            [&] {
              destroy_flag flag(destroyed);
              child_waiting.store(true);
              this_fiber::await(gate);
              throw std::runtime_error("nested child failed");
              return 0;
            },
            small_stack));
        try {
          return this_fiber::await(child);
        } catch (const std::runtime_error& error) {
          const bool expected = std::string(error.what()) == "nested child failed";
          return expected && destroyed.load() == 1 ? 1 : -1;
        }
      },
      roomy));
  REQUIRE(eventually([&] { return child_waiting.load(); }));
  // The worker is free while the nested child waits: other tasks run.
  CHECK(pool.spawn(canopy::fiber([] { return 3; })).get() == 3);
  gate.set();
  CHECK(parent.get() == 1);

  // Shutdown while a nested child waits: the parent's stack unwinds through
  // the child's frames; both destructors run and both joins report it.
  std::atomic<int> unwound{0};
  std::atomic<bool> inner_waiting{false};
  async_event never;
  canopy::join_handle<int> outer;
  {
    executor doomed(config_with(1));
    outer = doomed.spawn(canopy::fiber(
        [&] {
          destroy_flag flag(unwound);
          auto child = canopy::spawn(canopy::fiber(
              [&] {
                destroy_flag inner(unwound);
                inner_waiting.store(true);
                this_fiber::await(never);
                return 1;
              },
              small_stack));
          return this_fiber::await(child);
        },
        roomy));
    REQUIRE(eventually([&] { return inner_waiting.load(); }));
    doomed.shutdown();
  }
  CHECK(unwound.load() == 2);
  CHECK_THROWS_AS(outer.get(), canopy::task_cancelled);
}

TEST_CASE("cancel a fiber before it starts, and while it is suspended (its stack unwinds)") {
  canopy::testing::watchdog guard("fiber cancel", 30);
  executor pool(config_with(1));
  std::atomic<int> ran{0};
  std::atomic<int> destroyed{0};
  {
    worker_gate busy(pool, 1);
    auto victim = pool.spawn(canopy::fiber([&] { ran.fetch_add(1); }));
    CHECK(victim.cancel());
    busy.open();
    CHECK_THROWS_AS(victim.get(), canopy::task_cancelled);
    CHECK(ran.load() == 0);
  }

  async_event never;
  auto waiting = pool.spawn(canopy::fiber([&] {
    destroy_flag flag(destroyed);
    ran.fetch_add(1);
    this_fiber::await(never);
    return 1;
  }));
  REQUIRE(eventually([&] { return ran.load() == 1; }));
  CHECK(waiting.cancel());
  CHECK_THROWS_AS(waiting.get(), canopy::task_cancelled);
  CHECK(destroyed.load() == 1);

  // Suspended on a child's handle. The child (default stack) fits on the
  // parent's stack, so it runs there as part of the parent and is unwound
  // with it; had a thief started it first, the parent would be unwound once
  // the child ended. Either way both stacks unwind.
  async_event child_gate;
  std::atomic<bool> child_started{false};
  auto parent = pool.spawn(canopy::fiber([&] {
    destroy_flag flag(destroyed);
    auto child = canopy::spawn(canopy::fiber([&] {
      child_started.store(true);
      this_fiber::await(child_gate);
      return 2;
    }));
    return this_fiber::await(child);
  }));
  REQUIRE(eventually([&] { return child_started.load(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(parent.cancel());
  CHECK_THROWS_AS(parent.get(), canopy::task_cancelled);
  child_gate.set();
  CHECK(eventually([&] { return destroyed.load() == 2; }));
}

TEST_CASE("a fiber that swallows fiber_unwind and suspends again ends as cancelled") {
  canopy::testing::watchdog guard("swallowed unwind", 30);
  executor pool(config_with(1));
  async_event never;
  std::atomic<int> rethrows{0};
  std::atomic<bool> started{false};
  auto handle = pool.spawn(canopy::fiber([&] {
    started = true;
    for (int attempt = 0; attempt < 3; ++attempt) {
      try {
        this_fiber::await(never);
      } catch (const canopy::fiber_unwind&) {
        rethrows.fetch_add(1);  // swallowed; the next suspension throws again
      }
    }
    return 1;
  }));
  // Cancel only once the fiber runs: a fiber cancelled before its first run
  // is dropped unrun and would never reach the loop (a fixed sleep here
  // failed on a loaded machine).
  REQUIRE(eventually([&] { return started.load(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(handle.cancel());
  CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);  // aborted the process before
  CHECK(rethrows.load() == 3);
}

TEST_CASE("shutdown unwinds suspended fibers and frees their stacks") {
  canopy::testing::watchdog guard("fiber shutdown", 60);
  std::atomic<int> destroyed{0};
  std::atomic<int> started{0};
  std::vector<canopy::join_handle<int>> handles;
  async_event never;
  const std::size_t in_use_before = canopy::stack_pool::stats().in_use;
  {
    executor pool(config_with(2));
    for (int index = 0; index < 100; ++index) {
      handles.push_back(pool.spawn(canopy::fiber([&] {
        destroy_flag flag(destroyed);
        started.fetch_add(1);
        this_fiber::await(never);
        return 1;
      })));
      handles.push_back(pool.spawn(canopy::fiber([&] {
        destroy_flag flag(destroyed);
        started.fetch_add(1);
        return this_fiber::await(canopy::spawn(canopy::fiber([&] {
          destroy_flag inner(destroyed);
          started.fetch_add(1);
          this_fiber::await(never);
          return 1;
        })));
      })));
    }
    REQUIRE(eventually([&] { return started.load() == 300; }));
    pool.shutdown();
  }
  CHECK(destroyed.load() == 300);
  for (auto& handle : handles) {
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
  }
  // Stacks went back to the pool (thread caches of exited workers included).
  CHECK(canopy::stack_pool::stats().in_use <= in_use_before + 64);
}

TEST_CASE("race: fiber waits vs. wakes from foreign threads") {
  canopy::testing::watchdog guard("fiber races", 300);
  executor pool(config_with(4));
  const long rounds = 100'000 / canopy::testing::stress_divisor();
  std::vector<async_event> events(static_cast<std::size_t>(rounds));
  auto fiber = pool.spawn(canopy::fiber([&] {
    long passed = 0;
    for (auto& event : events) {
      this_fiber::await(event);
      ++passed;
    }
    return passed;
  }));
  std::thread setter([&] {
    for (auto& event : events) {
      event.set();
    }
  });
  setter.join();
  CHECK(fiber.get() == rounds);

  // wait_for_wake ping-pong with a foreign thread.
  std::atomic<long> produced{0};
  std::atomic<long> consumed{0};
  std::atomic<bool> ready{false};
  canopy::waker waker;
  auto consumer = pool.spawn(canopy::fiber([&] {
    waker = canopy::current_waker();
    ready.store(true);
    long seen = 0;
    while (seen < rounds) {
      const long now = produced.load();
      if (now > seen) {
        seen = now;
        consumed.store(seen);
        continue;
      }
      this_fiber::wait_for_wake();
    }
    return seen;
  }));
  while (!ready.load()) {
    std::this_thread::yield();
  }
  for (long index = 1; index <= rounds; ++index) {
    produced.store(index);
    waker.wake();
    for (int spin = 0; consumed.load() < index; ++spin) {
      if (spin > 64) {
        std::this_thread::yield();
      }
    }
  }
  CHECK(consumer.get() == rounds);
}

TEST_CASE(
    "a refused coroutine or fiber spawn is a spawn_error, and the refused task is destroyed") {
  canopy::testing::watchdog guard("refused spawns", 60);
  std::atomic<int> destroyed{0};
  const auto flag = [&destroyed] { return std::make_shared<destroy_flag>(destroyed); };

  SUBCASE("after shutdown") {
    executor pool(config_with(2));
    pool.shutdown();
    CHECK(spawn_error_of([&] { static_cast<void>(pool.spawn(holding(flag()))); }) ==
          canopy::errc::shut_down);
    CHECK(destroyed.load() == 1);
    CHECK(spawn_error_of([&] { pool.spawn_detached(holding(flag())); }) == canopy::errc::shut_down);
    CHECK(destroyed.load() == 2);
    CHECK(spawn_error_of([&] {
            static_cast<void>(
                pool.spawn(canopy::fiber([held = flag()] { return held != nullptr; })));
          }) == canopy::errc::shut_down);
    CHECK(destroyed.load() == 3);
    CHECK(spawn_error_of([&] {
            pool.spawn_detached(canopy::fiber([held = flag()] { return held != nullptr; }));
          }) == canopy::errc::shut_down);
    CHECK(destroyed.load() == 4);
    CHECK(pool.try_spawn(canopy::fiber([held = flag()] { return held != nullptr; })).error ==
          canopy::errc::shut_down);
    CHECK(destroyed.load() == 5);
  }

  SUBCASE("from a task, at capacity") {
    executor_config config = config_with(1);
    config.signals_per_leaf = 1;  // 64 tasks a leaf
    config.max_leaves = 1;        // capacity: 64 tasks, the spawning one included
    executor pool(config);
    int accepted = 0;
    std::optional<canopy::errc> coroutine_refusal;
    std::optional<canopy::errc> fiber_refusal;
    std::optional<canopy::errc> detached_refusal;
    std::optional<canopy::errc> detached_fiber_refusal;
    std::error_code tried_fiber;
    int destroyed_after_refusals = 0;
    pool.spawn([&] {
          // The only worker runs this task, so nothing it spawns can start.
          std::vector<canopy::join_handle<int>> children;
          for (;;) {
            coroutine_refusal =
                spawn_error_of([&] { children.push_back(canopy::spawn(holding(flag()))); });
            if (coroutine_refusal) {
              break;
            }
            ++accepted;
          }
          fiber_refusal = spawn_error_of([&] {
            static_cast<void>(
                canopy::spawn(canopy::fiber([held = flag()] { return held != nullptr; })));
          });
          detached_refusal = spawn_error_of([&] { canopy::spawn_detached(holding(flag())); });
          detached_fiber_refusal = spawn_error_of([&] {
            canopy::spawn_detached(canopy::fiber([held = flag()] { return held != nullptr; }));
          });
          tried_fiber =
              canopy::try_spawn(canopy::fiber([held = flag()] { return held != nullptr; })).error;
          destroyed_after_refusals = destroyed.load();
        })
        .get();
    CHECK(accepted == 63);
    CHECK(coroutine_refusal == canopy::errc::at_capacity);
    CHECK(fiber_refusal == canopy::errc::at_capacity);
    CHECK(detached_refusal == canopy::errc::at_capacity);
    CHECK(detached_fiber_refusal == canopy::errc::at_capacity);
    CHECK(tried_fiber == canopy::errc::at_capacity);
    CHECK(destroyed_after_refusals == 5);  // the five refused tasks, at once
    pool.shutdown();                       // the 63 detached children run, then end
    CHECK(destroyed.load() == 5 + 63);
  }
}
