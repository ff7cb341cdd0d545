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
// Out of line on purpose: a coroutine may resume on another thread, and a
// thread_local address computed inline in a coroutine body could be reused
// after the move.
#pragma once

#include <cstddef>

namespace canopy::detail {

// A block of at least `size` bytes (aligned like operator new's). Throws
// std::bad_alloc.
void* allocate_block(std::size_t size);
// `size` must be the size that allocate_block was given.
void free_block(void* block, std::size_t size) noexcept;

}  // namespace canopy::detail
