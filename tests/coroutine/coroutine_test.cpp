// C++20 coroutine tasks: task<T>, spawning, awaiting handles, yield,
// when_all, block_on, wakers, async_event, cancellation, shutdown, scale.
#include "coroutine/coroutine.hpp"
#include "executor/sanitizers.hpp"

#include <doctest/doctest.h>
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

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

namespace {

long scaled(long iterations) { return iterations / canopy::testing::stress_divisor(); }

task<int> constant(int value) { co_return value; }

task<void> nothing() { co_return; }

task<long> fib(int n) {
  if (n < 2) {
    co_return n;
  }
  auto left = canopy::spawn(fib(n - 1));
  auto right = canopy::spawn(fib(n - 2));
  co_return co_await left + co_await right;
}

task<long> depth(long n) {
  if (n == 0) {
    co_return 0;
  }
  co_return 1 + co_await depth(n - 1);
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("spawn a task and join its value on every pool size", workers_t,
                          coroutine_sizes) {
  canopy::testing::watchdog guard("coroutine spawn/join", 60);
  executor pool(config_with(workers_t::value));
  std::vector<canopy::join_handle<int>> handles;
  for (int index = 0; index < 1000; ++index) {
    handles.push_back(pool.spawn(constant(index)));
  }
  long sum = 0;
  for (auto& handle : handles) {
    sum += handle.get();
  }
  CHECK(sum == 999L * 1000L / 2);
  canopy::join_handle<void> plain = pool.spawn(nothing());  // converts to a plain join_handle
  plain.get();
  CHECK_FALSE(plain.valid());
  CHECK(canopy::block_on(pool, fib(15)) == 610);
}
TEST_CASE_TEMPLATE_INVOKE(coroutine_sizes, std::integral_constant<std::size_t, 1>,
                          std::integral_constant<std::size_t, 2>,
                          std::integral_constant<std::size_t, 4>);

TEST_CASE("a task is lazy: nothing runs until it is awaited or spawned") {
  canopy::testing::watchdog guard("lazy", 30);
  std::atomic<int> ran{0};
  auto body = [&]() -> task<int> {
    ran.fetch_add(1);
    co_return 1;
  };
  {
    task<int> never = body();
    CHECK(never.valid());
  }  // destroyed unstarted
  CHECK(ran.load() == 0);
  executor pool(config_with(2));
  CHECK(canopy::block_on(pool, body()) == 1);
  CHECK(ran.load() == 1);
}

TEST_CASE("co_await task runs it inline; deep inline recursion does not grow the stack") {
  canopy::testing::watchdog guard("inline await", 60);
  executor pool(config_with(2));
  auto outer = []() -> task<int> {
    const int a = co_await constant(20);
    const int b = co_await constant(22);
    co_await nothing();
    co_return a + b;
  };
  CHECK(canopy::block_on(pool, outer()) == 42);
  // Symmetric transfer: 100,000 nested frames on an 8 MiB thread stack
  // would overflow if each await were a nested call.
#if defined(CANOPY_ADDRESS_SANITIZER)
  // AddressSanitizer's instrumentation keeps a stack frame per symmetric
  // transfer (no tail call), so there the depth is only a correctness check;
  // the "no stack growth" property is checked by the plain and TSan builds.
  const long levels = 2000;
#else
  const long levels = 100000 / canopy::testing::stress_divisor();
#endif
  CHECK(canopy::block_on(pool, depth(levels)) == levels);
}

TEST_CASE("exceptions propagate through spawned and inline awaits to join") {
  canopy::testing::watchdog guard("exceptions", 30);
  executor pool(config_with(2));
  auto thrower = []() -> task<int> {
    co_await canopy::yield_now();
    throw std::runtime_error("deep failure");
  };
  auto middle = [&]() -> task<int> {
    auto child = canopy::spawn(thrower());
    co_return co_await child + 1;  // rethrows here
  };
  auto top = [&]() -> task<int> {
    int value = co_await middle();  // inline: rethrows again
    co_return value;
  };
  auto handle = pool.spawn(top());
  CHECK_THROWS_WITH_AS(handle.get(), "deep failure", std::runtime_error);

  // Caught inside a task, the exception is an ordinary value again.
  auto catcher = [&]() -> task<std::string> {
    try {
      co_await canopy::spawn(thrower());
    } catch (const std::runtime_error& error) {
      co_return std::string("caught ") + error.what();
    }
    co_return "not thrown";
  };
  CHECK(canopy::block_on(pool, catcher()) == "caught deep failure");
  CHECK_THROWS_AS(canopy::block_on(pool, thrower()), std::runtime_error);
}

// A counted parameter: its copy in a coroutine frame counts when the frame goes.
struct frame_param {
  std::atomic<int>* count;
  explicit frame_param(std::atomic<int>& target) : count(&target) {}
  frame_param(const frame_param& other) : count(other.count) {}
  ~frame_param() {
    if (count != nullptr) {
      count->fetch_add(1);
    }
  }
};

task<int> counted_child(frame_param, async_event* gate) {
  if (gate != nullptr) {
    co_await *gate;
  }
  co_return 7;
}

TEST_CASE("an inline-awaited task frees its own frame: result, exception, cancel while suspended") {
  canopy::testing::watchdog guard("inline frame", 30);
  executor pool(config_with(1));

  // The awaited task's frame (its parameters included) is gone before the
  // awaiter continues; an lvalue task is left empty.
  std::atomic<int> params{0};
  auto consume = [&]() -> task<bool> {
    task<int> inner = counted_child(frame_param(params), nullptr);
    const int before = params.load();  // the argument temporary only
    const int value = co_await inner;
    co_return value == 7 && !inner.valid() && params.load() == before + 1;
  };
  CHECK(canopy::block_on(pool, consume()));

  // An exception from an awaited task that suspended first.
  auto thrower = []() -> task<int> {
    co_await canopy::yield_now();
    throw std::runtime_error("inline failure");
  };
  auto catcher = [&]() -> task<int> {
    try {
      co_return co_await thrower();
    } catch (const std::runtime_error&) {
      co_return -1;
    }
  };
  CHECK(canopy::block_on(pool, catcher()) == -1);

  // Cancelled while the awaited task is suspended: both frames are destroyed.
  std::atomic<int> destroyed{0};
  std::atomic<bool> waiting{false};
  async_event never;
  auto outer = [&]() -> task<int> {
    destroy_flag flag(destroyed);
    waiting.store(true);
    co_return co_await counted_child(frame_param(destroyed), &never);
  };
  auto handle = pool.spawn(outer());
  REQUIRE(eventually([&] { return waiting.load(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(destroyed.load() == 0);
  CHECK(handle.cancel());
  CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
  // The child's parameter, and in the outer frame the argument temporary
  // and the flag.
  CHECK(destroyed.load() == 3);
}

TEST_CASE("co_await on a join handle of a callable task, moved or borrowed") {
  canopy::testing::watchdog guard("await callable", 30);
  executor pool(config_with(2));
  auto body = [&]() -> task<int> {
    auto first = pool.spawn([] { return 40; });
    const int a = co_await first;  // borrowed: consumed like get()
    CHECK_FALSE(first.valid());
    const int b = co_await pool.spawn([] { return 2; });  // a temporary
    auto third = pool.spawn([] { return 0; });
    const int c = co_await std::move(third);
    co_return a + b + c;
  };
  CHECK(canopy::block_on(pool, body()) == 42);
}

TEST_CASE("awaiting a callable task that has not started runs it at the join") {
  canopy::testing::watchdog guard("callable run at join", 30);
  executor pool(config_with(1));
  const auto runs = [&] { return pool.stats().total().tasks_run; };
  auto parent = [&]() -> task<int> {
    auto child = pool.spawn([] { return 7; });  // queued behind us on the only worker
    co_return co_await child;
  };
  const std::uint64_t before = runs();
  CHECK(pool.spawn(parent()).get() == 7);
  REQUIRE(eventually([&] { return pool.stats().sleeping_workers == 1; }));
  // The parent's one run and the child's, nested in it. Had the parent
  // suspended on the child, it would have run a second time.
  CHECK(runs() - before == 2);
}

TEST_CASE("awaiting a pending task of another executor waits for it there") {
  // Run-at-join must not take a child of another executor: its task id
  // names a slot of that executor's arena, not of the awaiter's.
  canopy::testing::watchdog guard("cross-executor await", 60);
  executor home(config_with(2));
  executor other(config_with(1));
  std::atomic<bool> opened{false};
  worker_gate closed(other, 1);
  std::vector<canopy::join_handle<void>> fillers;
  for (int index = 0; index < 9000; ++index) {  // push the child's slot past home's arena
    fillers.push_back(other.spawn([] {}));
  }
  // Coroutine lambdas without captures: a capture would dangle once the
  // closure temporary is gone.
  auto child =
      other.spawn([](std::atomic<bool>* flag) -> task<bool> { co_return flag->load(); }(&opened));
  auto parent = home.spawn([](canopy::join_handle<bool>* awaited) -> task<bool> {
    co_return co_await *awaited;
  }(&child));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  opened.store(true);
  closed.open();
  CHECK(parent.get());  // the child ran on `other`, after its gate opened
  for (auto& filler : fillers) {
    filler.get();
  }
}

TEST_CASE("yield_now ends the run as yielded and lets other ready tasks run") {
  canopy::testing::watchdog guard("yield", 30);
  executor pool(config_with(1));
  std::mutex log_mutex;
  std::string log;
  auto writer = [&](char name) -> task<void> {
    for (int index = 0; index < 50; ++index) {
      {
        const std::lock_guard lock(log_mutex);
        log.push_back(name);
      }
      co_await canopy::yield_now();
    }
  };
  std::uint64_t yields_before = 0;
  for (const auto& worker : pool.stats().workers) {
    yields_before += worker.yields;
  }
  canopy::join_handle<void> a;
  canopy::join_handle<void> b;
  {
    worker_gate busy(pool, 1);
    a = pool.spawn(writer('A'));
    b = pool.spawn(writer('B'));
  }
  a.get();
  b.get();
  std::uint64_t yields_after = 0;
  for (const auto& worker : pool.stats().workers) {
    yields_after += worker.yields;
  }
  CHECK(yields_after - yields_before >= 100);
  REQUIRE(log.size() == 100);
  // Neither task ran all of its steps before the other started.
  CHECK(log.find('B') < log.rfind('A'));
  CHECK(log.find('A') < log.rfind('B'));
}

TEST_CASE("when_all runs tasks concurrently, returns all values, rethrows the first error") {
  canopy::testing::watchdog guard("when_all", 30);
  executor pool(config_with(4));
  auto pair = []() -> task<int> {
    auto [a, b, none] = co_await canopy::when_all(constant(1), constant(2), nothing());
    static_cast<void>(none);
    co_return a * 10 + b;
  };
  CHECK(canopy::block_on(pool, pair()) == 12);

  auto many = []() -> task<long> {
    std::vector<task<long>> work;
    for (int n = 0; n < 20; ++n) {
      work.push_back(fib(n));
    }
    std::vector<long> values = co_await canopy::when_all(std::move(work));
    long sum = 0;
    for (long value : values) {
      sum += value;
    }
    co_return sum;
  };
  CHECK(canopy::block_on(pool, many()) == 10945);  // fib(0..19) sums to fib(21) - 1

  std::atomic<int> finished{0};
  auto slow_ok = [&]() -> task<int> {
    for (int index = 0; index < 20; ++index) {
      co_await canopy::yield_now();
    }
    finished.fetch_add(1);
    co_return 1;
  };
  auto fails = []() -> task<int> {
    throw std::invalid_argument("first");
    co_return 0;
  };
  auto failing = [&]() -> task<int> {
    auto [a, b, c] = co_await canopy::when_all(slow_ok(), fails(), slow_ok());
    co_return a + b + c;
  };
  CHECK_THROWS_WITH_AS(canopy::block_on(pool, failing()), "first", std::invalid_argument);
  CHECK(finished.load() == 2);  // when_all waited for the others before rethrowing
}

TEST_CASE("block_on on a worker thread is an error, not a deadlock; spawn outside a task too") {
  canopy::testing::watchdog guard("block_on on worker", 30);
  executor pool(config_with(1));
  auto result = pool.spawn([&]() -> int {
    try {
      return canopy::block_on(pool, constant(1));
    } catch (const std::system_error& error) {
      return error.code() == canopy::errc::worker_thread ? -1 : -2;
    }
  });
  CHECK(result.get() == -1);
  CHECK_THROWS_AS(canopy::spawn(constant(1)), std::logic_error);
  CHECK_THROWS_AS(canopy::current_waker(), std::logic_error);
}

TEST_CASE("async_event: waiters suspend without a worker and all resume on set") {
  canopy::testing::watchdog guard("async_event", 30);
  executor pool(config_with(1));
  async_event ready;
  std::atomic<int> resumed{0};
  auto waiter = [&]() -> task<int> {
    co_await ready;
    resumed.fetch_add(1);
    co_return 1;
  };
  std::vector<canopy::join_handle<int>> handles;
  for (int index = 0; index < 100; ++index) {
    handles.push_back(pool.spawn(waiter()));
  }
  // One worker, 100 waiting tasks: a callable still runs, so none holds it.
  CHECK(pool.spawn([] { return 7; }).get() == 7);
  CHECK(resumed.load() == 0);
  ready.set();
  int total = 0;
  for (auto& handle : handles) {
    total += handle.get();
  }
  CHECK(total == 100);
  CHECK(resumed.load() == 100);
  // Already set: no suspension at all.
  CHECK(canopy::block_on(pool, waiter()) == 1);
  ready.reset();
  CHECK_FALSE(ready.is_set());
}

TEST_CASE("fork-join fib(30) with coroutine tasks") {
  canopy::testing::watchdog guard("coroutine fib(30)", 300);
  executor pool;
  const int n = canopy::testing::stress_divisor() > 1 ? 22 : 30;
  const auto start = std::chrono::steady_clock::now();
  const long value = canopy::block_on(pool, fib(n));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  CHECK(value == (n == 30 ? 832040 : 17711));
  MESSAGE("coroutine fib(" << n << ") = " << value << " in " << ms << " ms on "
                           << pool.worker_count() << " workers");
}

TEST_CASE("one million pending coroutine tasks fit; bytes per pending task") {
  canopy::testing::watchdog guard("1M pending", 600);
  const long count = scaled(1'000'000);
  executor pool;
  async_event release;
  std::atomic<long> started{0};
  auto pending = [&](long index) -> task<long> {
    started.fetch_add(1, std::memory_order_relaxed);
    co_await release;
    co_return index;
  };
  std::vector<canopy::join_handle<long>> handles;
  handles.reserve(static_cast<std::size_t>(count));
  // Heap in use: small blocks plus mmap'ed ones (the arena's 256 KiB leaves).
  const auto heap = [] {
    const struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
  };
  // Frame size alone: frames created but not spawned.
  {
    std::vector<task<long>> frames;
    frames.reserve(1000);
    const std::size_t heap_vector = heap();
    for (int index = 0; index < 1000; ++index) {
      frames.push_back(pending(index));
    }
    MESSAGE("coroutine frame (heap, incl. malloc overhead): "
            << (heap() - heap_vector) / 1000 << " bytes; join state object "
            << sizeof(canopy::detail::join_state<long>) << " bytes; slot 64 bytes");
  }
  const std::size_t heap_before = heap();
  for (long index = 0; index < count; ++index) {
    handles.push_back(pool.spawn(pending(index)));
  }
  REQUIRE(eventually([&] { return started.load() == count; }, 300));
  const std::size_t heap_after = heap();
  const double heap_per_task = static_cast<double>(heap_after - heap_before) / count;
  MESSAGE(count << " pending tasks: " << heap_per_task
                << " bytes per pending task (frame + join state + slot, malloc overhead "
                   "included)");
  CHECK(heap_per_task < 1024);
  release.set();
  long sum = 0;
  for (auto& handle : handles) {
    sum += handle.get();
  }
  CHECK(sum == count * (count - 1) / 2);
}

TEST_CASE("wakers: wake from a foreign thread; stale after the task ends") {
  canopy::testing::watchdog guard("wakers", 30);
  executor_config config = config_with(1);
  config.max_leaves = 1;
  config.signals_per_leaf = 1;  // 64 slots: a freed slot is reused soon
  executor pool(config);

  // A task that parks until a flag is set, resumed by a foreign thread.
  std::atomic<bool> flag{false};
  std::atomic<bool> published{false};
  canopy::waker stored;
  auto parker = [&]() -> task<int> {
    stored = canopy::current_waker();
    published.store(true);
    int resumes = 0;
    while (!flag.load()) {
      co_await canopy::wait_for_wake();
      ++resumes;
    }
    co_return resumes;
  };
  auto handle = pool.spawn(parker());
  REQUIRE(eventually([&] { return published.load(); }));
  CHECK(stored.id().slot == handle.id().slot);
  std::thread foreign([&] {
    flag.store(true);
    CHECK(stored.wake());
  });
  foreign.join();
  CHECK(handle.get() >= 1);

  // The waker outlives its task: waking is a no-op, and a new task in the
  // same slot (newer generation) is not woken by it. get() can return a
  // moment before the worker retires the slot (waker.hpp), so the wake turns
  // stale eventually, not necessarily at once; until then it is absorbed.
  CHECK(eventually([&] { return !stored.wake(); }));
  std::atomic<int> stop{0};
  std::vector<canopy::join_handle<int>> sleepers;
  std::vector<std::unique_ptr<std::atomic<int>>> resumes;
  std::mutex wakers_mutex;
  std::vector<canopy::waker> wakers;
  bool reused = false;
  // (A coroutine lambda's captures live in the lambda object, which must
  // outlive the task: keep it outside the loop, pass per-task data.)
  auto sleeper = [&](std::atomic<int>* mine) -> task<int> {
    {
      const std::lock_guard lock(wakers_mutex);
      wakers.push_back(canopy::current_waker());
    }
    while (stop.load() == 0) {
      co_await canopy::wait_for_wake();
      mine->fetch_add(1);
    }
    co_return 0;
  };
  for (int attempt = 0; attempt < 64 && !reused; ++attempt) {  // 64 slots: reuse guaranteed
    resumes.push_back(std::make_unique<std::atomic<int>>(0));
    sleepers.push_back(pool.spawn(sleeper(resumes.back().get())));
    reused = sleepers.back().id().slot == stored.id().slot;
  }
  REQUIRE(reused);
  REQUIRE(eventually([&] {
    const std::lock_guard lock(wakers_mutex);
    return wakers.size() == sleepers.size();
  }));
  CHECK(sleepers.back().id().generation != stored.id().generation);
  CHECK_FALSE(stored.wake());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(resumes.back()->load() == 0);  // the stale wake did not reach the new task
  stop.store(1);
  {
    const std::lock_guard lock(wakers_mutex);
    for (const auto& waker : wakers) {
      waker.wake();
    }
  }
  for (auto& sleeper : sleepers) {
    CHECK(sleeper.get() == 0);
  }
}

TEST_CASE("a wake while the task runs reschedules it exactly once after the run") {
  canopy::testing::watchdog guard("wake while running", 30);
  executor pool(config_with(2));
  std::atomic<int> resumes{0};
  std::atomic<bool> finish{false};
  canopy::waker self;
  std::atomic<bool> published{false};
  auto body = [&]() -> task<void> {
    self = canopy::current_waker();
    published.store(true);
    for (int index = 0; index < 3; ++index) {
      self.wake();  // during the run: SCHEDULED is set, no second signal
    }
    co_await canopy::wait_for_wake();  // resumed once, by the run's re-signal
    resumes.fetch_add(1);
    while (!finish.load()) {
      co_await canopy::wait_for_wake();  // must stay here until woken again
      resumes.fetch_add(1);
    }
  };
  auto handle = pool.spawn(body());
  REQUIRE(eventually([&] { return resumes.load() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(resumes.load() == 1);
  REQUIRE(published.load());
  finish.store(true);
  CHECK(self.wake());
  handle.get();
  CHECK(resumes.load() == 2);
}

TEST_CASE("race: wake vs. suspend, join completion vs. await, event set vs. wait (1e6 total)") {
  canopy::testing::watchdog guard("wake races", 600);
  executor pool(config_with(4));
  const long divisor = canopy::testing::stress_divisor();

  // 1. Ping-pong with a foreign thread: 2 pairs x 250,000 wake/suspend races.
  struct channel {
    std::atomic<long> produced{0};
    std::atomic<long> consumed{0};
    std::atomic<bool> ready{false};
    canopy::waker waker;
  };
  const long rounds = 250'000 / divisor;
  channel channels[2];
  auto consumer = [](channel& ch, long total) -> task<long> {
    ch.waker = canopy::current_waker();
    ch.ready.store(true, std::memory_order_release);
    long seen = 0;
    long suspensions = 0;
    while (seen < total) {
      const long produced = ch.produced.load(std::memory_order_acquire);
      if (produced > seen) {
        seen = produced;
        ch.consumed.store(seen, std::memory_order_release);
        continue;
      }
      ++suspensions;
      co_await canopy::wait_for_wake();
    }
    co_return suspensions;
  };
  std::vector<canopy::join_handle<long>> consumers;
  std::vector<std::thread> producers;
  for (auto& ch : channels) {
    consumers.push_back(pool.spawn(consumer(ch, rounds)));
    producers.emplace_back([&ch, rounds] {
      while (!ch.ready.load(std::memory_order_acquire)) {
        std::this_thread::yield();
      }
      for (long index = 1; index <= rounds; ++index) {
        ch.produced.store(index, std::memory_order_release);
        ch.waker.wake();
        for (int spin = 0; ch.consumed.load(std::memory_order_acquire) < index; ++spin) {
          if (spin > 64) {
            std::this_thread::yield();
          }
        }
      }
    });
  }
  for (auto& producer : producers) {
    producer.join();
  }
  for (auto& handle : consumers) {
    CHECK(handle.get() > 0);
  }

  // 2. Child completion vs. the parent's await: 300,000 spawn + co_await.
  const long joins = 300'000 / divisor;
  auto joiner = [](long total) -> task<long> {
    long sum = 0;
    for (long index = 0; index < total; ++index) {
      sum += co_await canopy::spawn(constant(1));
    }
    co_return sum;
  };
  auto join_a = pool.spawn(joiner(joins / 2));
  auto join_b = pool.spawn(joiner(joins - joins / 2));
  CHECK(join_a.get() + join_b.get() == joins);

  // 3. Event set (foreign thread) vs. a task arming its wait: 200,000 events.
  const long event_count = 200'000 / divisor;
  std::vector<async_event> events(static_cast<std::size_t>(event_count));
  auto waiter = [&]() -> task<long> {
    long passed = 0;
    for (auto& event : events) {
      co_await event;
      ++passed;
    }
    co_return passed;
  };
  auto event_task = pool.spawn(waiter());
  std::thread setter([&] {
    for (auto& event : events) {
      event.set();
    }
  });
  setter.join();
  CHECK(event_task.get() == event_count);
}

TEST_CASE("cancel: before start it never runs; while suspended its frame is destroyed") {
  canopy::testing::watchdog guard("cancel", 30);
  executor pool(config_with(1));
  std::atomic<int> ran{0};
  std::atomic<int> destroyed{0};

  // Before start.
  {
    worker_gate busy(pool, 1);
    auto body = [&]() -> task<int> {
      ran.fetch_add(1);
      co_return 1;
    };
    auto victim = pool.spawn(body());
    CHECK(victim.cancel());
    busy.open();
    CHECK_THROWS_AS(victim.get(), canopy::task_cancelled);
    CHECK(ran.load() == 0);
  }

  // Suspended on an event: the frame is destroyed at once.
  async_event never;
  auto on_event = [&]() -> task<int> {
    destroy_flag flag(destroyed);
    ran.fetch_add(1);
    co_await never;
    co_return 1;
  };
  auto suspended = pool.spawn(on_event());
  REQUIRE(eventually([&] { return ran.load() == 1; }));
  CHECK(suspended.cancel());
  CHECK_THROWS_AS(suspended.get(), canopy::task_cancelled);
  CHECK(destroyed.load() == 1);

  // Suspended on a child's join handle: the child is asked to cancel and
  // the parent's frame dies when the child has ended.
  std::atomic<int> child_destroyed{0};
  std::atomic<bool> child_waiting{false};
  async_event child_gate;
  auto child = [&]() -> task<int> {
    destroy_flag flag(child_destroyed);
    child_waiting.store(true);
    co_await child_gate;
    co_return 5;
  };
  auto parent = [&]() -> task<int> {
    destroy_flag flag(destroyed);
    auto handle = canopy::spawn(child());
    co_return co_await handle;
  };
  auto waiting = pool.spawn(parent());
  // The parent runs, spawns the child and awaits it; wait until the child
  // is parked on its gate (then the parent is suspended on the child, or is
  // about to be: either way it has started, so cancel() finds it running or
  // suspended, never unstarted).
  REQUIRE(eventually([&] { return child_waiting.load(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(waiting.cancel());
  CHECK_THROWS_AS(waiting.get(), canopy::task_cancelled);
  child_gate.set();  // the child wakes, sees the cancel request, is destroyed
  CHECK(eventually([&] { return destroyed.load() == 2 && child_destroyed.load() == 1; }));

  // Cancel after completion: nothing to do.
  auto done = pool.spawn(constant(3));
  CHECK(done.get() == 3);
  auto done_again = pool.spawn(constant(4));
  REQUIRE(eventually([&] { return done_again.ready(); }));
  CHECK_FALSE(done_again.cancel());
  CHECK(done_again.get() == 4);
}

TEST_CASE("dropping a handle detaches: the task still runs to its end") {
  canopy::testing::watchdog guard("detach", 30);
  executor pool(config_with(2));
  std::atomic<int> finished{0};
  async_event go;
  auto body = [&]() -> task<void> {  // outlives the tasks (captures live in it)
    co_await go;
    finished.fetch_add(1);
  };
  { auto dropped = pool.spawn(body()); }
  pool.spawn_detached(body());
  go.set();
  CHECK(eventually([&] { return finished.load() == 2; }));
}

TEST_CASE("shutdown destroys suspended coroutine tasks, running their destructors") {
  canopy::testing::watchdog guard("shutdown suspended", 60);
  std::atomic<int> destroyed{0};
  std::atomic<int> started{0};
  std::atomic<int> own_task_leaves{0};
  std::vector<canopy::join_handle<int>> handles;
  async_event never;
  std::uint64_t dropped = 0;
  {
    executor pool(config_with(2));
    // `spawner` is the waker of the task that spawned the leaf (empty for
    // the test's own spawns): a leaf that sees another one runs as a task
    // of its own.
    auto leaf = [&](canopy::waker spawner) -> task<int> {
      destroy_flag flag(destroyed);
      started.fetch_add(1);
      if (canopy::current_waker() != spawner) {
        own_task_leaves.fetch_add(1);
      }
      co_await never;
      co_return 1;
    };
    auto parent = [&]() -> task<int> {
      destroy_flag flag(destroyed);
      started.fetch_add(1);
      co_return co_await canopy::spawn(leaf(canopy::current_waker()));
    };
    auto inline_parent = [&]() -> task<int> {
      destroy_flag flag(destroyed);
      started.fetch_add(1);
      co_return co_await parent();  // inline chain: parent's frame is owned here
    };
    for (int index = 0; index < 100; ++index) {
      handles.push_back(pool.spawn(leaf(canopy::waker{})));
      handles.push_back(pool.spawn(parent()));
      handles.push_back(pool.spawn(inline_parent()));
    }
    // 100 leaves + 100 (parent + its leaf) + 100 (inline_parent + parent + leaf)
    REQUIRE(eventually([&] { return started.load() == 600; }));
    pool.shutdown();
    dropped = pool.stats().dropped_tasks;
  }
  CHECK(destroyed.load() == 600);
  // The 300 spawned by the test, and each leaf a parent spawned that ran as
  // a task of its own: an idle worker stole it before its parent's await.
  // The others had not started when their parents awaited them: each was
  // taken over and ran inside its parent (coroutine/join_await.hpp), whose
  // drop destroyed it.
  const int stolen_leaves = own_task_leaves.load() - 100;
  CHECK(stolen_leaves >= 0);
  CHECK(stolen_leaves <= 200);
  CHECK(dropped == 300 + static_cast<std::uint64_t>(stolen_leaves));
  for (auto& handle : handles) {
    CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
  }
}

TEST_CASE("executor::spawn_detached takes coroutine tasks as well as callables") {
  canopy::testing::watchdog guard("spawn_detached task", 30);
  std::atomic<int> ran{0};
  {
    executor pool(config_with(2));
    auto work = [&ran]() -> task<void> {
      ran.fetch_add(1);
      co_return;
    };
    for (int index = 0; index < 100; ++index) {
      pool.spawn_detached(work());
      pool.spawn_detached([&ran] { ran.fetch_add(1); });
    }
    pool.shutdown();  // drain: every detached task runs
  }
  CHECK(ran.load() == 200);
}

namespace {

// A user's awaiter around any of Canopy's awaitables: it only forwards the
// task's handle, and says so with the marker (docs/coroutines.md).
template <class Inner>
struct counted_await {
  using canopy_awaiter = void;
  Inner inner;
  int* suspensions;
  bool await_ready() { return inner.await_ready(); }
  template <class Promise>
  auto await_suspend(std::coroutine_handle<Promise> self) {
    ++*suspensions;
    return inner.await_suspend(self);
  }
  decltype(auto) await_resume() { return inner.await_resume(); }
};
template <class Inner>
counted_await<Inner> counted(Inner&& inner, int& suspensions) {
  return counted_await<Inner>{std::forward<Inner>(inner), &suspensions};
}

// Ready once set() ran on another thread.
struct latch_source {
  std::mutex mutex;
  bool set_flag = false;  // guarded by mutex
  canopy::waker target;   // guarded by mutex
  std::atomic<bool> ready_flag{false};
  bool ready() noexcept { return ready_flag.load(std::memory_order_acquire); }
  bool arm(const canopy::waker& waker) {
    const std::lock_guard lock(mutex);
    if (set_flag) {
      return false;
    }
    target = waker;
    return true;
  }
  void disarm() noexcept {
    const std::lock_guard lock(mutex);
    target = canopy::waker();
  }
  int result() const noexcept { return 7; }
  void set() {
    canopy::waker copy;
    {
      const std::lock_guard lock(mutex);
      set_flag = true;
      ready_flag.store(true, std::memory_order_release);
      copy = target;
    }
    copy.wake();
  }
};

task<int> both_in_a_coroutine(latch_source& source) {
  co_await canopy::yield_now();
  co_return co_await canopy::wait_on(source);
}

}  // namespace

TEST_CASE("composing Canopy's awaitables in a user awaiter (marker) and in a coroutine") {
  canopy::testing::watchdog guard("composing awaitables", 30);
  executor pool(canopy::testing::config_with(2));
  latch_source source;
  std::atomic<bool> waiting{false};
  auto handle = pool.spawn([](latch_source& s, std::atomic<bool>& w) -> task<int> {
    int suspensions = 0;
    co_await counted(canopy::yield_now(), suspensions);  // suspends once (a yield)
    w.store(true, std::memory_order_release);
    const int value = co_await counted(canopy::wait_on(s), suspensions);
    co_return suspensions * 100 + value;
  }(source, waiting));
  REQUIRE(canopy::testing::eventually([&] { return waiting.load(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // most likely suspended by now
  source.set();
  const int result = handle.get();
  // The yield always suspends; the wait suspends unless set() came first.
  CHECK((result == 207 || result == 107));
  latch_source second;
  second.set();
  CHECK(canopy::block_on(pool, both_in_a_coroutine(second)) == 7);
  pool.shutdown();
}
