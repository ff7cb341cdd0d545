#include "coroutine/frame_pool.hpp"

#include <new>

namespace canopy::detail {

namespace {

constexpr std::size_t granule = 16;
constexpr std::size_t max_pooled = 1024;
constexpr std::size_t classes = max_pooled / granule;
constexpr unsigned per_class_limit = 4096;

struct free_frame_node {
  free_frame_node* next;
};

struct thread_frames {
  free_frame_node* heads[classes] = {};
  unsigned counts[classes] = {};

  ~thread_frames() {
    for (std::size_t index = 0; index < classes; ++index) {
      while (heads[index] != nullptr) {
        free_frame_node* const node = heads[index];
        heads[index] = node->next;
        ::operator delete(node, (index + 1) * granule);
      }
      counts[index] = per_class_limit;  // a late free on this thread bypasses the pool
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
  if (free_frame_node* const node = local.heads[index]; node != nullptr) {
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
  if (local.counts[index] >= per_class_limit) {
    ::operator delete(frame, (index + 1) * granule);
    return;
  }
  auto* node = static_cast<free_frame_node*>(frame);
  node->next = local.heads[index];
  local.heads[index] = node;
  ++local.counts[index];
}

}  // namespace canopy::detail
