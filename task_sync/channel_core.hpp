// channel_core — the bounded multi-producer multi-consumer queue under
// canopy::channel<T>, generic in the waker so that the model checker
// (tests/model/) runs this code, not a copy.
//
// One wait_lock guards the ring (allocated once, `capacity` slots), the
// `closed` flag, the queue of waiting senders (each holding the value it
// wants to send) and the queue of waiting receivers. State under the lock:
//   size      values in the ring
//   reserved  values promised to receivers that were woken for them and
//             have not taken them yet
// Invariants, each kept by every locked section:
//   (R) receivers are queued only while size == reserved (every value in
//       the ring is promised): a push with a receiver queued reserves the
//       new value for the first one and wakes it.
//   (S) senders are queued only while size == capacity: a pop with a sender
//       queued moves the first one's value into the freed slot and wakes it.
// No lost wake-up: a receiver decides to wait (arm) under the same lock
// under which a sender pushes, so either the push comes first and arm sees
// an unpromised value and does not wait, or arm comes first and the push
// finds the receiver queued (R) and wakes it. The same holds for senders
// (S). The model checker explores this handshake, and the mutant table
// removes arm's look at the ring to check that it would notice.
// A receiver that was woken with a value promised but is cancelled before
// it takes it (drop_reservation) passes the promise to the next queued
// receiver, or leaves the value in the ring for anyone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <utility>

#include "wait_lock.hpp"
#include "waiter_list.hpp"

namespace canopy::detail {

enum class channel_op : std::uint8_t { ok, full, empty, closed };

template <class T, class Waker>
struct channel_send_waiter : waiter_node<Waker> {
  T* value = nullptr;  // moved into the ring by the receiver that makes room
};

template <class Waker>
struct channel_recv_waiter : waiter_node<Waker> {};

template <class T, class Waker>
class basic_channel {
 public:
  using send_waiter = channel_send_waiter<T, Waker>;
  using recv_waiter = channel_recv_waiter<Waker>;

  explicit basic_channel(std::size_t capacity) : capacity_(capacity) {
    if (capacity == 0) {
      throw std::invalid_argument(
          "canopy::channel: capacity must be at least 1 (no rendezvous channel)");
    }
    slots_ = std::allocator<T>().allocate(capacity);
  }
  basic_channel(const basic_channel&) = delete;
  basic_channel& operator=(const basic_channel&) = delete;
  ~basic_channel() {
    while (size_ > 0) {
      std::destroy_at(slots_ + head_);
      head_ = (head_ + 1) % capacity_;
      --size_;
    }
    std::allocator<T>().deallocate(slots_, capacity_);
  }

  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }

  // Never waits. ok: `value` was moved into the channel.
  channel_op try_send(T& value) {
    wake_batch<Waker, 1> wakes;
    {
      wait_lock_guard guard(lock_);
      if (closed_) {
        return channel_op::closed;
      }
      if (size_ == capacity_) {
        return channel_op::full;
      }
      push_locked(std::move(value), wakes);
    }
    wakes.wake_all();
    return channel_op::ok;
  }

  // Never waits. ok: the oldest unpromised value was moved into `out`.
  channel_op try_recv(std::optional<T>& out) {
    wake_batch<Waker, 1> wakes;
    {
      wait_lock_guard guard(lock_);
      if (size_ == reserved_) {
        return closed_ ? channel_op::closed : channel_op::empty;
      }
      pop_locked(out, wakes);
    }
    wakes.wake_all();
    return channel_op::ok;
  }

  // Queue a sender whose *node.value does not fit, or finish it now: false
  // when node.state is already done (value sent) or closed (value kept).
  [[nodiscard]] bool arm_send(send_waiter& node, const Waker& waker) {
    wake_batch<Waker, 1> wakes;
    {
      wait_lock_guard guard(lock_);
      if (closed_) {
        node.finish(waiter_closed);
        return false;
      }
      if (size_ < capacity_) {
        push_locked(std::move(*node.value), wakes);
        node.finish(waiter_done);
      } else {
        node.waker = waker;
        senders_.push_back(node);
        return true;
      }
    }
    wakes.wake_all();
    return false;
  }

  // Queue a receiver, or finish it now: false when a value was promised to
  // it (done: take_promised) or the channel is closed and drained (closed).
  [[nodiscard]] bool arm_recv(recv_waiter& node, const Waker& waker) {
    wait_lock_guard guard(lock_);
    if (size_ > reserved_) {
      ++reserved_;
      node.finish(waiter_done);
      return false;
    }
    if (closed_) {
      node.finish(waiter_closed);
      return false;
    }
    node.waker = waker;
    receivers_.push_back(node);
    return true;
  }

