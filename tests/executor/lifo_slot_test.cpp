// lifo_slot (executor/lifo_slot.hpp): put / take / steal / take_if_is alone,
// and invariant S under a real race: every task the owner puts in leaves the
// slot exactly once (taken by the owner, stolen by a thief, or evicted by the
// owner's next put), none lost, none twice.
#include "executor/lifo_slot.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "tests/watchdog.hpp"

using canopy::detail::lifo_slot;

TEST_CASE("lifo_slot: put into an empty slot evicts nothing; a second put evicts the first") {
  lifo_slot slot;
  CHECK(slot.take() == lifo_slot::empty);
  CHECK(slot.steal() == lifo_slot::empty);
  CHECK(slot.put(7) == lifo_slot::empty);
  CHECK(slot.put(9) == 7);   // the evicted task goes to the tree
  CHECK(slot.put(11) == 9);  // each put keeps only the newest
  CHECK(slot.take() == 11);
  CHECK(slot.take() == lifo_slot::empty);  // take leaves it empty
  CHECK(slot.put(3) == lifo_slot::empty);
}

TEST_CASE("lifo_slot: steal takes the task once; the owner then finds the slot empty") {
  lifo_slot slot;
  CHECK(slot.put(5) == lifo_slot::empty);
  CHECK(slot.steal() == 5);
  CHECK(slot.steal() == lifo_slot::empty);
  CHECK(slot.take() == lifo_slot::empty);
  CHECK_FALSE(slot.take_if_is(5));
  CHECK(slot.put(0) == lifo_slot::empty);  // slot index 0 is a task like any other
  CHECK(slot.steal() == 0);
}

TEST_CASE("lifo_slot: take_if_is takes only the named task and leaves any other in place") {
  lifo_slot slot;
  CHECK_FALSE(slot.take_if_is(4));  // empty
  CHECK(slot.put(4) == lifo_slot::empty);
  CHECK_FALSE(slot.take_if_is(5));  // another task is there
  CHECK(slot.take_if_is(4));
  CHECK_FALSE(slot.take_if_is(4));  // taken once only
  CHECK(slot.take() == lifo_slot::empty);
  CHECK(slot.put(6) == lifo_slot::empty);
  CHECK_FALSE(slot.take_if_is(4));
  CHECK(slot.take() == 6);
}

TEST_CASE("lifo_slot: owner against thieves, each task leaves the slot exactly once") {
  canopy::testing::watchdog guard("lifo_slot race", 120);
  const std::uint32_t tasks =
      static_cast<std::uint32_t>(400'000 / canopy::testing::stress_divisor());
  constexpr int thieves = 2;
  lifo_slot slot;
  // Who got each task out of the slot: counts per task, summed over threads.
  std::vector<std::atomic<int>> seen(tasks);
  std::atomic<bool> done{false};
  std::atomic<long> stolen{0};
  std::atomic<long> out_of_range{0};  // a task id never put in
  std::vector<std::thread> threads;
  for (int thief = 0; thief < thieves; ++thief) {
    threads.emplace_back([&] {
      long mine = 0;
      for (;;) {
        // Read `done` before stealing: after the owner's last take the slot
        // stays empty, so a steal that follows a true `done` finds nothing.
        const bool finished = done.load(std::memory_order_acquire);
        const std::uint32_t task = slot.steal();
        if (task != lifo_slot::empty && task >= tasks) {
          out_of_range.fetch_add(1);
        } else if (task != lifo_slot::empty) {
          seen[task].fetch_add(1, std::memory_order_relaxed);
          ++mine;
        } else if (finished) {
          break;
        }
      }
      stolen.fetch_add(mine);
    });
  }
  long evicted = 0;
  long taken = 0;
  for (std::uint32_t task = 0; task < tasks; ++task) {
    const std::uint32_t out = slot.put(task);
    if (out != lifo_slot::empty) {
      REQUIRE(out < task);  // only an earlier task can be evicted
      seen[out].fetch_add(1, std::memory_order_relaxed);
      ++evicted;
    }
    // Now and then the owner's current task ends, or it runs at its join.
    if (task % 3 == 0) {
      const std::uint32_t own = slot.take();
      if (own != lifo_slot::empty) {
        seen[own].fetch_add(1, std::memory_order_relaxed);
        ++taken;
      }
    } else if (task % 7 == 1 && slot.take_if_is(task)) {
      seen[task].fetch_add(1, std::memory_order_relaxed);
      ++taken;
    }
  }
  const std::uint32_t last = slot.take();
  if (last != lifo_slot::empty) {
    seen[last].fetch_add(1, std::memory_order_relaxed);
    ++taken;
  }
  done.store(true, std::memory_order_release);
  for (auto& thread : threads) {
    thread.join();
  }
  long wrong = 0;
  for (std::uint32_t task = 0; task < tasks; ++task) {
    if (seen[task].load() != 1) {
      ++wrong;
    }
  }
  INFO("evicted " << evicted << ", taken " << taken << ", stolen " << stolen.load());
  CHECK(wrong == 0);
  CHECK(out_of_range.load() == 0);
  CHECK(evicted + taken + stolen.load() == static_cast<long>(tasks));
  CHECK(slot.steal() == lifo_slot::empty);
}
