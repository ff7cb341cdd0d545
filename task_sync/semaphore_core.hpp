// semaphore_core — the fair counting semaphore that canopy::semaphore and
// canopy::mutex are built on, generic in the waker so that the model
// checker (tests/model/) runs this code with a waker of its own.
//
// State word: bit 0 = "waiters queued", bits 1.. = available permits.
// Invariant (I): bit 0 is set exactly when the queue is non-empty, and
// while it is set the count is 0. Bit 0 changes only under the lock, so:
//   * the fast paths (try_acquire, and release while no one waits) are one
//     CAS on the word and never take the lock;
//   * an acquirer that must wait sets bit 0 with a CAS under the lock, and
//     a release that races it either lands first (the acquirer's CAS fails
//     and it re-reads the permits) or sees bit 0 and takes the lock to hand
//     its permits to the queue: no wake-up is lost between the two, because
//     both decide on the same word.
// FIFO: while anyone waits the count is 0, so a newcomer's try_acquire
// fails and it queues behind. A queued waiter keeps the permits it was
// given so far (`assigned`) until it has all it asked for; one that leaves
// early (cancelled) hands what it holds to the waiters behind it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <utility>

#include "../atomics/atomics.hpp"
#include "wait_lock.hpp"
#include "waiter_list.hpp"

namespace canopy::detail {

template <class Waker>
struct semaphore_waiter : waiter_node<Waker> {
  std::size_t needed = 0;    // permits asked for
  std::size_t assigned = 0;  // given so far (guarded by the lock)
};

template <class Waker>
class basic_semaphore {
 public:
  using waiter = semaphore_waiter<Waker>;

  // The largest permit count the word holds.
  static constexpr std::size_t word_max = (std::uint64_t{1} << 62);

  basic_semaphore(std::size_t permits, std::size_t max_permits)
      : word_(std::uint64_t{permits} << 1), max_(max_permits) {
    if (max_permits == 0 || max_permits > word_max || permits > max_permits) {
      throw std::invalid_argument(
          "canopy::semaphore: need 0 <= permits <= max_permits, 1 <= max_permits <= 2^62");
    }
  }
  basic_semaphore(const basic_semaphore&) = delete;
  basic_semaphore& operator=(const basic_semaphore&) = delete;

  [[nodiscard]] std::size_t max_permits() const noexcept { return max_; }
  [[nodiscard]] std::size_t available() const noexcept {
    return static_cast<std::size_t>(word_.load(atomics::relaxed) >> 1);
  }

  // Tasks queued now (a snapshot, for tests and metrics).
  [[nodiscard]] std::size_t waiting() const noexcept {
    wait_lock_guard guard(lock_);
    return queue_.size();
  }

  // Take n permits now, or return false; never waits, never jumps the queue.
  [[nodiscard]] bool try_acquire(std::size_t n) noexcept {
    std::uint64_t seen = word_.load(atomics::relaxed);
    while ((seen & 1) == 0 && (seen >> 1) >= n) {
      // acquire: pairs with release()'s release CAS and the locked hand-over
      // (publish_leftover); what the releaser wrote before releasing is
      // visible to the new holder.
      if (word_.compare_exchange_weak(seen, seen - (std::uint64_t{n} << 1), atomics::acquire,
                                      atomics::relaxed)) {
        return true;
      }
    }
    return false;
  }

  // Queue `node` for node.needed permits, or take them now (false: node is
  // done, nothing stays registered).
  [[nodiscard]] bool arm(waiter& node, const Waker& waker) {
    wait_lock_guard guard(lock_);
    std::uint64_t seen = word_.load(atomics::relaxed);
    for (;;) {
      if ((seen & 1) != 0) {
        break;  // (I): count is 0 and the queue is ours to join
      }
      const std::uint64_t have = seen >> 1;
      if (have >= node.needed) {
        // acquire: as in try_acquire.
        if (word_.compare_exchange_weak(seen, seen - (std::uint64_t{node.needed} << 1),
                                        atomics::acquire, atomics::relaxed)) {
          node.assigned = node.needed;
          node.finish(waiter_done);
          return false;
        }
        continue;
      }
      // Take what is there and announce a waiter, in one step; a fast-path
      // release that got in first changes `seen` and we look again.
      // acquire: as in try_acquire (we take `have` permits).
      if (word_.compare_exchange_weak(seen, 1, atomics::acquire, atomics::relaxed)) {
        node.assigned = static_cast<std::size_t>(have);
        break;
      }
    }
    node.waker = waker;
    queue_.push_back(node);
    return true;
  }

