#include "fork_stack.hpp"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "block_pool.hpp"
#include "sanitizers.hpp"

#if defined(CANOPY_ADDRESS_SANITIZER)
#include <sanitizer/asan_interface.h>
#endif

namespace canopy::detail {

constinit stacklet_range fork_stack_range{};

namespace {

constexpr std::size_t granule = 16;           // a frame's alignment
constexpr std::size_t first_bytes = 16384;    // the smallest stacklet, header included
constexpr int size_classes = 16;              // 16 KiB .. 512 MiB
// The reserved range: address space only (MAP_NORESERVE), touched as
// stacklets are used. When it is used up, frames go to the block pool.
constexpr std::size_t reserved_bytes = std::size_t{1} << 32;

constexpr std::size_t round_up(std::size_t size) noexcept {
  return (size + granule - 1) & ~(granule - 1);
}

// Under ASan the free part of every stacklet is poisoned, so a frame used
// after its pop (a LIFO mistake) is reported as a heap frame's would be.
void poison(void* begin, std::size_t bytes) noexcept {
#if defined(CANOPY_ADDRESS_SANITIZER)
  ASAN_POISON_MEMORY_REGION(begin, bytes);
#else
  static_cast<void>(begin);
  static_cast<void>(bytes);
#endif
}
void unpoison(void* begin, std::size_t bytes) noexcept {
#if defined(CANOPY_ADDRESS_SANITIZER)
  ASAN_UNPOISON_MEMORY_REGION(begin, bytes);
#else
  static_cast<void>(begin);
  static_cast<void>(bytes);
#endif
}

[[noreturn]] void fail(const char* why) noexcept {
  std::fprintf(stderr, "canopy: %s\n", why);
  std::fflush(stderr);
  std::abort();
}

// The shared pool: the reservation, carved from the bottom up, and empty
// stacklets by size class (2^k * 16 KiB), linked through `prev`.
// Touched only when a worker's cache has none to give or no room to take.
struct stacklet_pool {
  std::mutex mutex;
  std::byte* base = nullptr;
  std::size_t carved = 0;
  bool reserve_failed = false;
  stacklet* free[size_classes] = {};

  static int class_of(std::size_t bytes) noexcept {
    int index = 0;
    std::size_t size = first_bytes;
    while (size < bytes) {
      size <<= 1;
      ++index;
    }
    return index;
  }

  // An empty stacklet of at least `bytes` (header included); null when
  // the reservation cannot give one.
  stacklet* take(std::size_t bytes) noexcept {
    const int index = class_of(bytes);
    if (index >= size_classes) {
      return nullptr;
    }
    const std::size_t size = first_bytes << index;
    const std::lock_guard lock(mutex);
    if (stacklet* const found = free[index]) {
      free[index] = found->prev;
      return found;
    }
    if (base == nullptr && !reserve()) {
      return nullptr;
    }
    if (reserved_bytes - carved < size) {
      return nullptr;
    }
    std::byte* const memory = base + carved;
    carved += size;
    auto* const made = reinterpret_cast<stacklet*>(memory);
    made->hi = memory + size;
    made->bytes = size;
    poison(made->lo(), size - stacklet::header);
    return made;
  }

  void give(stacklet* empty) noexcept {
    const int index = class_of(empty->bytes);
    const std::lock_guard lock(mutex);
    empty->prev = free[index];
    free[index] = empty;
  }

