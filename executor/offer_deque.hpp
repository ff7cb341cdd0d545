// offer_deque — a worker's deque of offers: callables offered by
// canopy::join (fork_join/join.hpp) and coroutine tasks spawned with a
// handle inside a task (canopy::spawn), after Chase and Lev (2005) in the
// C11 form of Lê, Pop, Cohen and Zappa Nardelli (2013), with seq_cst RMWs
// where they use fences.
//
// Who calls what:
//   * push(), pop() and newest(): the owning worker only. Joins nest on a
//     worker, so the newest callable is always the innermost join's offer;
//     a spawned task may lie above it (join_worker::take_back_job).
//   * steal(): any other thread (an idle worker), concurrently with the
//     owner and with other thieves. It takes the oldest entry.
// Each pushed offer is returned exactly once, by pop() or by one steal().
//
// Cost to the owner: push is two plain stores (no locked instruction); pop
// is one locked exchange, plus a CAS only when it races a thief for the last
// entry. Callables live on the joiner's stack and tasks in their slots; the
// deque holds a pointer or a slot index.
//
// Not part of the wake protocol: an offer in here is run by its owner
// whatever happens (a callable at its join, a task at the join or when the
// owner next looks for work), so a worker that sleeps while an offer waits
// here costs parallelism, never progress (as in rayon).
// docs/architecture.md, "Offered callables", says how thieves learn about
// offers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../atomics/atomics.hpp"
#include "task_slot.hpp"

namespace canopy::detail {

// What a thief runs: a callable offered by a join. The joiner fills it in
// before push(); execute() runs the callable and tells the joiner it ended.
struct offered_job {
  void (*execute)(offered_job& job) noexcept = nullptr;
  task_id joiner_task{};  // the joining task, named by current_waker() inside the callable
  bool joiner_has_task = false;
};

// One entry: a join's offered callable (its address: at least 2-aligned, so
// the low bit is 0) or a spawned task (its slot index, shifted, low bit 1).
class offer {
 public:
  offer() noexcept = default;
  [[nodiscard]] static offer of_job(const offered_job& job) noexcept {
    return offer(reinterpret_cast<std::uintptr_t>(&job));
  }
  [[nodiscard]] static offer of_task(std::uint32_t slot) noexcept {
    return offer((std::uintptr_t{slot} << 1) | 1);
  }
  [[nodiscard]] static offer from_bits(std::uintptr_t bits) noexcept { return offer(bits); }

  [[nodiscard]] bool empty() const noexcept { return bits_ == 0; }
  [[nodiscard]] bool is_task() const noexcept { return (bits_ & 1) != 0; }
  // The entry is the job's address, put there by of_job.
  [[nodiscard]] offered_job* job() const noexcept {
    return reinterpret_cast<offered_job*>(bits_);  // NOLINT(performance-no-int-to-ptr)
  }
  [[nodiscard]] std::uint32_t task_slot() const noexcept {
    return static_cast<std::uint32_t>(bits_ >> 1);
  }
  [[nodiscard]] std::uintptr_t bits() const noexcept { return bits_; }
  friend bool operator==(offer, offer) noexcept = default;

 private:
  explicit offer(std::uintptr_t bits) noexcept : bits_(bits) {}
  std::uintptr_t bits_ = 0;
};

// Capacity: a power of two. The executor's is offer_deque (below); the
// Relacy check uses a small one, so that its schedules wrap around.
template <std::int64_t Capacity>
class basic_offer_deque {
  static_assert(Capacity > 0 && (Capacity & (Capacity - 1)) == 0, "a power of two");

 public:
  static constexpr std::int64_t capacity = Capacity;

  // Owner: add `entry` (not empty) as the newest; false (nothing changes)
  // when full.
  [[nodiscard]] bool push(offer entry) noexcept {
    const std::int64_t bottom = bottom_.load(atomics::relaxed);  // only the owner writes bottom
    // acquire: pairs with a thief's CAS on top, so the entry it took is no
    // longer read by it once this push overwrites that index.
    const std::int64_t top = top_.load(atomics::acquire);
    if (bottom - top >= capacity) {
      return false;
    }
    entries_[static_cast<std::size_t>(bottom & mask)].store(entry.bits(), atomics::relaxed);
    // release: publishes the entry and what it names (the job's fields, the
    // task's body and state) to a thief's seq_cst
    // (acquiring) load of bottom in steal().
    bottom_.store(bottom + 1, atomics::release);
    return true;
  }

  // Owner: push(), and whether the deque looked empty before it (so that
  // only a push onto an empty deque needs a wake hint).
  enum class push_result : std::uint8_t { full, onto_empty, onto_others };
  [[nodiscard, gnu::always_inline]] push_result push_noting_empty(offer entry) noexcept {
    const std::int64_t bottom = bottom_.load(atomics::relaxed);  // only the owner writes bottom
    // acquire: as in push().
    const std::int64_t top = top_.load(atomics::acquire);
    if (bottom - top >= capacity) {
      return push_result::full;
    }
    entries_[static_cast<std::size_t>(bottom & mask)].store(entry.bits(), atomics::relaxed);
    // release: as in push().
    bottom_.store(bottom + 1, atomics::release);
    return bottom == top ? push_result::onto_empty : push_result::onto_others;
  }

