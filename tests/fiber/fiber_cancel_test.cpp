// A cancelled fiber counts as ended only once its stack has unwound: for
// every way a fiber is cancelled (its handle's cancel(), a task_group's
// close() and cancel(), with_timeout, a cancelled parent, shutdown), whoever
// waits for its end is released only after the destructors on its stack ran.
// Each case checks a local of the fiber (or one it borrows from its owner)
// right after the wait returns, many rounds on 1, 2 and 4 workers; under
// AddressSanitizer a fiber unwinding after its owner's frame was freed is a
// heap-use-after-free.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <canopy/fiber.hpp>
#include <canopy/io.hpp>
#include <canopy/task_group.hpp>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::task_group;
using canopy::testing::config_with;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

namespace {

long rounds(long count) { return std::max(1L, count / canopy::testing::stress_divisor()); }

// Whether a fiber's local is alive: `alive` turns true when the local is
// made (a fiber cancelled before it started makes none) and false in its
// destructor, after a short spin that widens the window in which a waiter
// released too early would see it still alive. The tracked object is in
// the owner's frame, or the test's, and the local writes to it when it dies.
struct tracked {
  std::atomic<bool> alive{false};
};
struct unwinds_last {
  tracked* target;
  std::chrono::microseconds spin = 20us;
  unwinds_last(tracked* into, std::chrono::microseconds spin_for = 20us)
      : target(into), spin(spin_for) {
    target->alive.store(true);
  }
  unwinds_last(const unwinds_last&) = delete;
  unwinds_last& operator=(const unwinds_last&) = delete;
  ~unwinds_last() {
    const auto until = std::chrono::steady_clock::now() + spin;
    while (std::chrono::steady_clock::now() < until) {
    }
    target->alive.store(false);
  }
};

// A fiber that marks `target` dead when its stack unwinds and yields until
// cancelled.
auto yielding_fiber(tracked& target,
                    std::size_t stack_size = canopy::stack_pool::default_stack_size) {
  return canopy::fiber(
      [&target]() -> int {
        const unwinds_last guard{&target};
        for (;;) {
          canopy::this_fiber::yield();
        }
      },
      stack_size);
}

// A fiber that waits for a fiber child of its own (a join state it cannot
// take its registration back from): its unwind comes after the child's.
// The child asks for a larger stack than the awaiter has left, so that it
// runs as a task of its own (one that fits would run on the awaiter's
// stack, as part of it).
auto awaiting_fiber(tracked& mine, tracked& child) {
  return canopy::fiber([&mine, &child]() -> int {
    const unwinds_last guard{&mine};
    return canopy::this_fiber::await(canopy::spawn(yielding_fiber(child, 1 << 20)));
  });
}

constexpr std::size_t worker_counts[] = {1, 2, 4};

}  // namespace

TEST_CASE("a handle's cancel(): get() returns after the fiber's stack unwound") {
  const watchdog guard("handle cancel", 120);
  for (const std::size_t workers : worker_counts) {
    // Every round's locals outlive the pool: a fiber that unwinds late is
    // counted, and does not write over a later round's.
    std::vector<std::unique_ptr<tracked[]>> kept;
    executor pool(config_with(workers));
    int early = 0;
    for (long round = 0; round < rounds(300); ++round) {
      tracked& outer = kept.emplace_back(std::make_unique<tracked[]>(2))[0];
      tracked& inner = kept.back()[1];
      canopy::join_handle<int> handle;
      if (round % 2 == 0) {
        handle = pool.spawn(awaiting_fiber(outer, inner));
      } else {
        handle = pool.spawn(yielding_fiber(outer));
      }
      if (round % 4 != 0) {
        // Mostly while it waits (its child, or itself, runs), sometimes at once.
        tracked& deepest = round % 2 == 0 ? inner : outer;
        CHECK(canopy::testing::eventually([&] { return deepest.alive.load(); }));
      }
      handle.cancel();
      CHECK_THROWS_AS(handle.get(), canopy::task_cancelled);
      early += outer.alive.load() || inner.alive.load() ? 1 : 0;
    }
    CHECK_MESSAGE(early == 0, workers << " workers");
  }
}

