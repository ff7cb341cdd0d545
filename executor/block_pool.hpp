// block_pool — recycles small blocks per thread: coroutine frames (with
// their completion record), and the join states of callable and fiber
// tasks.
//
// Fork-join code creates and destroys one such block per task; a block is
// usually created on the spawning thread and freed on whichever worker
// finished the task. With plain malloc that cross-thread traffic lands on
// the allocator's arena locks, a large share of a fork-join program's time
// (docs/performance.md, "What makes it fast"). Here each thread keeps free
// blocks by size (classes 16 bytes apart up to 1016 bytes, each sized to
// fill a glibc malloc chunk; at most `per_class_limit` each, batches
// exchanged through a shared depot); a block freed on another thread simply
// joins that thread's cache. Larger blocks, and frees beyond the limits, go to
// operator new/delete. Any thread may call both functions; a block may be
// freed on another thread than the one that allocated it.
//
// allocate_block and free_block are out of line: a coroutine may resume
// on another thread, and a thread_local address computed inline in a
// coroutine body could be reused after the move. Task frames' operator new
// and delete, with GCC (which computes such an address anew in each
// resumption), use the inline fast paths below instead
// (executor/fork_stack.hpp).
#pragma once

#include <cstddef>

#include "sanitizers.hpp"

namespace canopy::detail {

// A block of at least `size` bytes (aligned like operator new's). Throws
// std::bad_alloc.
void* allocate_block(std::size_t size);
// `size` must be the size that allocate_block was given.
void free_block(void* block, std::size_t size) noexcept;

// ------------------------------------------------ the per-thread caches
// (block_pool.cpp has the depot and the slow paths.)

// The cache layout, in a namespace of its own: its short names (classes,
// granule) are only the pool's.
namespace pool {

// Class i holds blocks of i * 16 + 8 bytes (8, 24, 40, ..., 1016). glibc's
// malloc hands out chunks of a multiple of 16 bytes with an 8-byte size word
// in front, so a request of 16k + 8 bytes fills its chunk exactly, where one
// of 16k bytes leaves 8 bytes unused and rounds up to the next 16: a 136-byte
// coroutine frame block costs 144 bytes of heap, not 160. With allocators
// that have 16-byte size classes and no header it costs what 16k did.
inline constexpr std::size_t granule = 16;
inline constexpr std::size_t class_slack = 8;
inline constexpr std::size_t classes = 64;
inline constexpr std::size_t max_pooled = (classes - 1) * granule + class_slack;

constexpr std::size_t class_of(std::size_t size) noexcept {
  return (size + granule - 1 - class_slack) / granule;
}

constexpr std::size_t class_block_size(std::size_t index) noexcept {
  return index * granule + class_slack;
}

static_assert(class_of(1) == 0 && class_of(8) == 0 && class_of(9) == 1 && class_of(24) == 1 &&
              class_of(136) == 8 && class_block_size(class_of(136)) == 136 &&
              class_of(max_pooled) == classes - 1);

// Blocks moved between a thread's cache and the shared depot at a time,
// and the most a thread keeps per class.
inline constexpr unsigned batch_size = 256;
inline constexpr unsigned per_class_limit = 2 * batch_size;

struct class_cache {
  void** blocks = nullptr;  // per_class_limit entries, allocated on first use
  unsigned count = 0;
};

// Trivially destructible, so reaching it costs no guard check: the fast
// paths below are an index, a compare and a load or store. The arrays it
// points to are released by a cleanup object the thread registers when it
// first gives a class its array (the slow path).
struct thread_blocks {
  class_cache caches[classes];
  bool closed = false;  // the thread is exiting: frees bypass the pool
};

inline constinit thread_local thread_blocks block_pool_here{};

// Under ASan blocks are not recycled, so use-after-free of a block is caught.
#if defined(CANOPY_ADDRESS_SANITIZER)
inline constexpr bool pooling = false;
#else
inline constexpr bool pooling = true;
#endif

constexpr bool pooled_size(std::size_t size) noexcept {
  return pooling && size != 0 && size <= max_pooled;
}

}  // namespace pool

// The slow paths: an empty or full class cache, a size the pool does not
// keep, a thread's first free of a class.
void* allocate_block_slow(std::size_t size);
void free_block_slow(void* block, std::size_t size) noexcept;

// The fast paths of allocate_block and free_block, for callers that may
// inline a thread_local's address (see above).
[[gnu::always_inline]] inline void* allocate_pooled_block(std::size_t size) {
  if (pool::pooled_size(size)) {
    pool::class_cache& cache = pool::block_pool_here.caches[pool::class_of(size)];
    if (cache.count != 0) [[likely]] {
      return cache.blocks[--cache.count];
    }
  }
  return allocate_block_slow(size);
}
[[gnu::always_inline]] inline void free_pooled_block(void* block, std::size_t size) noexcept {
  if (pool::pooled_size(size)) {
    pool::class_cache& cache = pool::block_pool_here.caches[pool::class_of(size)];
    if (cache.blocks != nullptr && cache.count != pool::per_class_limit) [[likely]] {
      cache.blocks[cache.count++] = block;
      return;
    }
  }
  free_block_slow(block, size);
}

}  // namespace canopy::detail
