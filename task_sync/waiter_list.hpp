// waiter_list — the intrusive FIFO of waiting tasks that every task_sync
// primitive keeps under its wait_lock, and the small batch of wakers a
// primitive collects under the lock and wakes after releasing it.
//
// A waiter node lives in the waiting task (inside the wait source that the
// task's co_await or fiber wait holds), so waiting allocates nothing. Its
// `state` is the one word the waiting side reads without the lock:
//   waiting  listed, or about to be
//   done     the primitive finished the wait (a permit granted, a value
//            taken or reserved)
//   closed   the primitive was closed while the node waited
// A node leaves `waiting` once, under the lock, with a release store that
// ready() pairs with; the primitive copies the node's waker into a
// wake_batch before it drops the lock, because once `state` is visible the
// task may run, disarm and free the node.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../atomics/atomics.hpp"

namespace canopy::detail {

enum : std::uint32_t { waiter_waiting = 0, waiter_done = 1, waiter_closed = 2 };

template <class Waker>
struct waiter_node {
  waiter_node* next = nullptr;  // guarded by the primitive's lock
  waiter_node* prev = nullptr;  // guarded by the primitive's lock
  bool listed = false;          // guarded by the primitive's lock
  Waker waker{};                // written under the lock by arm
  atomics::atomic<std::uint32_t> state{waiter_waiting};

  [[nodiscard]] std::uint32_t observed() const noexcept {
    // acquire: pairs with finish()'s release store; what the primitive
    // wrote for this waiter (a value, a permit count) is visible.
    return state.load(atomics::acquire);
  }
  // Under the primitive's lock; the node may be freed once the lock drops.
  void finish(std::uint32_t outcome) noexcept {
    listed = false;
    // release: pairs with observed()'s acquire load.
    state.store(outcome, atomics::release);
  }
};

template <class Node>
class waiter_list {
 public:
  [[nodiscard]] bool empty() const noexcept { return head_ == nullptr; }
  [[nodiscard]] Node* front() const noexcept { return head_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

  void push_back(Node& node) noexcept {
    node.next = nullptr;
    node.prev = tail_;
    if (tail_ != nullptr) {
      tail_->next = &node;
    } else {
      head_ = &node;
    }
    tail_ = &node;
    node.listed = true;
    ++size_;
  }

  Node* pop_front() noexcept {
    Node* const node = head_;
    if (node != nullptr) {
      remove(*node);
    }
    return node;
  }

  void remove(Node& node) noexcept {
    Node* const next = static_cast<Node*>(node.next);
    Node* const prev = static_cast<Node*>(node.prev);
    if (prev != nullptr) {
      prev->next = next;
    } else {
      head_ = next;
    }
    if (next != nullptr) {
      next->prev = prev;
    } else {
      tail_ = prev;
    }
    node.next = nullptr;
    node.prev = nullptr;
    node.listed = false;
    --size_;
  }

 private:
  Node* head_ = nullptr;
  Node* tail_ = nullptr;
  std::size_t size_ = 0;
};

// Wakers collected under a lock, woken after it is released. Fixed
// capacity: a primitive that has more to wake wakes a full batch, then
// takes its lock again and goes on.
template <class Waker, std::size_t Capacity = 8>
class wake_batch {
 public:
  [[nodiscard]] bool full() const noexcept { return count_ == Capacity; }
  void add(const Waker& waker) noexcept { wakers_[count_++] = waker; }
  void wake_all() noexcept {
    for (std::size_t i = 0; i < count_; ++i) {
      wakers_[i].wake();
    }
    count_ = 0;
  }

 private:
  Waker wakers_[Capacity]{};
  std::size_t count_ = 0;
};

}  // namespace canopy::detail