  // Owner: take the newest entry back; empty if a thief took it (or the
  // deque is empty).
  [[nodiscard]] offer pop() noexcept { return pop_inline(); }

  // pop(), always inlined: the take-back of an awaited child
  // (join_worker::pop_offered_task), once a fork, where LTO leaves pop()
  // a call.
  [[nodiscard, gnu::always_inline]] offer pop_inline() noexcept {
    const std::int64_t bottom = bottom_.load(atomics::relaxed) - 1;
    // seq_cst exchange (the algorithm's store + fence): pairs with steal()'s
    // seq_cst load of top then load of bottom. Either the thief sees the
    // lowered bottom and leaves this entry, or this load of top sees the
    // thief's CAS.
    static_cast<void>(bottom_.exchange(bottom, atomics::seq_cst));
    std::int64_t top = top_.load(atomics::seq_cst);
    if (top > bottom) {
      bottom_.store(bottom + 1, atomics::relaxed);  // empty: nothing was there
      return {};
    }
    offer taken =
        offer::from_bits(entries_[static_cast<std::size_t>(bottom & mask)].load(atomics::relaxed));
    if (top == bottom) {
      // The last entry: a thief may be taking it. seq_cst: one total order
      // with the thieves' CASes on top decides who has it.
      if (!top_.compare_exchange_strong(top, top + 1, atomics::seq_cst, atomics::relaxed)) {
        taken = {};
      }
      bottom_.store(bottom + 1, atomics::relaxed);
    }
    return taken;
  }

  // Owner: the newest entry, without taking it (empty if none). A thief may
  // take it meanwhile; pop() then returns empty, never another entry.
  [[nodiscard]] offer newest() const noexcept {
    const std::int64_t bottom = bottom_.load(atomics::relaxed);  // only the owner writes bottom
    if (top_.load(atomics::relaxed) >= bottom) {
      return {};
    }
    return offer::from_bits(
        entries_[static_cast<std::size_t>((bottom - 1) & mask)].load(atomics::relaxed));
  }

  // Owner: how many entries lie above `target` (0: it is the newest), looking
  // down from the newest through task entries only, at most `max_above`
  // deep; -1 if it is not found that way. A thief may take it meanwhile
  // (pops then run the deque empty before reaching it).
  [[nodiscard]] int depth_of(offer target, int max_above) const noexcept {
    const std::int64_t bottom = bottom_.load(atomics::relaxed);  // only the owner writes bottom
    const std::int64_t top = top_.load(atomics::relaxed);
    for (int above = 0; above <= max_above && bottom - 1 - above >= top; ++above) {
      const offer entry = offer::from_bits(
          entries_[static_cast<std::size_t>((bottom - 1 - above) & mask)].load(atomics::relaxed));
      if (entry == target) {
        return above;
      }
      if (!entry.is_task()) {
        return -1;
      }
    }
    return -1;
  }

  // Thief: take the oldest entry; empty if there is none or another thread
  // took it first.
  [[nodiscard]] offer steal() noexcept {
    // seq_cst: the load of top before the load of bottom pairs with pop()'s
    // exchange on bottom before its load of top (see there).
    std::int64_t top = top_.load(atomics::seq_cst);
    // seq_cst (so acquire): pairs with push()'s release store of bottom, so
    // the entry and the job it points to are visible.
    const std::int64_t bottom = bottom_.load(atomics::seq_cst);
    if (top >= bottom) {
      return {};
    }
    const offer taken =
        offer::from_bits(entries_[static_cast<std::size_t>(top & mask)].load(atomics::relaxed));
    // seq_cst: against the owner's CAS for the last entry and other thieves;
    // a failure means someone else took entry `top`, and `taken` is dropped.
    if (!top_.compare_exchange_strong(top, top + 1, atomics::seq_cst, atomics::relaxed)) {
      return {};
    }
    return taken;
  }

  // A hint for thieves: whether the deque looked non-empty.
  [[nodiscard]] bool looks_empty() const noexcept {
    return top_.load(atomics::relaxed) >= bottom_.load(atomics::relaxed);
  }

 private:
  static constexpr std::int64_t mask = capacity - 1;

  alignas(atomics::cache_line) atomics::atomic<std::int64_t> top_{0};
  alignas(atomics::cache_line) atomics::atomic<std::int64_t> bottom_{0};
  atomics::atomic<std::uintptr_t> entries_[capacity] = {};
};

// A worker's deque: joins nested deeper than this offer the rest as tasks,
// and spawns past it go to the LIFO slot.
using offer_deque = basic_offer_deque<256>;

}  // namespace canopy::detail
