// ledger — exactly-once accounting for the soak's tasks.
//
// Every task the soak creates (a callable, a coroutine, a fiber, a
// when_all child) owns one move-only `ticket` bound to its own ledger entry.
// The ticket's destructor — which runs when the task's body or frame is
// destroyed, whether it ran, threw, was cancelled, dropped at shutdown or
// never spawned — counts the entry's destructions; the body marks `started`
// when it first runs. After a round's shutdown the soak checks every entry:
// destroyed exactly once, and either started, or never spawned, or reported
// cancelled (join) / counted in stats().dropped_tasks (detached).
//
// Thread-safety: tickets are used from any thread; entries are atomics.
// One ledger per round; entries are never reused within it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace canopy::soak {

// What a joiner saw at join().
//   refused: join rethrew spawn_error(shut_down): the task (a when_all or a
//   fiber with children) could not spawn a child because shutdown had begun.
enum class join_seen : std::uint8_t { not_joined, value, error, cancelled, refused };

struct ledger_entry {
  std::atomic<std::uint8_t> destroyed{0};
  std::atomic<bool> started{false};
  std::atomic<bool> threw{false};             // the body threw (after starting)
  std::atomic<bool> detached{false};          // nobody joins it
  std::atomic<bool> spawn_failed{false};      // its spawn returned an error
  std::atomic<bool> cancel_requested{false};  // join_handle::cancel() was called
  std::atomic<bool> child{false};             // a when_all or fiber child (its parent spawns it)
  std::atomic<join_seen> seen{join_seen::not_joined};
};

class ledger {
 public:
  explicit ledger(std::size_t capacity)
      : entries_(std::make_unique<ledger_entry[]>(capacity)), capacity_(capacity) {}

  // A fresh entry, or nullptr when this round's ledger is full (the caller
  // then creates no more tasks).
  ledger_entry* claim() noexcept {
    const std::size_t index = used_.fetch_add(1, std::memory_order_relaxed);
    return index < capacity_ ? &entries_[index] : nullptr;
  }
  [[nodiscard]] std::size_t used() const noexcept {
    const std::size_t used = used_.load(std::memory_order_relaxed);
    return used < capacity_ ? used : capacity_;
  }
  ledger_entry& operator[](std::size_t index) noexcept { return entries_[index]; }

 private:
  std::unique_ptr<ledger_entry[]> entries_;
  std::size_t capacity_;
  std::atomic<std::size_t> used_{0};
};

// Move-only: exactly one live ticket per entry; a moved-from ticket counts nothing.
class ticket {
 public:
  explicit ticket(ledger_entry* entry) noexcept : entry_(entry) {}
  ticket(ticket&& other) noexcept : entry_(std::exchange(other.entry_, nullptr)) {}
  ticket& operator=(ticket&&) = delete;
  ticket(const ticket&) = delete;
  ticket& operator=(const ticket&) = delete;
  ~ticket() {
    if (entry_ != nullptr) {
      entry_->destroyed.fetch_add(1, std::memory_order_acq_rel);
    }
  }
  [[nodiscard]] ledger_entry& entry() const noexcept { return *entry_; }

 private:
  ledger_entry* entry_;
};

}  // namespace canopy::soak
