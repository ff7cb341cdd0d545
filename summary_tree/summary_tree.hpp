// summary_tree — runnable tasks as bits, rolled up through two summary levels.
//
// compile: skip a diagram, not code
//   task signal words  one bit per task slot, 64 tasks a word
//   leaf words         one bit per signal word of that leaf (signals_per_leaf <= 64)
//   root words         one bit per leaf, 64 leaves a word
//
// Invariant T (the tree's one invariant, kept by every transition below):
//   a set bit at any level implies that the bit above it is set, or that the
//   thread which made the lower word non-empty is about to set it (it has not
//   yet returned from set_task_bit / mark_signal_active / mark_signal_inactive).
// Hence a worker that finds every root word zero with seq_cst loads, after
// its own seq_cst RMWs that pair with the producer's seq_cst root RMW, can
// conclude that every task bit set before the producer's root RMW has been
// claimed.
//
// The converse does not hold: a summary bit may be set over an empty word
// (stale). The re-checks that keep T can re-set a bit for a task that another
// claimer then takes and clears before the re-set lands. claim_in_leaf()
// clears such bits when it finds them, so a search that comes up empty also
// leaves the tree empty; callers that search with claim_task_bit alone must
// not treat "some root bit set" as "some task claimable".
//
// A root bit going 0 -> 1 releases one permit (permit_semaphore::release);
// that is the only place permits are created. The tree owns no threads and
// never wakes anybody: every mutating call returns how many parked workers
// the caller owes a wake (`wakes_owed`).
//
// Thread-safety: every member may be called from any thread concurrently.
// Indices are not range-checked on the hot path; callers pass indices below
// leaf_count() / signals_per_leaf() / 64 (the executor's arena guarantees it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "../atomics/atomics.hpp"
#include "permit_semaphore.hpp"

namespace canopy::detail {

class summary_tree {
 public:
  static constexpr std::size_t bits_per_word = 64;

  // What a producer-side call did to the tree.
  struct activation {
    bool leaf_activated = false;   // the leaf word went from empty to non-empty
    std::uint32_t wakes_owed = 0;  // permits granted: parked workers to wake now
  };

  // Result of set_task_bit.
  struct set_outcome {
    bool newly_set = false;         // this call changed the task bit 0 -> 1
    bool signal_activated = false;  // the signal word went from empty to non-empty
    activation upward;              // what propagating above the signal word did
  };

  // leaf_count >= 1, 1 <= signals_per_leaf <= 64; otherwise std::invalid_argument.
  summary_tree(std::size_t leaf_count, std::size_t signals_per_leaf);

  summary_tree(const summary_tree&) = delete;
  summary_tree& operator=(const summary_tree&) = delete;

  [[nodiscard]] std::size_t leaf_count() const noexcept { return leaf_count_; }
  [[nodiscard]] std::size_t signals_per_leaf() const noexcept { return signals_per_leaf_; }
  [[nodiscard]] std::size_t root_word_count() const noexcept { return root_word_count_; }
  [[nodiscard]] std::size_t tasks_per_leaf() const noexcept {
    return signals_per_leaf_ * bits_per_word;
  }

  // Producer: set one task bit and propagate upward if the word became non-empty.
  [[nodiscard]] set_outcome set_task_bit(std::size_t leaf, std::size_t signal,
                                         unsigned bit) noexcept;

  // Consumer: claim (clear) one set bit of a signal word, preferring bits at or
  // after `start_bit`. Returns the bit index, or -1 if the word was empty. If
  // the claim emptied the word, the summary bits above are cleared with the
  // re-check; a re-activation found by the re-check is reported in `upward`.
  // An empty word whose leaf bit is still set (stale) has that bit cleared.
  [[nodiscard]] int claim_task_bit(std::size_t leaf, std::size_t signal, unsigned start_bit,
                                   activation& upward) noexcept;

  // Consumer: claim one set task bit anywhere in `leaf`, trying its active
  // signal words in order. Returns the task's index within the leaf
  // (signal * 64 + bit), or -1 if the leaf had none; stale summary bits met
  // on the way (leaf bits over empty signal words, the root bit over an
  // empty leaf) are cleared. Wakes owed by any re-activation add to `upward`.
  [[nodiscard]] int claim_in_leaf(std::size_t leaf, activation& upward) noexcept;

  // Consumer: claim one given bit (a specific task). True if this call
  // cleared it; clears the summary bits above like claim_task_bit.
  [[nodiscard]] bool claim_given_bit(std::size_t leaf, std::size_t signal, unsigned bit,
                                     activation& upward) noexcept;

  // Mark signal word `signal` of `leaf` as non-empty in the leaf word and,
  // if the leaf became non-empty, in the root word (releasing a permit on 0 -> 1).
  [[nodiscard]] activation mark_signal_active(std::size_t leaf, std::size_t signal) noexcept;

  // Clear the leaf bit of a signal word that was observed empty, then re-check
  // the signal word; if a schedule raced in, the bit is set again.
  [[nodiscard]] activation mark_signal_inactive(std::size_t leaf, std::size_t signal) noexcept;

  [[nodiscard]] std::uint64_t signal_word(std::size_t leaf, std::size_t signal) const noexcept {
    return signal_words_[leaf * signals_per_leaf_ + signal].load(atomics::acquire);
  }
  [[nodiscard]] std::uint64_t leaf_word(std::size_t leaf) const noexcept {
    return leaf_words_[leaf].value.load(atomics::acquire);
  }
  [[nodiscard]] std::uint64_t root_word(std::size_t index) const noexcept {
    return root_words_[index].value.load(atomics::acquire);
  }

  // The final check of a worker about to park: true if any root bit is set.
  // seq_cst loads, which pair with the producers' seq_cst root RMWs.
  [[nodiscard]] bool any_active() const noexcept;

  permit_semaphore& permits() noexcept { return permits_; }
  const permit_semaphore& permits() const noexcept { return permits_; }

 private:
  struct alignas(atomics::cache_line) padded_word {
    atomics::atomic<std::uint64_t> value{0};
  };

  activation activate_root(std::size_t leaf) noexcept;
  activation deactivate_root(std::size_t leaf) noexcept;

  std::size_t leaf_count_;
  std::size_t signals_per_leaf_;
  std::size_t root_word_count_;
  std::unique_ptr<atomics::atomic<std::uint64_t>[]> signal_words_;
  // Leaf and root words sit on their own cache lines: they are the contended
  // words of the tree. Signal words are packed (one line holds 8).
  std::unique_ptr<padded_word[]> leaf_words_;
  std::unique_ptr<padded_word[]> root_words_;
  permit_semaphore permits_;
};

}  // namespace canopy::detail