  // The waiting task leaves (its wait ended or it was cancelled). A node
  // still queued hands the permits it was given to the waiters behind it.
  void disarm(waiter& node) noexcept {
    wake_batch<Waker> wakes;
    {
      wait_lock_guard guard(lock_);
      if (!node.listed) {
        return;  // granted: the permits are the node's (see release_granted)
      }
      queue_.remove(node);
      std::size_t give = std::exchange(node.assigned, 0);
      give = hand_out(give, wakes, guard);
      publish_leftover(give);
    }
    wakes.wake_all();
  }

  // Return n permits; they go to the waiters in queue order first.
  // Errors: std::logic_error when n > max_permits, or when no one waits and
  // the available count would exceed max_permits (more released than taken).
  void release(std::size_t n) {
    if (n == 0) {
      return;
    }
    if (n > max_) {
      throw std::logic_error("canopy::semaphore::release: more permits than max_permits");
    }
    std::uint64_t seen = word_.load(atomics::relaxed);
    while ((seen & 1) == 0) {
      if ((seen >> 1) + n > max_) {
        throw std::logic_error(
            "canopy::semaphore::release: more permits released than acquired (above "
            "max_permits)");
      }
      // release: pairs with try_acquire()'s and arm()'s acquire CAS.
      if (word_.compare_exchange_weak(seen, seen + (std::uint64_t{n} << 1), atomics::release,
                                      atomics::relaxed)) {
        return;
      }
    }
    wake_batch<Waker> wakes;
    {
      wait_lock_guard guard(lock_);
      if ((word_.load(atomics::relaxed) & 1) == 0) {
        // The queue emptied between our look and the lock: plain add.
        guard.unlock();
        release(n);
        return;
      }
      n = hand_out(n, wakes, guard);
      publish_leftover(n);
    }
    wakes.wake_all();
  }

 private:
  // Under the lock: give `n` permits to the queue's head waiters; returns
  // what is left once the queue is empty. When the batch of wakers fills,
  // wakes it with the lock dropped (the remaining permits stay with us, so
  // (I) still holds while the lock is free) and goes on.
  std::size_t hand_out(std::size_t n, wake_batch<Waker>& wakes, wait_lock_guard& guard) {
    static_cast<void>(guard);
    while (n > 0 && !queue_.empty()) {
      waiter& head = *queue_.front();
      const std::size_t give = std::min(n, head.needed - head.assigned);
      head.assigned += give;
      n -= give;
      if (head.assigned == head.needed) {
        queue_.remove(head);
        wakes.add(head.waker);  // copied before finish(): the node may go
        head.finish(waiter_done);
        if (wakes.full()) {
          lock_.unlock();
          wakes.wake_all();
          lock_.lock();
        }
      }
    }
    return n;
  }

  // Under the lock, after hand_out: an emptied queue clears bit 0 and adds
  // the leftover permits; otherwise (I) holds as is (count 0).
  // Not a plain store: hand_out drops the lock to wake a full batch, and
  // meanwhile the waiters behind may all leave (disarm empties the queue
  // and clears bit 0), after which fast-path releases and acquires change
  // the count; a store would overwrite what they left there (permits a
  // leaving waiter handed back, or released meanwhile, lost). With bit 0
  // still set the count is 0 (I), so the CAS gives the word a store would.
  void publish_leftover(std::size_t leftover) noexcept {
    if (!queue_.empty()) {
      return;
    }
    std::uint64_t seen = word_.load(atomics::relaxed);
    // release: pairs with try_acquire()'s acquire CAS (a new holder sees
    // what the releasers wrote); a failed CAS only re-reads the word.
    while (!word_.compare_exchange_weak(seen,
                                        (seen & ~std::uint64_t{1}) + (std::uint64_t{leftover} << 1),
                                        atomics::release, atomics::relaxed)) {
    }
  }

  atomics::atomic<std::uint64_t> word_;
  std::size_t max_;
  mutable wait_lock lock_;
  waiter_list<waiter> queue_;  // guarded by lock_
};

}  // namespace canopy::detail