  // Leave the queue, if still in it (the wait ended or was cancelled).
  void disarm(waiter_node<Waker>& node, bool sender) noexcept {
    wait_lock_guard guard(lock_);
    if (node.listed) {
      if (sender) {
        senders_.remove(static_cast<send_waiter&>(node));
      } else {
        receivers_.remove(static_cast<recv_waiter&>(node));
      }
    }
  }

  // A receiver whose node is done takes the value promised to it.
  void take_promised(std::optional<T>& out) {
    wake_batch<Waker, 1> wakes;
    {
      wait_lock_guard guard(lock_);
      --reserved_;
      pop_locked(out, wakes);
    }
    wakes.wake_all();
  }

  // A receiver whose node is done will not take its value (cancelled):
  // the promise passes to the next queued receiver, if any.
  void drop_reservation() noexcept {
    wake_batch<Waker, 1> wakes;
    {
      wait_lock_guard guard(lock_);
      --reserved_;
      if (recv_waiter* next = receivers_.pop_front()) {
        ++reserved_;
        wakes.add(next->waker);
        next->finish(waiter_done);
      }
    }
    wakes.wake_all();
  }

  // No more sends; waiting senders get their values back (closed), waiting
  // receivers end (closed; by (R) nothing unpromised is left for them).
  // Values in the ring stay for the receivers to drain. Idempotent.
  void close() noexcept {
    for (;;) {
      wake_batch<Waker> wakes;
      bool more = false;
      {
        wait_lock_guard guard(lock_);
        closed_ = true;
        while (!wakes.full()) {
          waiter_node<Waker>* node = senders_.pop_front();
          if (node == nullptr) {
            node = receivers_.pop_front();
          }
          if (node == nullptr) {
            break;
          }
          wakes.add(node->waker);
          node->finish(waiter_closed);
        }
        more = !senders_.empty() || !receivers_.empty();
      }
      wakes.wake_all();
      if (!more) {
        return;
      }
    }
  }

  [[nodiscard]] bool closed() const noexcept {
    wait_lock_guard guard(lock_);
    return closed_;
  }
  // Tasks queued to send / to receive (a snapshot, for tests and metrics).
  [[nodiscard]] std::size_t waiting_senders() const noexcept {
    wait_lock_guard guard(lock_);
    return senders_.size();
  }
  [[nodiscard]] std::size_t waiting_receivers() const noexcept {
    wait_lock_guard guard(lock_);
    return receivers_.size();
  }
  // Values in the ring (promised ones included); a snapshot.
  [[nodiscard]] std::size_t size() const noexcept {
    wait_lock_guard guard(lock_);
    return size_;
  }

 private:
  // Under the lock, with size_ < capacity_. Keeps (R).
  void push_locked(T&& value, wake_batch<Waker, 1>& wakes) {
    ::new (static_cast<void*>(slots_ + (head_ + size_) % capacity_)) T(std::move(value));
    ++size_;
    if (recv_waiter* receiver = receivers_.pop_front()) {
      ++reserved_;
      wakes.add(receiver->waker);
      receiver->finish(waiter_done);
    }
  }

  // Under the lock, with size_ > 0. Keeps (S).
  void pop_locked(std::optional<T>& out, wake_batch<Waker, 1>& wakes) {
    out.emplace(std::move(slots_[head_]));
    std::destroy_at(slots_ + head_);
    head_ = (head_ + 1) % capacity_;
    --size_;
    if (send_waiter* sender = senders_.pop_front()) {
      ::new (static_cast<void*>(slots_ + (head_ + size_) % capacity_)) T(std::move(*sender->value));
      ++size_;
      wakes.add(sender->waker);
      sender->finish(waiter_done);
    }
  }

  mutable wait_lock lock_;
  T* slots_ = nullptr;
  std::size_t capacity_;
  std::size_t head_ = 0;      // guarded by lock_
  std::size_t size_ = 0;      // guarded by lock_
  std::size_t reserved_ = 0;  // guarded by lock_
  bool closed_ = false;       // guarded by lock_
  waiter_list<send_waiter> senders_;
  waiter_list<recv_waiter> receivers_;
};

}  // namespace canopy::detail
