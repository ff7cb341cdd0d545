// model_atomic — the atomics a model-checking build substitutes (see
// atomics.hpp). Each operation first calls schedule_point(), where the model
// checker (tests/model/) may switch to another logical thread, then runs
// without interruption. The checker explores interleavings of the *real*
// protocol code under sequential consistency; weaker orderings are checked
// by ThreadSanitizer and by the ordering notes in the code, not here.
//
// Each schedule point names the word it is about to touch and whether it
// writes it, and peek() notes a read: the checker's partial-order reduction
// (sleep sets) needs every shared access of a step to decide which steps of
// different threads commute (different words, or both reads).
#pragma once

#include <cstdint>
#include <type_traits>

namespace canopy::detail::model {

enum class access_kind : std::uint8_t { read, write };

// Provided by the model checker.
// A schedule point before an operation that touches no shared word (a
// fence, which orders nothing under sequential consistency, or a yield).
void schedule_point() noexcept;
// A schedule point before an operation on `address`.
void schedule_point(const void* address, access_kind kind) noexcept;
// Record a shared access made without a schedule point (a peek, or a plain
// variable of a test harness that several logical threads use): it belongs
// to the step in progress. No effect outside an exploration.
void note_access(const void* address, access_kind kind) noexcept;
// Called by every atomic's constructor: the checker names each word by the
// order in which it was built while a scenario was made, because every
// execution builds its objects afresh, at addresses that differ from one
// execution to the next. Returns the name (unnamed_word outside make()).
inline constexpr std::uint32_t unnamed_word = UINT32_MAX;
std::uint32_t name_word(const void* address) noexcept;
// The same as the address forms, for a word whose name is known.
void schedule_point_on(std::uint32_t word, access_kind kind) noexcept;
void note_word_access(std::uint32_t word, access_kind kind) noexcept;
// Block the current logical thread while *word == expected (futex wait).
void park_on(const void* word, std::uint32_t expected, std::uint32_t current) noexcept;
// Make every logical thread parked on `word` runnable (futex wake).
void unpark_on(const void* word) noexcept;

template <class T>
class atomic {
 public:
  atomic() noexcept : value_{}, word_(name_word(this)) {}
  constexpr atomic(T value) noexcept  // NOLINT(google-explicit-constructor)
      : value_(value), word_(std::is_constant_evaluated() ? unnamed_word : name_word(this)) {}
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;

  T load(int /*order*/ = 0) const noexcept {
    schedule_point_on(word_, access_kind::read);
    return value_;
  }
  void store(T value, int /*order*/ = 0) noexcept {
    schedule_point_on(word_, access_kind::write);
    value_ = value;
  }
  T exchange(T value, int /*order*/ = 0) noexcept {
    schedule_point_on(word_, access_kind::write);
    T previous = value_;
    value_ = value;
    return previous;
  }
  bool compare_exchange_strong(T& expected, T desired, int /*success*/ = 0,
                               int /*failure*/ = 0) noexcept {
    // Counted as a write even when it fails: the step's footprint is known
    // only as a whole, and a conservative footprint only costs reduction.
    schedule_point_on(word_, access_kind::write);
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
    schedule_point_on(word_, access_kind::write);
    T previous = value_;
    value_ = static_cast<T>(value_ + delta);
    return previous;
  }
  T fetch_sub(T delta, int /*order*/ = 0) noexcept {
    schedule_point_on(word_, access_kind::write);
    T previous = value_;
    value_ = static_cast<T>(value_ - delta);
    return previous;
  }
  T fetch_or(T bits, int /*order*/ = 0) noexcept {
    schedule_point_on(word_, access_kind::write);
    T previous = value_;
    value_ = static_cast<T>(value_ | bits);
    return previous;
  }
  T fetch_and(T bits, int /*order*/ = 0) noexcept {
    schedule_point_on(word_, access_kind::write);
    T previous = value_;
    value_ = static_cast<T>(value_ & bits);
    return previous;
  }

  // Read without a schedule point (the checker's verdicts; a futex wait's
  // compare). Noted as a read of the step in progress.
  T peek() const noexcept {
    note_word_access(word_, access_kind::read);
    return value_;
  }

 private:
  T value_;
  std::uint32_t word_;  // the checker's name for this word (name_word)
};

}  // namespace canopy::detail::model
