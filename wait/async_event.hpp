// async_event — a manual-reset event that tasks wait on without holding a
// worker. set() and reset() from any thread (workers or not).
//
//   canopy::async_event ready;
//   co_await ready;                  // in a coroutine task (coroutine/event_await.hpp)
//   canopy::this_fiber::await(ready); // in a fiber
//   ready.set();                     // wakes every waiter
//
// Waiters are wait_links kept in an intrusive list under a mutex. set()
// detaches the whole list under the mutex and fires the links outside it.
// A waiter destroyed while still listed (cancel, shutdown) unlinks itself
// (disarm), so nothing is deferred. The event must outlive its waiters.
#pragma once

#include <mutex>
#include <utility>

#include "../atomics/atomics.hpp"
#include "wait_link.hpp"

namespace canopy {

class async_event;

namespace detail {

struct event_waiter {
  wait_link link;  // first member: disarm() gets the link, casts back
  event_waiter* next = nullptr;
  event_waiter* prev = nullptr;
  bool listed = false;  // guarded by the event's mutex
};

}  // namespace detail

class async_event {
 public:
  async_event() = default;
  explicit async_event(bool initially_set) : set_(initially_set) {}
  async_event(const async_event&) = delete;
  async_event& operator=(const async_event&) = delete;

  [[nodiscard]] bool is_set() const noexcept {
    // acquire: pairs with set()'s release; what the setter wrote before
    // set() is visible to a waiter that does not suspend.
    return set_.load(detail::atomics::acquire);
  }

  // Set the event and wake every waiter.
  void set() noexcept {
    detail::event_waiter* waiters = nullptr;
    {
      const std::lock_guard lock(mutex_);
      // release: pairs with is_set()'s acquire load (a waiter that checks
      // without taking the mutex sees what the setter wrote before set()).
      set_.store(true, detail::atomics::release);
      waiters = std::exchange(head_, nullptr);
      for (detail::event_waiter* node = waiters; node != nullptr; node = node->next) {
        node->listed = false;
      }
    }
    while (waiters != nullptr) {
      detail::event_waiter* const next = waiters->next;  // the node may die in fire()
      detail::wait_link::fire(&waiters->link);
      waiters = next;
    }
  }

  void reset() noexcept {
    const std::lock_guard lock(mutex_);
    set_.store(false, detail::atomics::relaxed);
  }

  // The wait on this event, shared by coroutines and fibers: a coroutine
  // records link() as what it waits for, a fiber as its armed link.
  class wait {
   public:
    explicit wait(async_event& event) noexcept : event_(&event) {
      node_.link.disarm = &disarm;
      node_.link.source = &event;
    }
    wait(const wait& other) noexcept : event_(other.event_), node_(other.node_) {}

    [[nodiscard]] bool ready() const noexcept { return event_->is_set(); }
    [[nodiscard]] detail::wait_link& link() noexcept { return node_.link; }

    // Register the running task; false if the event is already set.
    [[nodiscard]] bool arm() noexcept {
      node_.link.arm_for_current_task();
      const std::lock_guard lock(event_->mutex_);
      if (event_->set_.load(detail::atomics::relaxed)) {
        return false;
      }
      node_.prev = nullptr;
      node_.next = event_->head_;
      if (event_->head_ != nullptr) {
        event_->head_->prev = &node_;
      }
      event_->head_ = &node_;
      node_.listed = true;
      return true;
    }

   private:
    static bool disarm(detail::wait_link& link) noexcept {
      auto& node = reinterpret_cast<detail::event_waiter&>(link);
      auto* event = static_cast<async_event*>(link.source);
      const std::lock_guard lock(event->mutex_);
      if (!node.listed) {
        return false;  // set() took it: a fire() is coming or done
      }
      if (node.prev != nullptr) {
        node.prev->next = node.next;
      } else {
        event->head_ = node.next;
      }
      if (node.next != nullptr) {
        node.next->prev = node.prev;
      }
      node.listed = false;
      return true;
    }

    async_event* event_;
    detail::event_waiter node_;
  };

  // co_await event in a coroutine task: coroutine/event_await.hpp.

 private:
  mutable std::mutex mutex_;
  detail::atomics::atomic<bool> set_{false};
  detail::event_waiter* head_ = nullptr;  // guarded by mutex_
};

}  // namespace canopy
