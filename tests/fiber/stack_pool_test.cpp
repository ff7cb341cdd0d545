// stack_pool (fiber/stack_pool.hpp), driven directly: usable sizes, stacks
// that are whole, writable and disjoint, reuse of released stacks, the guard
// budget (guarded stacks have a PROT_NONE page below them, the others a
// canary), and stacks going back to the shared pool when a thread's cache
// goes. Each case uses a size class of its own: the pool is process-wide.
#include "fiber/stack_pool.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/watchdog.hpp"

namespace stack_pool = canopy::stack_pool;
namespace fiber_stacks = canopy::detail::fiber_stacks;
using canopy::detail::fiber_stack;

namespace {

std::size_t page() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

// The permissions ("rw-p", "---p") of the mapping holding `address`, from
// /proc/self/maps; empty if none holds it.
std::string protection_at(const void* address) {
  const auto target = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long start = 0;
    unsigned long end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &start, &end, perms) == 3 && target >= start &&
        target < end) {
      return perms;
    }
  }
  return {};
}

std::byte* bytes_of(const fiber_stack& stack) { return static_cast<std::byte*>(stack.base); }

}  // namespace

TEST_CASE("stack_pool: usable_size rounds up to whole pages, at least one") {
  const std::size_t size = page();
  CHECK(fiber_stacks::usable_size(0) == size);
  CHECK(fiber_stacks::usable_size(1) == size);
  CHECK(fiber_stacks::usable_size(size) == size);
  CHECK(fiber_stacks::usable_size(size + 1) == 2 * size);
  CHECK(fiber_stacks::usable_size(3 * size - 1) == 3 * size);
  CHECK(fiber_stacks::usable_size(stack_pool::default_stack_size) ==
        stack_pool::default_stack_size);
}

TEST_CASE("stack_pool: a stack is page-aligned, of the usable size, writable end to end") {
  const std::size_t asked = 3 * page() + 100;  // its own size class: 4 pages
  const canopy::stack_pool_stats before = stack_pool::stats();
  const fiber_stack stack = fiber_stacks::acquire(asked);
  CHECK(stack.size == fiber_stacks::usable_size(asked));
  CHECK(reinterpret_cast<std::uintptr_t>(stack.base) % page() == 0);
  std::memset(stack.base, 0xAB, stack.size);  // faults if any page is missing
  CHECK(bytes_of(stack)[0] == std::byte{0xAB});
  CHECK(bytes_of(stack)[stack.size - 1] == std::byte{0xAB});
  const canopy::stack_pool_stats after = stack_pool::stats();
  CHECK(after.chunks == before.chunks + 1);  // a new size class: one chunk carved
  CHECK(after.stacks > before.stacks);
  CHECK(after.in_use > before.in_use);
  fiber_stacks::release(stack);
}

TEST_CASE("stack_pool: stacks held at once are disjoint; released ones are reused, not carved") {
  canopy::testing::watchdog guard("stack_pool reuse", 60);
  const std::size_t asked = 5 * page();
  std::vector<fiber_stack> held;
  for (int index = 0; index < 200; ++index) {
    held.push_back(fiber_stacks::acquire(asked));
    // Mark each stack's both ends with its index: an overlap overwrites one.
    std::memcpy(held.back().base, &index, sizeof index);
    std::memcpy(bytes_of(held.back()) + held.back().size - sizeof index, &index, sizeof index);
  }
  std::vector<std::pair<std::uintptr_t, std::size_t>> ranges;
  for (int index = 0; index < 200; ++index) {
    int low = -1;
    int high = -1;
    std::memcpy(&low, held[index].base, sizeof low);
    std::memcpy(&high, bytes_of(held[index]) + held[index].size - sizeof high, sizeof high);
    CHECK(low == index);
    CHECK(high == index);
    ranges.emplace_back(reinterpret_cast<std::uintptr_t>(held[index].base), held[index].size);
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t index = 1; index < ranges.size(); ++index) {
    CHECK(ranges[index - 1].first + ranges[index - 1].second <= ranges[index].first);
  }
  for (const fiber_stack& stack : held) {
    fiber_stacks::release(stack);
  }
  const canopy::stack_pool_stats carved = stack_pool::stats();
  held.clear();
  for (int round = 0; round < 3; ++round) {
    for (int index = 0; index < 200; ++index) {
      held.push_back(fiber_stacks::acquire(asked));
    }
    for (const fiber_stack& stack : held) {
      fiber_stacks::release(stack);
    }
    held.clear();
  }
  CHECK(stack_pool::stats().stacks == carved.stacks);  // every acquire reused a free stack
  CHECK(stack_pool::stats().chunks == carved.chunks);
}

