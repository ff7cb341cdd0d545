#include "coroutine/frame_pool.hpp"

#include <mutex>
#include <new>

namespace canopy::detail {

namespace {

constexpr std::size_t granule = 16;
constexpr std::size_t max_pooled = 1024;
constexpr std::size_t classes = max_pooled / granule;
// A thread keeps up to 2 * batch_size free frames per class; beyond that it
// moves a batch to the shared depot, and an empty list takes a batch from
// there before it calls operator new. In fork-join code one worker often
// frees more frames than it allocates (it finishes stolen tasks), so
// without the depot its list would overflow into operator delete while
// another worker's list runs dry into operator new — cross-thread
// malloc/free, and the arena lock futexes that come with it.
constexpr unsigned batch_size = 256;
constexpr unsigned per_class_limit = 2 * batch_size;
constexpr unsigned depot_batches_per_class = 1024;  // at most 256k frames parked per class

struct free_frame_node {
  free_frame_node* next;
};

// Full batches (linked lists of batch_size frames) shared by all threads.
// Touched once per batch_size frees or allocations, under a mutex.
struct depot {
  std::mutex mutex;
  free_frame_node* batches[classes][depot_batches_per_class] = {};
  unsigned counts[classes] = {};

  // Take ownership of a batch; false if the depot is full for this class.
  bool put(std::size_t index, free_frame_node* batch) {
    const std::lock_guard lock(mutex);
    if (counts[index] == depot_batches_per_class) {
      return false;
    }
    batches[index][counts[index]++] = batch;
    return true;
  }
  free_frame_node* take(std::size_t index) {
    const std::lock_guard lock(mutex);
    return counts[index] == 0 ? nullptr : batches[index][--counts[index]];
  }
};

// Never destroyed: threads may free frames during static destruction.
depot& shared_depot() {
  static depot* const instance = new depot();
  return *instance;
}

void delete_list(free_frame_node* node, std::size_t index) noexcept {
  while (node != nullptr) {
    free_frame_node* const next = node->next;
    ::operator delete(node, (index + 1) * granule);
    node = next;
  }
}

struct thread_frames {
  free_frame_node* heads[classes] = {};
  unsigned counts[classes] = {};
  bool closed = false;

  ~thread_frames() {
    closed = true;  // a late free on this thread bypasses the pool
    for (std::size_t index = 0; index < classes; ++index) {
      delete_list(heads[index], index);
      heads[index] = nullptr;
    }
  }
};

thread_local thread_frames frames;

}  // namespace

// Under ASan frames are not recycled, so use-after-free of a frame is caught.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool pooling = false;
#else
constexpr bool pooling = true;
#endif

void* allocate_frame(std::size_t size) {
  if (!pooling || size > max_pooled || size == 0) {
    return ::operator new(size);
  }
  const std::size_t index = (size - 1) / granule;
  thread_frames& local = frames;
  free_frame_node* node = local.heads[index];
  if (node == nullptr && !local.closed) {
    node = shared_depot().take(index);
    local.counts[index] = node != nullptr ? batch_size : 0;
  }
  if (node != nullptr) {
    local.heads[index] = node->next;
    --local.counts[index];
    return node;
  }
  return ::operator new((index + 1) * granule);
}

void free_frame(void* frame, std::size_t size) noexcept {
  if (!pooling || size > max_pooled || size == 0) {
    ::operator delete(frame, size);
    return;
  }
  const std::size_t index = (size - 1) / granule;
  thread_frames& local = frames;
  if (local.closed) {
    ::operator delete(frame, (index + 1) * granule);
    return;
  }
  auto* node = static_cast<free_frame_node*>(frame);
  node->next = local.heads[index];
  local.heads[index] = node;
  if (++local.counts[index] < per_class_limit) {
    return;
  }
  // Full: detach the first batch_size frames and park them in the depot.
  free_frame_node* const batch = local.heads[index];
  free_frame_node* last = batch;
  for (unsigned count = 1; count < batch_size; ++count) {
    last = last->next;
  }
  local.heads[index] = last->next;
  last->next = nullptr;
  local.counts[index] -= batch_size;
  if (!shared_depot().put(index, batch)) {
    delete_list(batch, index);
  }
}

}  // namespace canopy::detail
