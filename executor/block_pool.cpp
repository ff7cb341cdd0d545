#include "block_pool.hpp"

#include <algorithm>
#include <mutex>
#include <new>
#include <vector>

namespace canopy::detail {

using namespace pool;  // NOLINT(google-build-using-namespace): the pool's own layout

namespace {

// A thread keeps up to 2 * batch_size free blocks per class; beyond that it
// moves a batch to the shared depot, and an empty list takes a batch from
// there before it calls operator new. In fork-join code one worker often
// frees more blocks than it allocates (it finishes stolen tasks), so
// without the depot its list would overflow into operator delete while
// another worker's list runs dry into operator new — cross-thread
// malloc/free, and the arena lock futexes that come with it.
//
// Free blocks are kept as arrays of pointers, not as lists threaded through
// the blocks: taking a block then reads nothing from it (a block freed on
// another core is a cache miss, and a read miss stalls where the writes that
// initialise a new block do not), and freeing one writes nothing to it.
constexpr std::size_t depot_batches_per_class = 1024;  // at most 256k blocks parked per class

struct batch {
  void* blocks[batch_size];
};

// Full batches shared by all threads, and empty batch objects for reuse.
// Touched once per batch_size frees or allocations, under a mutex.
struct depot {
  std::mutex mutex;
  std::vector<batch*> full[classes];
  std::vector<batch*> empty;

  // Move batch_size blocks from `from` into the depot; false if it is full.
  bool put(std::size_t index, void** from) {
    const std::lock_guard lock(mutex);
    if (full[index].size() == depot_batches_per_class) {
      return false;
    }
    batch* parked = nullptr;
    if (!empty.empty()) {
      parked = empty.back();
      empty.pop_back();
    } else {
      parked = new (std::nothrow) batch;
      if (parked == nullptr) {
        return false;
      }
    }
    std::copy(from, from + batch_size, parked->blocks);
    try {
      full[index].push_back(parked);
    } catch (...) {
      empty.push_back(parked);  // cannot throw: capacity was there
      return false;
    }
    return true;
  }
  // Move batch_size blocks into `into`; false if the depot has none.
  bool take(std::size_t index, void** into) {
    const std::lock_guard lock(mutex);
    if (full[index].empty()) {
      return false;
    }
    batch* const taken = full[index].back();
    full[index].pop_back();
    std::copy(taken->blocks, taken->blocks + batch_size, into);
    empty.push_back(taken);  // capacity: it held this batch before
    return true;
  }
};

// Never destroyed: threads may free blocks during static destruction.
depot& shared_depot() {
  static depot* const instance = [] {
    auto* made = new depot();
    for (auto& list : made->full) {
      list.reserve(depot_batches_per_class);
    }
    made->empty.reserve(classes * depot_batches_per_class);
    return made;
  }();
  return *instance;
}

struct thread_cleanup {
  thread_cleanup() = default;
  thread_cleanup(const thread_cleanup&) = delete;
  thread_cleanup& operator=(const thread_cleanup&) = delete;
  ~thread_cleanup() {
    block_pool_here.closed = true;
    for (std::size_t index = 0; index < classes; ++index) {
      class_cache& cache = block_pool_here.caches[index];
      for (unsigned slot = 0; slot < cache.count; ++slot) {
        ::operator delete(cache.blocks[slot], class_block_size(index));
      }
      delete[] cache.blocks;
      cache = {};
    }
  }
};

}  // namespace

void* allocate_block_slow(std::size_t size) {
  if (!pooled_size(size)) {
    return ::operator new(size);
  }
  const std::size_t index = class_of(size);
  class_cache& cache = block_pool_here.caches[index];
  if (cache.blocks != nullptr && shared_depot().take(index, cache.blocks)) {
    cache.count = batch_size - 1;
    return cache.blocks[batch_size - 1];
  }
  return ::operator new(class_block_size(index));
}

void free_block_slow(void* block, std::size_t size) noexcept {
  if (!pooled_size(size)) {
    ::operator delete(block, size);
    return;
  }
  const std::size_t index = class_of(size);
  class_cache& cache = block_pool_here.caches[index];
  if (cache.blocks == nullptr) {
    if (block_pool_here.closed) {
      ::operator delete(block, class_block_size(index));
      return;
    }
    cache.blocks = new (std::nothrow) void*[per_class_limit];
    if (cache.blocks == nullptr) {
      ::operator delete(block, class_block_size(index));
      return;
    }
    // The first array this thread owns: make sure the thread frees them all
    // when it exits (constructed once per thread, on this first call).
    thread_local thread_cleanup cleanup;
  }
  if (cache.count == per_class_limit) {
    // Full: park the oldest batch_size blocks in the depot.
    if (!shared_depot().put(index, cache.blocks)) {
      for (unsigned slot = 0; slot < batch_size; ++slot) {
        ::operator delete(cache.blocks[slot], class_block_size(index));
      }
    }
    std::copy(cache.blocks + batch_size, cache.blocks + per_class_limit, cache.blocks);
    cache.count -= batch_size;
  }
  cache.blocks[cache.count++] = block;
}

void* allocate_block(std::size_t size) { return allocate_pooled_block(size); }

void free_block(void* block, std::size_t size) noexcept { free_pooled_block(block, size); }

}  // namespace canopy::detail