TEST_CASE("a group's close() and cancel(): a fiber child has unwound when the wait returns") {
  const watchdog guard("group close", 120);
  for (const std::size_t workers : worker_counts) {
    executor pool(config_with(workers));
    for (const bool use_close : {true, false}) {
      const int early =
          pool.spawn([](long count, bool close) -> task<int> {
                int early = 0;
                for (long round = 0; round < count; ++round) {
                  // The owner's frame holds what the fiber borrows.
                  tracked borrowed;
                  tracked nested;
                  task_group<int> group;
                  if (round % 2 == 0) {
                    group.spawn(yielding_fiber(borrowed));
                  } else {
                    group.spawn(awaiting_fiber(borrowed, nested));
                  }
                  co_await canopy::yield_now();
                  if (close) {
                    co_await group.close();
                  } else {
                    group.cancel();
                    co_await group.wait_all();
                  }
                  early += borrowed.alive.load() || (round % 2 == 1 && nested.alive.load()) ? 1 : 0;
                  early += group.cancelled() == 1 ? 0 : 1;
                }
                co_return early;
              }(rounds(300), use_close))
              .get();
      CHECK_MESSAGE(early == 0, workers << " workers, " << (use_close ? " close()" : " cancel()"));
    }
  }
}

TEST_CASE("with_timeout over a task awaiting a fiber returns after the fiber unwound") {
  const watchdog guard("with_timeout", 120);
  for (const std::size_t workers : worker_counts) {
    executor pool(config_with(workers));
    canopy::io::timer_thread timers(pool);
    const int early = pool.spawn([](long count) -> task<int> {
                            int early = 0;
                            for (long round = 0; round < count; ++round) {
                              tracked borrowed;
                              // The fiber is spawned by the timed task (a handle dropped
                              // unjoined would detach it, not cancel it).
                              auto waiter = [](tracked& target) -> task<int> {
                                co_return co_await canopy::spawn(yielding_fiber(target));
                              };
                              auto result = co_await canopy::with_timeout(100us, waiter(borrowed));
                              early += result || borrowed.alive.load() ? 1 : 0;
                            }
                            co_return early;
                          }(rounds(200)))
                          .get();
    CHECK_MESSAGE(early == 0, workers << " workers");
  }
}

TEST_CASE("a cancelled parent (a fiber, a coroutine) ends after the fiber it awaits unwound") {
  const watchdog guard("cancelled parent", 120);
  for (const std::size_t workers : worker_counts) {
    executor pool(config_with(workers));
    int early = 0;
    for (long round = 0; round < rounds(300); ++round) {
      tracked child;
      canopy::join_handle<int> parent;
      if (round % 2 == 0) {
        parent = pool.spawn(canopy::fiber(
            [&child] { return canopy::this_fiber::await(canopy::spawn(yielding_fiber(child))); }));
      } else {
        parent = pool.spawn([](tracked& borrowed) -> task<int> {
          co_return co_await canopy::spawn(yielding_fiber(borrowed));
        }(child));
      }
      std::this_thread::yield();
      parent.cancel();
      CHECK_THROWS_AS(parent.get(), canopy::task_cancelled);
      early += child.alive.load() ? 1 : 0;
    }
    CHECK_MESSAGE(early == 0, workers << " workers");
  }
}

