#include "summary_tree.hpp"

#include <bit>
#include <stdexcept>
#include <string>

namespace canopy::detail {

namespace {
constexpr std::uint64_t bit_of(std::size_t index) noexcept {
  return std::uint64_t{1} << (index % summary_tree::bits_per_word);
}
}  // namespace

summary_tree::summary_tree(std::size_t leaf_count, std::size_t signals_per_leaf)
    : leaf_count_(leaf_count),
      signals_per_leaf_(signals_per_leaf),
      root_word_count_((leaf_count + bits_per_word - 1) / bits_per_word) {
  if (leaf_count == 0) {
    throw std::invalid_argument("canopy::summary_tree: leaf_count must be at least 1");
  }
  if (signals_per_leaf == 0 || signals_per_leaf > bits_per_word) {
    throw std::invalid_argument("canopy::summary_tree: signals_per_leaf must be in 1..64, got " +
                                std::to_string(signals_per_leaf));
  }
  signal_words_ = std::make_unique<atomics::atomic<std::uint64_t>[]>(leaf_count * signals_per_leaf);
  leaf_words_ = std::make_unique<padded_word[]>(leaf_count);
  root_words_ = std::make_unique<padded_word[]>(root_word_count_);
}

summary_tree::set_outcome summary_tree::set_task_bit(std::size_t leaf, std::size_t signal,
                                                     unsigned bit) noexcept {
  set_outcome outcome;
  const std::uint64_t mask = bit_of(bit);
  // seq_cst RMW: the "newly set" rule. Pairs with the claimer's fetch_and in
  // claim_task_bit and with mark_signal_inactive's re-check load of this word.
  const std::uint64_t previous =
      signal_words_[leaf * signals_per_leaf_ + signal].fetch_or(mask, atomics::seq_cst);
  outcome.newly_set = (previous & mask) == 0;
  if (previous == 0) {
    outcome.signal_activated = true;
    outcome.upward = mark_signal_active(leaf, signal);
  }
  return outcome;
}

summary_tree::activation summary_tree::mark_signal_active(std::size_t leaf,
                                                          std::size_t signal) noexcept {
  // seq_cst RMW: pairs with mark_signal_inactive's leaf fetch_and (whoever is
  // later in this word's order sees the other's bit) and keeps invariant T.
  const std::uint64_t previous = leaf_words_[leaf].value.fetch_or(bit_of(signal), atomics::seq_cst);
  if (previous != 0) {
    return {};
  }
  activation result = activate_root(leaf);
  result.leaf_activated = true;
  return result;
}

summary_tree::activation summary_tree::activate_root(std::size_t leaf) noexcept {
  // seq_cst RMW: the producer half of the park handshake. A parking worker
  // adds itself as a sleeper (seq_cst RMW) and then reads the root words
  // (any_active, seq_cst loads); release() below reads the sleepers.
  const std::uint64_t mask = bit_of(leaf);
  const std::uint64_t previous =
      root_words_[leaf / bits_per_word].value.fetch_or(mask, atomics::seq_cst);
  activation result;
  if ((previous & mask) == 0) {
    result.wakes_owed = permits_.release(1);
  }
  return result;
}

summary_tree::activation summary_tree::mark_signal_inactive(std::size_t leaf,
                                                            std::size_t signal) noexcept {
  const std::uint64_t mask = bit_of(signal);
  // seq_cst RMW: pairs with mark_signal_active's fetch_or on the same word.
  const std::uint64_t previous = leaf_words_[leaf].value.fetch_and(~mask, atomics::seq_cst);
  activation result;
  if ((previous & mask) != 0 && (previous & ~mask) == 0) {
    result = deactivate_root(leaf);
  }
  // Re-check: a producer may have set a task bit after we saw the word empty
  // but before our fetch_and cleared the leaf bit it had (re)set. seq_cst load
  // pairs with set_task_bit's seq_cst fetch_or.
  if (signal_words_[leaf * signals_per_leaf_ + signal].load(atomics::seq_cst) != 0) {
    const activation again = mark_signal_active(leaf, signal);
    result.leaf_activated = result.leaf_activated || again.leaf_activated;
    result.wakes_owed += again.wakes_owed;
  }
  return result;
}

summary_tree::activation summary_tree::deactivate_root(std::size_t leaf) noexcept {
  const std::uint64_t mask = bit_of(leaf);
  // seq_cst RMW: pairs with activate_root's fetch_or.
  root_words_[leaf / bits_per_word].value.fetch_and(~mask, atomics::seq_cst);
  // Re-check the leaf: a producer whose leaf fetch_or saw our bit still set
  // skipped the root, so we set it again on its behalf. seq_cst load pairs
  // with mark_signal_active's seq_cst fetch_or.
  if (leaf_words_[leaf].value.load(atomics::seq_cst) != 0) {
    return activate_root(leaf);
  }
  return {};
}

int summary_tree::claim_task_bit(std::size_t leaf, std::size_t signal, unsigned start_bit,
                                 activation& upward) noexcept {
  atomics::atomic<std::uint64_t>& word = signal_words_[leaf * signals_per_leaf_ + signal];
  // acquire: pairs with set_task_bit's fetch_or; only a hint for which bit to try.
  std::uint64_t value = word.load(atomics::acquire);
  while (value != 0) {
    const std::uint64_t from_start = value & (~std::uint64_t{0} << (start_bit % bits_per_word));
    const auto bit = static_cast<unsigned>(std::countr_zero(from_start != 0 ? from_start : value));
    const std::uint64_t mask = std::uint64_t{1} << bit;
    // seq_cst RMW: the claim. Exactly one claimer sees the bit set in
    // `previous`; pairs with set_task_bit and with the re-check in
    // mark_signal_inactive.
    const std::uint64_t previous = word.fetch_and(~mask, atomics::seq_cst);
    if ((previous & mask) != 0) {
      if (previous == mask) {
        upward = mark_signal_inactive(leaf, signal);
      }
      return static_cast<int>(bit);
    }
    value = previous & ~mask;
  }
  // Empty. If our leaf bit is still set it may be stale (see the header);
  // clearing it is the same clear-then-recheck a claim does, so a producer
  // racing in is not lost. relaxed: a stale read only costs a spare clear
  // (which re-checks) or leaves the bit to the next search.
  if ((leaf_words_[leaf].value.load(atomics::relaxed) & bit_of(signal)) != 0) {
    upward = mark_signal_inactive(leaf, signal);
  }
  return -1;
}

int summary_tree::claim_in_leaf(std::size_t leaf, activation& upward) noexcept {
  // acquire: pairs with mark_signal_active's seq_cst leaf fetch_or, like
  // leaf_word(); the claim itself is decided by claim_task_bit's RMW.
  std::uint64_t signals = leaf_words_[leaf].value.load(atomics::acquire);
  if (signals == 0) {
    // The caller came here on a root bit; if the leaf is empty it is stale.
    // deactivate_root re-checks the leaf after clearing, like a claim does.
    if ((root_words_[leaf / bits_per_word].value.load(atomics::relaxed) & bit_of(leaf)) != 0) {
      upward.wakes_owed += deactivate_root(leaf).wakes_owed;
    }
    return -1;
  }
  while (signals != 0) {
    const auto signal = static_cast<std::size_t>(std::countr_zero(signals));
    activation step;
    const int bit = claim_task_bit(leaf, signal, 0, step);
    upward.wakes_owed += step.wakes_owed;
    upward.leaf_activated = upward.leaf_activated || step.leaf_activated;
    if (bit >= 0) {
      return static_cast<int>(signal * bits_per_word) + bit;
    }
    signals &= signals - 1;
  }
  return -1;
}

bool summary_tree::claim_given_bit(std::size_t leaf, std::size_t signal, unsigned bit,
                                   activation& upward) noexcept {
  const std::uint64_t mask = std::uint64_t{1} << bit;
  atomics::atomic<std::uint64_t>& word = signal_words_[leaf * signals_per_leaf_ + signal];
  // acquire: a cheap pre-check (pairs with set_task_bit's fetch_or).
  if ((word.load(atomics::acquire) & mask) == 0) {
    return false;
  }
  // seq_cst RMW: the claim, exactly as in claim_task_bit.
  const std::uint64_t previous = word.fetch_and(~mask, atomics::seq_cst);
  if ((previous & mask) == 0) {
    return false;
  }
  if (previous == mask) {
    upward = mark_signal_inactive(leaf, signal);
  }
  return true;
}

bool summary_tree::any_active() const noexcept {
  for (std::size_t index = 0; index < root_word_count_; ++index) {
    // seq_cst: after the parker's seq_cst RMWs; pairs with activate_root
    // (acquire is not enough: Relacy finds the lost wakeup).
    if (root_words_[index].value.load(atomics::seq_cst) != 0) {
      return true;
    }
  }
  return false;
}

}  // namespace canopy::detail
