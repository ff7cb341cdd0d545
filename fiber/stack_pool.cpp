#include "stack_pool.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "../executor/sanitizers.hpp"

#if defined(CANOPY_ADDRESS_SANITIZER)
#include <sanitizer/asan_interface.h>
#endif

namespace canopy::detail::fiber_stacks {

namespace {

constexpr std::size_t chunk_target_bytes = std::size_t{2} << 20;
constexpr std::uint64_t canary_value = 0xC4A7'0F1B'E5CA'D0E5ULL;
constexpr unsigned cache_capacity = 32;
constexpr unsigned cache_batch = 16;

std::size_t page_size() noexcept {
  static const auto size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

std::size_t read_number(const char* path, std::size_t fallback) {
  std::ifstream file(path);
  std::size_t value = 0;
  return (file >> value) ? value : fallback;
}

std::size_t count_mappings() {
  std::ifstream maps("/proc/self/maps");
  std::size_t lines = 0;
  std::string line;
  while (std::getline(maps, line)) {
    ++lines;
  }
  return lines;
}

// Half of the mappings still available go to guard pages; two per stack.
std::size_t default_guard_limit() {
  const std::size_t limit = read_number("/proc/sys/vm/max_map_count", 65530);
  const std::size_t used = count_mappings();
  const std::size_t spare = limit > used ? limit - used : 0;
  return spare / 2 / 2;
}

struct size_class {
  std::size_t size = 0;
  std::vector<fiber_stack> guarded_free;
  std::vector<fiber_stack> unguarded_free;
};

struct pool_state {
  std::mutex mutex;
  std::vector<size_class> classes;  // guarded by mutex
  stack_pool_stats stats;           // guarded by mutex
  bool limit_known = false;

  size_class& class_for(std::size_t size) {
    for (auto& entry : classes) {
      if (entry.size == size) {
        return entry;
      }
    }
    classes.push_back(size_class{size, {}, {}});
    return classes.back();
  }

  // Map one chunk of `size`-byte stacks; guard as many as the budget allows.
  void carve(size_class& target) {
    if (!limit_known) {
      stats.guard_limit = default_guard_limit();
      limit_known = true;
    }
    const std::size_t page = page_size();
    const std::size_t slot = target.size + page;
    const std::size_t count = std::max<std::size_t>(1, chunk_target_bytes / slot);
    void* memory = ::mmap(nullptr, slot * count, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (memory == MAP_FAILED) {
      throw std::bad_alloc();
    }
    ++stats.chunks;
    auto* bytes = static_cast<std::byte*>(memory);
    // Push in reverse so that the lowest stacks are handed out first.
    for (std::size_t index = count; index-- > 0;) {
      std::byte* const guard = bytes + index * slot;
      fiber_stack stack{guard + page, target.size, false};
      if (stats.guarded_stacks < stats.guard_limit && ::mprotect(guard, page, PROT_NONE) == 0) {
        stack.guarded = true;
        ++stats.guarded_stacks;
      }
      (stack.guarded ? target.guarded_free : target.unguarded_free).push_back(stack);
      ++stats.stacks;
    }
  }

  // Move up to `wanted` free stacks of `size` into `out` (guarded first).
  unsigned take(std::size_t size, fiber_stack* out, unsigned wanted) {
    const std::lock_guard lock(mutex);
    size_class& target = class_for(size);
    if (target.guarded_free.empty() && target.unguarded_free.empty()) {
      carve(target);
    }
    unsigned taken = 0;
    for (auto* list : {&target.guarded_free, &target.unguarded_free}) {
      while (taken < wanted && !list->empty()) {
        out[taken++] = list->back();
        list->pop_back();
      }
    }
    stats.in_use += taken;
    return taken;
  }

  void give(const fiber_stack* stacks, unsigned count) noexcept {
    const std::lock_guard lock(mutex);
    for (unsigned index = 0; index < count; ++index) {
      size_class& target = class_for(stacks[index].size);
      try {
        (stacks[index].guarded ? target.guarded_free : target.unguarded_free)
            .push_back(stacks[index]);
      } catch (...) {
        // Out of memory for the free list: the stack stays mapped, unused.
      }
    }
    stats.in_use -= count;
  }
};

pool_state& pool() {
  static auto* state = new pool_state();  // never destroyed: stacks outlive statics
  return *state;
}

// Per-thread cache for one size class (the one used last).
struct local_cache {
  std::size_t size = 0;
  unsigned count = 0;
  fiber_stack items[cache_capacity];

  void flush(unsigned keep) noexcept {
    if (count > keep) {
      pool().give(items + keep, count - keep);
      count = keep;
    }
  }
  ~local_cache() { flush(0); }
};

thread_local local_cache cache;

}  // namespace

std::size_t usable_size(std::size_t size) noexcept {
  const std::size_t page = page_size();
  return (std::max<std::size_t>(size, page) + page - 1) / page * page;
}

fiber_stack acquire(std::size_t size) {
  size = usable_size(size);
  local_cache& local = cache;
  if (local.size != size) {
    local.flush(0);
    local.size = size;
  }
  if (local.count == 0) {
    local.count = pool().take(size, local.items, cache_batch);
  }
  fiber_stack stack = local.items[--local.count];
  if (!stack.guarded) {
    // Only unguarded stacks are checked (fiber_task's check_canary); writing
    // the canary into a guarded one would touch its coldest page for nothing.
    write_canary(stack);
  }
  return stack;
}

void release(const fiber_stack& stack) noexcept {
#if defined(CANOPY_ADDRESS_SANITIZER)
  // A dead fiber's frames may leave their redzones poisoned.
  __asan_unpoison_memory_region(stack.base, stack.size);
#endif
  local_cache& local = cache;
  if (local.size != stack.size) {
    pool().give(&stack, 1);
    return;
  }
  if (local.count == cache_capacity) {
    local.flush(cache_capacity - cache_batch);  // the newest half goes back
  }
  local.items[local.count++] = stack;
}

// Not instrumented: a stack's lowest bytes may still carry a dead frame's
// shadow poisoning under ASan.
__attribute__((no_sanitize_address)) void write_canary(const fiber_stack& stack) noexcept {
  *static_cast<volatile std::uint64_t*>(stack.base) = canary_value;
}

__attribute__((no_sanitize_address)) bool canary_intact(const fiber_stack& stack) noexcept {
  return *static_cast<volatile std::uint64_t*>(stack.base) == canary_value;
}

}  // namespace canopy::detail::fiber_stacks

namespace canopy::stack_pool {

using detail::fiber_stacks::pool;
using detail::fiber_stacks::pool_state;

void set_guard_limit(std::size_t stacks) noexcept {
  pool_state& state = pool();
  const std::lock_guard lock(state.mutex);
  state.stats.guard_limit = stacks;
  state.limit_known = true;
}

stack_pool_stats stats() noexcept {
  pool_state& state = pool();
  const std::lock_guard lock(state.mutex);
  stack_pool_stats result = state.stats;
  if (!state.limit_known) {
    result.guard_limit = 0;
  }
  return result;
}

}  // namespace canopy::stack_pool
