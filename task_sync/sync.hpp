// canopy::semaphore and canopy::mutex over semaphore_core.hpp, with the
// coroutine forms (co_await sem.acquire(n) / m.lock()). The contract is at
// the top of include/canopy/sync.hpp; the fiber forms are in fiber_forms.hpp.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <utility>

#include "../coroutine/coroutine.hpp"
#include "semaphore_core.hpp"

namespace canopy {

namespace detail {

using semaphore_state = basic_semaphore<waker>;

// The wait source of co_await sem.acquire(n) and m.lock(): tries the
// lock-free fast path first (ready), then queues (arm). Permits granted to
// a wait that is destroyed before it returns them to its task (cancelled)
// go back to the semaphore, and so to the next waiter.
class acquire_op {
 public:
  acquire_op(semaphore_state& state, std::size_t n) : state_(&state), n_(n) {
    if (n > state.max_permits()) {
      throw std::invalid_argument("canopy::semaphore::acquire: more permits than max_permits");
    }
  }
  acquire_op(acquire_op&& other) noexcept : state_(other.state_), n_(other.n_) {}
  acquire_op& operator=(acquire_op&&) = delete;
  ~acquire_op() {
    if (!consumed_ && granted()) {
      state_->release(n_);
    }
  }

  bool ready() noexcept {
    if (!tried_) {
      tried_ = true;
      fast_ = n_ == 0 || state_->try_acquire(n_);
    }
    return granted();
  }
  bool arm(const waker& wake) {
    node_.needed = n_;
    return state_->arm(node_, wake);
  }
  void disarm() noexcept { state_->disarm(node_); }
  void result() noexcept { consumed_ = true; }

 protected:
  [[nodiscard]] bool granted() const noexcept { return fast_ || node_.observed() == waiter_done; }
  semaphore_state* state_;
  std::size_t n_;
  bool tried_ = false;
  bool fast_ = false;
  bool consumed_ = false;
  semaphore_waiter<waker> node_;
};

}  // namespace detail

class semaphore {
 public:
  // The default: no stated maximum (release checks only the word's range).
  static constexpr std::size_t unbounded = detail::semaphore_state::word_max;

  // std::invalid_argument unless permits <= max_permits and 1 <= max_permits <= unbounded.
  explicit semaphore(std::size_t permits, std::size_t max_permits = unbounded)
      : state_(permits, max_permits) {}

  class acquire_op : public detail::acquire_op {
   public:
    using detail::acquire_op::acquire_op;
    auto operator co_await() && { return canopy::wait_on(std::move(*this)); }
  };

  // co_await: void, with n permits taken (give them back with release(n)).
  // Waits in FIFO order. std::invalid_argument if n > max_permits().
  [[nodiscard]] acquire_op acquire(std::size_t n = 1) { return acquire_op(state_, n); }
  [[nodiscard]] bool try_acquire(std::size_t n = 1) noexcept { return state_.try_acquire(n); }
  // std::logic_error when n > max_permits(), or when no task waits and the
  // available permits would exceed max_permits().
  void release(std::size_t n = 1) { state_.release(n); }

  [[nodiscard]] std::size_t available() const noexcept { return state_.available(); }
  [[nodiscard]] std::size_t max_permits() const noexcept { return state_.max_permits(); }
  // Tasks waiting (a snapshot, for tests and metrics).
  [[nodiscard]] std::size_t waiting() const noexcept { return state_.waiting(); }

 private:
  detail::semaphore_state state_;
};

class mutex {
 public:
  mutex() : state_(1, 1) {}
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;

  // Ownership of the lock: unlocks when destroyed, unless empty.
  class guard {
   public:
    guard() noexcept = default;
    explicit guard(mutex& owner) noexcept : owner_(&owner) {}
    guard(guard&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)) {}
    guard& operator=(guard&& other) noexcept {
      if (this != &other) {
        reset();
        owner_ = std::exchange(other.owner_, nullptr);
      }
      return *this;
    }
    ~guard() { reset(); }

    [[nodiscard]] bool owns_lock() const noexcept { return owner_ != nullptr; }
    [[nodiscard]] explicit operator bool() const noexcept { return owns_lock(); }
    // Unlock early. std::logic_error if this guard holds nothing (empty,
    // moved from, or already unlocked).
    void unlock() {
      if (owner_ == nullptr) {
        throw std::logic_error("canopy::mutex::guard::unlock(): this guard does not hold the lock");
      }
      std::exchange(owner_, nullptr)->unlock();
    }
    // Give up ownership without unlocking; the caller unlocks with
    // mutex::unlock(). Null if the guard held nothing.
    mutex* release() noexcept { return std::exchange(owner_, nullptr); }

   private:
    void reset() noexcept {
      if (owner_ != nullptr) {
        std::exchange(owner_, nullptr)->state_.release(1);
      }
    }
    mutex* owner_ = nullptr;
  };

  class lock_op : public detail::acquire_op {
   public:
    lock_op(detail::semaphore_state& state, mutex& owner) : acquire_op(state, 1), owner_(&owner) {}
    guard result() noexcept {
      detail::acquire_op::result();
      return guard(*owner_);
    }
    auto operator co_await() && { return canopy::wait_on(std::move(*this)); }

   private:
    mutex* owner_;
  };

  // co_await: a guard holding the lock. FIFO among waiters.
  [[nodiscard]] lock_op lock() { return lock_op(state_, *this); }
  // A guard holding the lock, or an empty guard when it is taken.
  [[nodiscard]] guard try_lock() noexcept { return state_.try_acquire(1) ? guard(*this) : guard(); }
  // Unlock a lock whose guard gave up ownership (guard::release()).
  // std::logic_error if the mutex is not locked.
  void unlock() {
    if (state_.available() != 0) {
      throw std::logic_error("canopy::mutex::unlock(): the mutex is not locked");
    }
    state_.release(1);  // also throws if an unlock raced us to it
  }
  [[nodiscard]] bool is_locked() const noexcept { return state_.available() == 0; }
  // Tasks waiting for the lock (a snapshot, for tests and metrics).
  [[nodiscard]] std::size_t waiting() const noexcept { return state_.waiting(); }

 private:
  detail::semaphore_state state_;
};

}  // namespace canopy