 private:
  // Under the mutex, once.
  bool reserve() noexcept {
    if (reserve_failed) {
      return false;
    }
    void* const memory = ::mmap(nullptr, reserved_bytes, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) {
      reserve_failed = true;
      return false;
    }
    base = static_cast<std::byte*>(memory);
    // The low bound first; release: a thread whose acquire load of `span`
    // (on_fork_stack) sees it also sees the low bound, never a span over
    // the old low bound of 0.
    fork_stack_range.low.store(reinterpret_cast<std::uintptr_t>(base), std::memory_order_relaxed);
    fork_stack_range.span.store(reserved_bytes, std::memory_order_release);
    return true;
  }
};

// Never destroyed: workers give their caches back during static destruction.
stacklet_pool& shared_pool() noexcept {
  static stacklet_pool* const instance = new stacklet_pool();
  return *instance;
}

// An empty stacklet of at least `bytes`, header included: the cache's
// first that fits, else the shared pool's.
stacklet* take_stacklet(stacklet_cache* cache, std::size_t bytes) noexcept {
  stacklet* taken = nullptr;
  if (cache != nullptr) {
    for (stacklet*& slot : cache->slots) {
      if (slot != nullptr && slot->bytes >= bytes) {
        taken = slot;
        slot = nullptr;
        break;
      }
    }
  }
  if (taken == nullptr) {
    taken = shared_pool().take(bytes);
    if (taken == nullptr) {
      return nullptr;
    }
  }
  taken->sp = taken->lo();
  taken->prev = nullptr;
  taken->next = nullptr;
  return taken;
}

// Gives back an empty stacklet and the spare above it: the first-size ones
// to the cache while it has room, the rest to the shared pool.
void give_stacklet(stacklet_cache* cache, stacklet* empty) noexcept {
  while (empty != nullptr) {
    stacklet* const spare = empty->next;
    empty->next = nullptr;
    bool kept = false;
    if (cache != nullptr && empty->bytes == first_bytes) {
      for (stacklet*& slot : cache->slots) {
        if (slot == nullptr) {
          slot = empty;
          kept = true;
          break;
        }
      }
    }
    if (!kept) {
      shared_pool().give(empty);
    }
    empty = spare;
  }
}

// The top stacklet cannot take `bytes` more: a stacklet that can becomes
// the top (the first one, the spare above, or a new larger one linked
// above). Null when none can be had.
[[gnu::noinline]] stacklet* grow(fork_stack_thread& here, std::size_t bytes) noexcept {
  stacklet* const top = here.top;
  if (top == nullptr) {
    here.top = take_stacklet(here.cache, bytes + stacklet::header);
    return here.top;
  }
  stacklet* above = top->next;
  if (above == nullptr || above->bytes - stacklet::header < bytes) {
    give_stacklet(here.cache, above);
    const std::size_t doubled = top->bytes * 2;
    const std::size_t needed = bytes + stacklet::header;
    above = take_stacklet(here.cache, doubled > needed ? doubled : needed);
    if (above == nullptr) {
      top->next = nullptr;
      return nullptr;
    }
  }
  above->sp = above->lo();
  above->prev = top;
  above->next = nullptr;
  top->next = above;
  here.top = above;
  return above;
}

}  // namespace

stacklet_cache::~stacklet_cache() {
  for (stacklet*& slot : slots) {
    if (slot != nullptr) {
      shared_pool().give(slot);
      slot = nullptr;
    }
  }
}

// The bump could not be made on the top stacklet: a stacklet that can take
// the frame becomes the top, or the frame goes to the block pool.
void* allocate_in_new_stacklet(fork_stack_thread& here, std::size_t size) {
  here.mark = 0;  // consumed: later frames of this make() come from the pool
  const std::size_t bytes = round_up(size);
  stacklet* const top = grow(here, bytes);
  if (top == nullptr) {
    return allocate_block(size);
  }
  std::byte* const frame = top->sp;
  top->sp = frame + bytes;
  unpoison(frame, bytes);
  here.mark = reinterpret_cast<std::uintptr_t>(frame);
  return frame;
}

// The top stacklet's last frame was popped: step back to the one below and
// keep this one as its spare (the spare above this one goes).
void step_back(fork_stack_thread& here, stacklet* top) noexcept {
  give_stacklet(here.cache, top->next);
  top->next = nullptr;
  here.top = top->prev;
}

void fail_not_on_top() noexcept {
  fail("a fork-join frame freed out of LIFO order, or on a thread that does not own its stack");
}

void* allocate_task_frame(std::size_t size) {
  fork_stack_thread& here = fork_stack_state();
  if (here.mark != want_stack_frame) [[likely]] {
    return allocate_block(size);
  }
  const std::size_t bytes = round_up(size);
  stacklet* const top = here.top;
  if (top == nullptr || static_cast<std::size_t>(top->hi - top->sp) < bytes) [[unlikely]] {
    return allocate_in_new_stacklet(here, size);
  }
  std::byte* const frame = top->sp;
  top->sp = frame + bytes;
  unpoison(frame, bytes);
  here.mark = reinterpret_cast<std::uintptr_t>(frame);
  return frame;
}

void free_stack_frame(void* frame, std::size_t size) noexcept {
  fork_stack_thread& here = fork_stack_state();
  stacklet* const top = here.top;
  auto* const begin = static_cast<std::byte*>(frame);
  const std::size_t bytes = round_up(size);
  if (top == nullptr || begin + bytes != top->sp) [[unlikely]] {
    fail_not_on_top();
  }
  top->sp = begin;
  poison(begin, bytes);
  if (begin == top->lo() && top->prev != nullptr) [[unlikely]] {
    step_back(here, top);
  }
}

void started_frame_not_returned() noexcept {
  fail(
      "canopy::call: the function made a task, which is the join's child, and then dropped it, "
      "returned another task or threw (a call's function must return the task it makes first: "
      "docs/fork_join.md)");
}

void stack_frame_dropped(void* frame, const void* type, bool children_start) noexcept {
  const fork_stack_thread& here = fork_stack_state();
  if ((children_start && here.launch_result == 0) ||
      (here.mark == reinterpret_cast<std::uintptr_t>(frame) && here.launch_type == type)) {
    started_frame_not_returned();
  }
}

void stack_frame_not_kept(std::uintptr_t consumed) noexcept {
  if (consumed == 0 || consumed == want_stack_frame) {
    return;  // no frame went on the stack
  }
  // The frame that went on the stack is not the made task's: make() must
  // have freed it again (then the stack's top is below it).
  const stacklet* const top = fork_stack_state().top;
  if (top != nullptr && consumed >= reinterpret_cast<std::uintptr_t>(top) &&
      consumed < reinterpret_cast<std::uintptr_t>(top->sp)) {
    fail(
        "canopy::call: the function made and kept another task before the task it returns "
        "(a call's function must make its own task first: docs/fork_join.md)");
  }
}

void adopt_stack(stacklet* stack) noexcept {
  fork_stack_thread& here = fork_stack_state();
  if (here.top == stack) {
    return;
  }
  if (here.top != nullptr) {
    if (!here.top->empty()) {
      fail("fork-join: a stack adopted over one that still holds frames");
    }
    give_stacklet(here.cache, here.top);
  }
  here.top = stack;
}

void leave_stack_run_slow(fork_stack_thread& here) noexcept {
  if (!here.top->empty()) {
    fail("fork-join: a run of region frames ended with frames left on its stack");
  }
  give_stacklet(here.cache, here.top);
  here.top = nullptr;
}

}  // namespace canopy::detail