TEST_CASE("shutdown: a fiber's handle is released only after its stack unwound") {
  const watchdog guard("shutdown", 120);
  for (const std::size_t workers : worker_counts) {
    int early = 0;
    for (long round = 0; round < rounds(100); ++round) {
      tracked outer;
      tracked inner;
      std::atomic<bool> released{false};
      std::thread joiner;
      // What the fibers use outlives the pool (its shutdown unwinds them).
      canopy::async_event handed;
      canopy::async_event started;
      canopy::join_handle<int> child;
      {
        executor pool(config_with(workers));
        // The parent is spawned before its child (shutdown then tends to
        // destroy it first, while its child can still fire its wait).
        auto handle = pool.spawn(canopy::fiber([&] {
          const unwinds_last mine{&outer, 1ms};
          canopy::this_fiber::await(handed);
          started.set();
          return canopy::this_fiber::await(child);
        }));
        // The child waits on an event nobody sets: only the shutdown ends it.
        child = pool.spawn(canopy::fiber([&] {
          const unwinds_last theirs{&inner};
          canopy::async_event never;
          canopy::this_fiber::await(never);
          return 0;
        }));
        handed.set();
        REQUIRE(canopy::testing::eventually([&] { return started.is_set(); }));
        joiner = std::thread([&, owned = std::move(handle)]() mutable {
          try {
            owned.get();
          } catch (const canopy::task_cancelled&) {
          }
          early += outer.alive.load() ? 1 : 0;
          released.store(true);
        });
        std::this_thread::sleep_for(100us);
      }  // shutdown
      joiner.join();
      CHECK(released.load());
    }
    CHECK_MESSAGE(early == 0, workers << " workers");
  }
}

namespace {

// Marks `owner` dead when the owning task's frame goes.
struct owner_frame_marker {
  tracked* owner;
  explicit owner_frame_marker(tracked* into) : owner(into) { owner->alive.store(true); }
  owner_frame_marker(const owner_frame_marker&) = delete;
  owner_frame_marker& operator=(const owner_frame_marker&) = delete;
  ~owner_frame_marker() { owner->alive.store(false); }
};

// A child's local: counts a violation if, when it is destroyed, the frame
// of the task that owns the child's group is already gone.
struct checks_owner {
  tracked* owner;
  std::atomic<int>* late;
  checks_owner(tracked* of, std::atomic<int>* violations) : owner(of), late(violations) {}
  checks_owner(const checks_owner&) = delete;
  checks_owner& operator=(const checks_owner&) = delete;
  ~checks_owner() {
    if (!owner->alive.load()) {
      late->fetch_add(1);
    }
  }
};

task<int> coroutine_child(tracked* owner, std::atomic<int>* late, std::atomic<int>* started,
                          canopy::async_event* never) {
  const checks_owner guard{owner, late};
  started->fetch_add(1);
  co_await *never;
  co_return 0;
}

// Owns a group of a fiber child and a coroutine child that both wait on an
// event nobody sets, and waits on one itself: only the shutdown ends them.
task<void> group_owner(tracked* owner, std::atomic<int>* late, std::atomic<int>* started,
                       canopy::async_event* never, bool fiber_first) {
  const owner_frame_marker marker{owner};
  task_group<int> group;
  const auto spawn_fiber = [&] {
    group.spawn(canopy::fiber([owner, late, started, never] {
      const checks_owner guard{owner, late};
      started->fetch_add(1);
      canopy::this_fiber::await(*never);
      return 0;
    }));
  };
  if (fiber_first) {
    spawn_fiber();
  }
  group.spawn(coroutine_child(owner, late, started, never));
  if (!fiber_first) {
    spawn_fiber();
  }
  co_await *never;
}

}  // namespace

TEST_CASE("shutdown: a group's owner destroyed at shutdown sees its children gone first") {
  // The shutdown destroys leftover tasks in slot order; a task destroyed
  // there that cancels what it owns (its group's children) destroys them at
  // once, so their destructors still find the owner's frame.
  const watchdog guard("shutdown group", 120);
  for (const std::size_t workers : worker_counts) {
    std::atomic<int> late{0};
    for (long round = 0; round < rounds(200); ++round) {
      tracked owner;
      std::atomic<int> started{0};
      canopy::async_event never;  // outlives the pool: the children await it
      {
        executor pool(config_with(workers));
        pool.spawn_detached(group_owner(&owner, &late, &started, &never, round % 2 == 0));
        REQUIRE(canopy::testing::eventually([&] { return started.load() == 2; }));
      }  // shutdown
      CHECK_FALSE(owner.alive.load());
    }
    CHECK_MESSAGE(late.load() == 0, workers << " workers");
  }
}
