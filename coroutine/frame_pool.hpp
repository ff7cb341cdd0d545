// frame_pool — recycles coroutine frames per thread.
//
// Fork-join code creates and destroys one frame per task; a frame is
// usually created on the spawning worker and freed on whichever worker
// finished the task. With plain malloc that cross-thread traffic lands on
// the allocator's arena locks (measured: ~15% of fib(30) in _int_malloc /
// _int_free plus lock wake-ups). Here each thread keeps free lists by size
// (16-byte classes up to 1 KiB, at most `per_class_limit` frames each); a
// frame freed on another thread simply joins that thread's list. Larger
// frames, and frees beyond the limit, go to operator new/delete.
//
// Out of line on purpose: a coroutine may resume on another thread, and a
// thread_local address computed inline in a coroutine body could be reused
// after the move.
#pragma once

#include <cstddef>

namespace canopy::detail {

void* allocate_frame(std::size_t size);
void free_frame(void* frame, std::size_t size) noexcept;

}  // namespace canopy::detail