TEST_CASE("stack_pool: guard pages while the budget lasts, a canary beyond it") {
  canopy::testing::watchdog guard("stack_pool guards", 60);
  const std::size_t asked = 7 * page();  // its own size class
  const std::size_t slot = fiber_stacks::usable_size(asked) + page();
  const std::size_t per_chunk = (std::size_t{2} << 20) / slot;  // chunk_target_bytes / slot
  // Room for exactly 3 more guarded stacks: the next chunk guards 3 of its
  // stacks, the one after none.
  stack_pool::set_guard_limit(stack_pool::stats().guarded_stacks + 3);
  CHECK(stack_pool::stats().guard_limit == stack_pool::stats().guarded_stacks + 3);
  const canopy::stack_pool_stats before = stack_pool::stats();

  std::vector<fiber_stack> held;
  for (std::size_t index = 0; index < per_chunk; ++index) {
    held.push_back(fiber_stacks::acquire(asked));
  }
  const canopy::stack_pool_stats first_chunk = stack_pool::stats();
  CHECK(first_chunk.chunks == before.chunks + 1);
  CHECK(first_chunk.stacks == before.stacks + per_chunk);
  CHECK(first_chunk.guarded_stacks == before.guarded_stacks + 3);
  std::size_t guarded = 0;
  for (const fiber_stack& stack : held) {
    const std::byte* below = bytes_of(stack) - page();
    if (stack.guarded) {
      ++guarded;
      CHECK(protection_at(below).rfind("---", 0) == 0);  // PROT_NONE
    } else {
      CHECK(protection_at(below).rfind("rw", 0) == 0);
      CHECK(fiber_stacks::canary_intact(stack));  // acquire wrote it
    }
    CHECK(protection_at(stack.base).rfind("rw", 0) == 0);
  }
  CHECK(guarded == 3);

  // The budget is spent: the next chunk's stacks are all unguarded.
  const fiber_stack beyond = fiber_stacks::acquire(asked);
  CHECK(stack_pool::stats().chunks == first_chunk.chunks + 1);
  CHECK(stack_pool::stats().guarded_stacks == first_chunk.guarded_stacks);
  CHECK_FALSE(beyond.guarded);
  CHECK(fiber_stacks::canary_intact(beyond));
  // An overflow that reaches the stack's lowest bytes breaks the canary.
  std::memset(beyond.base, 0, 8);
  CHECK_FALSE(fiber_stacks::canary_intact(beyond));
  fiber_stacks::write_canary(beyond);
  CHECK(fiber_stacks::canary_intact(beyond));
  held.push_back(beyond);
  for (const fiber_stack& stack : held) {
    fiber_stacks::release(stack);
  }
}

TEST_CASE("stack_pool: threads acquire and release at once; a thread's cache returns at exit") {
  canopy::testing::watchdog guard("stack_pool threads", 120);
  const std::size_t asked = 9 * page();  // its own size class
  constexpr int threads = 4;
  constexpr int per_thread = 100;
  const std::size_t in_use_before = stack_pool::stats().in_use;
  std::mutex mutex;  // doctest's CHECK from several threads
  std::vector<std::thread> workers;
  for (int thread = 0; thread < threads; ++thread) {
    workers.emplace_back([&, thread] {
      for (int round = 0; round < 3; ++round) {
        std::vector<fiber_stack> mine;
        for (int index = 0; index < per_thread; ++index) {
          mine.push_back(fiber_stacks::acquire(asked));
          const int mark = thread * per_thread + index;
          std::memcpy(mine.back().base, &mark, sizeof mark);
        }
        std::this_thread::yield();  // let the other threads write theirs
        int foreign = 0;
        for (int index = 0; index < per_thread; ++index) {
          int mark = -1;
          std::memcpy(&mark, mine[index].base, sizeof mark);
          foreign += mark == thread * per_thread + index ? 0 : 1;
        }
        {
          const std::lock_guard lock(mutex);
          CHECK(foreign == 0);  // no stack was handed to two holders at once
        }
        for (const fiber_stack& stack : mine) {
          fiber_stacks::release(stack);
        }
      }
    });
  }
  for (auto& worker : workers) {
    worker.join();
  }
  // Every thread has exited: what its cache held went back to the shared pool.
  CHECK(stack_pool::stats().in_use == in_use_before);
}
