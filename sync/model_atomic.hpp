// model_atomic — the atomics a model-checking build substitutes (see
// atomics.hpp). Each operation first calls schedule_point(), where the model
// checker (tests/model/) may switch to another logical thread, then runs
// without interruption. The checker explores interleavings of the *real*
// protocol code under sequential consistency; weaker orderings are checked
// by ThreadSanitizer and by the ordering notes in the code, not here.
#pragma once

#include <cstdint>

namespace canopy::model {

// Provided by the model checker.
void schedule_point() noexcept;
// Block the current logical thread while *word == expected (futex wait).
void park_on(const void* word, std::uint32_t expected, std::uint32_t current) noexcept;
// Make every logical thread parked on `word` runnable (futex wake).
void unpark_on(const void* word) noexcept;

template <class T>
class atomic {
 public:
  atomic() noexcept : value_{} {}
  constexpr atomic(T value) noexcept : value_(value) {}  // NOLINT(google-explicit-constructor)
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;

  T load(int /*order*/ = 0) const noexcept {
    schedule_point();
    return value_;
  }
  void store(T value, int /*order*/ = 0) noexcept {
    schedule_point();
    value_ = value;
  }
  T exchange(T value, int /*order*/ = 0) noexcept {
    schedule_point();
    T previous = value_;
    value_ = value;
    return previous;
  }
  bool compare_exchange_strong(T& expected, T desired, int /*success*/ = 0,
                               int /*failure*/ = 0) noexcept {
    schedule_point();
    if (value_ == expected) {
      value_ = desired;
      return true;
    }
    expected = value_;
    return false;
  }
  bool compare_exchange_weak(T& expected, T desired, int success = 0, int failure = 0) noexcept {
    return compare_exchange_strong(expected, desired, success, failure);
  }
  T fetch_add(T delta, int /*order*/ = 0) noexcept {
    schedule_point();
    T previous = value_;
    value_ = static_cast<T>(value_ + delta);
    return previous;
  }
  T fetch_sub(T delta, int /*order*/ = 0) noexcept {
    schedule_point();
    T previous = value_;
    value_ = static_cast<T>(value_ - delta);
    return previous;
  }
  T fetch_or(T bits, int /*order*/ = 0) noexcept {
    schedule_point();
    T previous = value_;
    value_ = static_cast<T>(value_ | bits);
    return previous;
  }
  T fetch_and(T bits, int /*order*/ = 0) noexcept {
    schedule_point();
    T previous = value_;
    value_ = static_cast<T>(value_ & bits);
    return previous;
  }

  // For the checker's own bookkeeping: read without a schedule point.
  T peek() const noexcept { return value_; }

 private:
  T value_;
};

}  // namespace canopy::model
