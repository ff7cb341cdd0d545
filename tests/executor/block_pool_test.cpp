// block_pool: per-thread block recycling (coroutine frames, join states).
#include "executor/block_pool.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

using canopy::detail::allocate_block;
using canopy::detail::free_block;

namespace {

// Fills a block with a pattern derived from its index, so that two live
// blocks sharing memory, or a block shorter than asked, shows up as a
// mismatch when the patterns are read back.
void fill(void* block, std::size_t size, std::size_t index) {
  std::memset(block, static_cast<int>(index % 251), size);
}

bool holds(const void* block, std::size_t size, std::size_t index) {
  const auto* bytes = static_cast<const unsigned char*>(block);
  for (std::size_t offset = 0; offset < size; ++offset) {
    if (bytes[offset] != static_cast<unsigned char>(index % 251)) {
      return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("live blocks are distinct, aligned and as large as asked, across size classes") {
  // Each side of the class edges (blocks of 16k + 8 bytes) and of the
  // largest pooled size (1016).
  const std::size_t sizes[] = {1,   8,   9,   15,  16,   17,   24,   25,   120,  121,
                               136, 137, 200, 240, 1000, 1016, 1017, 1024, 1025, 4096};
  std::vector<std::pair<void*, std::size_t>> live;
  for (int round = 0; round < 50; ++round) {
    for (const std::size_t size : sizes) {
      void* block = allocate_block(size);
      REQUIRE(block != nullptr);
      CHECK(reinterpret_cast<std::uintptr_t>(block) % __STDCPP_DEFAULT_NEW_ALIGNMENT__ == 0);
      fill(block, size, live.size());
      live.emplace_back(block, size);
    }
  }
  std::set<void*> distinct;
  for (std::size_t index = 0; index < live.size(); ++index) {
    CHECK(holds(live[index].first, live[index].second, index));
    distinct.insert(live[index].first);
  }
  CHECK(distinct.size() == live.size());
  for (const auto& [block, size] : live) {
    free_block(block, size);
  }
}

TEST_CASE("a freed block is handed out again, and overflowing the thread's cache loses nothing") {
  // More frees than a thread keeps (2 batches of 256): the surplus goes to
  // the shared depot or to operator delete, and later allocations reuse it.
  constexpr std::size_t count = 3000;
  constexpr std::size_t size = 96;
  std::vector<void*> first(count);
  for (std::size_t index = 0; index < count; ++index) {
    first[index] = allocate_block(size);
    fill(first[index], size, index);
  }
  for (void* block : first) {
    free_block(block, size);
  }
  std::vector<void*> second(count);
  std::set<void*> reused;
  const std::set<void*> before(first.begin(), first.end());
  for (std::size_t index = 0; index < count; ++index) {
    second[index] = allocate_block(size);
    fill(second[index], size, index + 7);
    if (before.contains(second[index])) {
      reused.insert(second[index]);
    }
  }
  for (std::size_t index = 0; index < count; ++index) {
    CHECK(holds(second[index], size, index + 7));
  }
  CHECK(std::set<void*>(second.begin(), second.end()).size() == count);
#if !defined(CANOPY_ADDRESS_SANITIZER)
  CHECK(reused.size() >= 512);  // at least what this thread's cache held
#endif
  for (void* block : second) {
    free_block(block, size);
  }
}

TEST_CASE("blocks allocated on one thread and freed on another, from threads that then exit") {
  // The producer allocates, consumers free (their caches fill and spill to
  // the depot), then all threads exit with blocks still cached: their exit
  // must release them (valgrind --leak-check=full on this test shows none
  // lost; the ASan build does not pool, so it cannot see this) and frees
  // after that must not touch the released caches.
  constexpr std::size_t per_thread = 2000;
  constexpr std::size_t size = 48;
  for (int round = 0; round < 3; ++round) {
    std::vector<void*> blocks(4 * per_thread);
    std::thread producer([&] {
      for (std::size_t index = 0; index < blocks.size(); ++index) {
        blocks[index] = allocate_block(size);
        fill(blocks[index], size, index);
      }
    });
    producer.join();
    std::vector<std::thread> consumers;
    std::vector<int> intact(4, 1);
    for (std::size_t thread = 0; thread < 4; ++thread) {
      consumers.emplace_back([&, thread] {
        for (std::size_t index = thread * per_thread; index < (thread + 1) * per_thread; ++index) {
          if (!holds(blocks[index], size, index)) {
            intact[thread] = 0;
          }
          free_block(blocks[index], size);
        }
        // Take some back on this thread (from its cache or the depot).
        std::vector<void*> again(per_thread / 2);
        for (void*& block : again) {
          block = allocate_block(size);
          fill(block, size, 3);
        }
        for (void* block : again) {
          free_block(block, size);
        }
      });
    }
    for (std::thread& consumer : consumers) {
      consumer.join();
    }
    for (const int ok : intact) {
      CHECK(ok == 1);
    }
  }
}
