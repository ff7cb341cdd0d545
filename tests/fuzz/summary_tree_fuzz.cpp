// summary_tree_fuzz — random set / claim / repair sequences on a real
// summary_tree, checked against a plain reference model of the task bits.
//
// The reference holds only the task bits (one std::vector<uint64_t> word per
// signal word); the summary words above them may legitimately be stale (set
// over an empty word, see summary_tree.hpp), so they are checked against
// properties instead of exact values:
//   * every claim returns a bit the reference has set (none twice, none
//     invented), and a claim reports "empty" only when the reference word or
//     leaf is empty;
//   * invariant T: a set task bit has its leaf bit set, a non-empty leaf
//     word has its root bit set (single-threaded, "about to set" never holds
//     between calls);
//   * a search (claim_in_leaf) that comes up empty leaves that leaf's word
//     and root bit clear;
//   * permits never exceed sleepers, and a call that turns a root bit on
//     while sleepers outnumber permits owes at least one wake;
//   * any_active() is "some root bit set".
// Any violation aborts with a message (libFuzzer reports it as a crash).
#include <fuzzer/FuzzedDataProvider.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "summary_tree/summary_tree.hpp"

namespace {

[[noreturn]] void fail(const char* what, std::size_t leaf, std::size_t signal, long detail) {
  std::fprintf(stderr, "summary_tree_fuzz: %s (leaf %zu, signal %zu, detail %ld)\n", what, leaf,
               signal, detail);
  std::abort();
}

class reference_tree {
 public:
  reference_tree(std::size_t leaves, std::size_t signals)
      : signals_(signals), words_(leaves * signals, 0) {}
  std::uint64_t& word(std::size_t leaf, std::size_t signal) {
    return words_[leaf * signals_ + signal];
  }
  [[nodiscard]] bool leaf_empty(std::size_t leaf) const {
    for (std::size_t signal = 0; signal < signals_; ++signal) {
      if (words_[leaf * signals_ + signal] != 0) {
        return false;
      }
    }
    return true;
  }
  [[nodiscard]] std::size_t total() const {
    std::size_t bits = 0;
    for (const std::uint64_t value : words_) {
      bits += static_cast<std::size_t>(std::popcount(value));
    }
    return bits;
  }

 private:
  std::size_t signals_;
  std::vector<std::uint64_t> words_;
};

struct harness {
  canopy::detail::summary_tree tree;
  reference_tree model;
  std::uint32_t sleepers = 0;  // sleepers the fuzzer registered (reference)

  harness(std::size_t leaves, std::size_t signals)
      : tree(leaves, signals), model(leaves, signals) {}

  [[nodiscard]] bool root_bit(std::size_t leaf) const {
    return (tree.root_word(leaf / 64) >> (leaf % 64) & 1U) != 0;
  }

  std::vector<std::uint64_t> roots() const {
    std::vector<std::uint64_t> words(tree.root_word_count());
    for (std::size_t index = 0; index < words.size(); ++index) {
      words[index] = tree.root_word(index);
    }
    return words;
  }

  // Checks the wakes a mutating call reported against the permit state.
  void check_wakes(const std::vector<std::uint64_t>& roots_before,
                   canopy::detail::permit_semaphore::snapshot before, std::uint32_t wakes_owed) {
    const auto after = tree.permits().load();
    if (after.permits > after.sleepers) {
      fail("permits exceed sleepers", 0, 0, after.permits);
    }
    if (after.sleepers != sleepers) {
      fail("sleeper count changed by a tree call", 0, 0, after.sleepers);
    }
    if (wakes_owed > before.sleepers - before.permits) {
      fail("more wakes owed than sleepers without a permit", 0, 0, wakes_owed);
    }
    if (after.permits != before.permits + wakes_owed) {
      fail("wakes owed differ from permits granted", 0, 0, wakes_owed);
    }
    bool root_turned_on = false;
    const auto now = roots();
    for (std::size_t index = 0; index < now.size(); ++index) {
      root_turned_on = root_turned_on || (now[index] & ~roots_before[index]) != 0;
    }
    if (root_turned_on && before.sleepers > before.permits && wakes_owed == 0) {
      fail("a root bit turned on with idle sleepers but no wake owed", 0, 0, 0);
    }
  }

  void check_invariants() {
    bool any_root = false;
    for (std::size_t leaf = 0; leaf < tree.leaf_count(); ++leaf) {
      const std::uint64_t leaf_word = tree.leaf_word(leaf);
      for (std::size_t signal = 0; signal < tree.signals_per_leaf(); ++signal) {
        const std::uint64_t actual = tree.signal_word(leaf, signal);
        if (actual != model.word(leaf, signal)) {
          fail("signal word differs from the reference", leaf, signal,
               static_cast<long>(actual ^ model.word(leaf, signal)));
        }
        if (actual != 0 && (leaf_word >> signal & 1U) == 0) {
          fail("invariant T: task bit set under a clear leaf bit", leaf, signal, 0);
        }
      }
      if (tree.signals_per_leaf() < 64 && leaf_word >> tree.signals_per_leaf() != 0) {
        fail("leaf bit set beyond signals_per_leaf", leaf, 0, static_cast<long>(leaf_word));
      }
      if (leaf_word != 0 && !root_bit(leaf)) {
        fail("invariant T: leaf word set under a clear root bit", leaf, 0, 0);
      }
      any_root = any_root || root_bit(leaf);
    }
    if (tree.any_active() != any_root) {
      fail("any_active() disagrees with the root words", 0, 0, any_root);
    }
  }
};

constexpr std::size_t leaf_choices[] = {1, 2, 3, 5, 64, 65, 130};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  const std::size_t leaves =
      leaf_choices[input.ConsumeIntegralInRange<std::size_t>(0, std::size(leaf_choices) - 1)];
  const std::size_t signals = input.ConsumeIntegralInRange<std::size_t>(1, 64);
  harness h(leaves, signals);
  // Concentrate operations on a few leaves so that words fill and empty.
  const std::size_t hot_leaves = std::min<std::size_t>(leaves, 3);

  int steps = 0;
  while (input.remaining_bytes() > 0 && steps++ < 4096) {
    const auto op = input.ConsumeIntegralInRange<unsigned>(0, 9);
    const std::size_t leaf = input.ConsumeBool()
                                 ? input.ConsumeIntegralInRange<std::size_t>(0, hot_leaves - 1)
                                 : input.ConsumeIntegralInRange<std::size_t>(0, leaves - 1);
    const std::size_t signal = input.ConsumeIntegralInRange<std::size_t>(
        0, std::min<std::size_t>(signals - 1, input.ConsumeBool() ? 1 : 63));
    const unsigned bit = input.ConsumeIntegralInRange<unsigned>(0, 63);
    const auto roots_before = h.roots();
    const auto permits_before = h.tree.permits().load();
    std::uint32_t wakes = 0;
    std::uint64_t& reference = h.model.word(leaf, signal);
    const std::uint64_t mask = std::uint64_t{1} << bit;

    switch (op) {
      case 0:
      case 1: {  // set
        const auto outcome = h.tree.set_task_bit(leaf, signal, bit);
        if (outcome.newly_set != ((reference & mask) == 0)) {
          fail("set_task_bit: newly_set differs from the reference", leaf, signal, bit);
        }
        if (outcome.signal_activated != (reference == 0)) {
          fail("set_task_bit: signal_activated differs", leaf, signal, bit);
        }
        reference |= mask;
        wakes = outcome.upward.wakes_owed;
        break;
      }
      case 2: {  // claim from a word, preferring bits at or after `bit`
        canopy::detail::summary_tree::activation upward;
        const int claimed = h.tree.claim_task_bit(leaf, signal, bit, upward);
        if (claimed < 0) {
          if (reference != 0) {
            fail("claim_task_bit: empty, but the reference has bits", leaf, signal, 0);
          }
        } else {
          const std::uint64_t got = std::uint64_t{1} << claimed;
          if ((reference & got) == 0) {
            fail("claim_task_bit: claimed a bit that was not set", leaf, signal, claimed);
          }
          if ((reference & (~std::uint64_t{0} << bit)) != 0 &&
              static_cast<unsigned>(claimed) < bit) {
            fail("claim_task_bit: ignored the preferred start", leaf, signal, claimed);
          }
          reference &= ~got;
        }
        wakes = upward.wakes_owed;
        break;
      }
      case 3: {  // claim anywhere in a leaf
        canopy::detail::summary_tree::activation upward;
        const int claimed = h.tree.claim_in_leaf(leaf, upward);
        if (claimed < 0) {
          if (!h.model.leaf_empty(leaf)) {
            fail("claim_in_leaf: empty, but the reference leaf has bits", leaf, 0, 0);
          }
          if (h.tree.leaf_word(leaf) != 0 || h.root_bit(leaf)) {
            // Only summary bits the search walked are cleared; a leaf bit of
            // a signal word is stale here and claim_task_bit clears it.
            fail("claim_in_leaf: an empty search left summary bits set", leaf, 0,
                 static_cast<long>(h.tree.leaf_word(leaf)));
          }
        } else {
          const std::size_t got_signal = static_cast<std::size_t>(claimed) / 64;
          const std::uint64_t got = std::uint64_t{1} << (claimed % 64);
          if (got_signal >= signals || (h.model.word(leaf, got_signal) & got) == 0) {
            fail("claim_in_leaf: claimed a bit that was not set", leaf, got_signal, claimed);
          }
          h.model.word(leaf, got_signal) &= ~got;
        }
        wakes = upward.wakes_owed;
        break;
      }
      case 4: {  // claim one given task
        canopy::detail::summary_tree::activation upward;
        const bool claimed = h.tree.claim_given_bit(leaf, signal, bit, upward);
        if (claimed != ((reference & mask) != 0)) {
          fail("claim_given_bit differs from the reference", leaf, signal, bit);
        }
        reference &= ~mask;
        wakes = upward.wakes_owed;
        break;
      }
      case 5:  // repair: mark a word active (possibly over an empty word: stale)
        wakes = h.tree.mark_signal_active(leaf, signal).wakes_owed;
        break;
      case 6:  // repair: mark a word inactive (re-check sets it again if needed)
        wakes = h.tree.mark_signal_inactive(leaf, signal).wakes_owed;
        break;
      case 7:  // a worker registers as a sleeper
        if (h.sleepers < 8) {
          h.tree.permits().add_sleeper();
          ++h.sleepers;
        }
        break;
      case 8:  // a sleeper leaves (woken by a permit or on its own)
        if (h.sleepers > 0) {
          const auto before = h.tree.permits().load();
          const bool consumed = input.ConsumeBool()
                                    ? h.tree.permits().remove_sleeper_woken_by_permit()
                                    : h.tree.permits().remove_sleeper();
          --h.sleepers;
          const auto after = h.tree.permits().load();
          if (after.permits != before.permits - (consumed ? 1 : 0)) {
            fail("remove_sleeper: permit count off", 0, 0, consumed);
          }
        }
        break;
      case 9: {  // a worker takes a permit instead of parking
        const auto before = h.tree.permits().load();
        const bool took = h.tree.permits().try_acquire();
        if (took != (before.permits > 0)) {
          fail("try_acquire differs from the permit count", 0, 0, before.permits);
        }
        break;
      }
      default:
        break;
    }
    if (op <= 6) {
      h.check_wakes(roots_before, permits_before, wakes);
    }
    h.check_invariants();
  }
  // Drain: every remaining task bit is claimable exactly once, and the tree
  // ends empty.
  const std::size_t remaining = h.model.total();
  std::size_t drained = 0;
  for (std::size_t leaf = 0; leaf < leaves; ++leaf) {
    canopy::detail::summary_tree::activation upward;
    while (h.tree.claim_in_leaf(leaf, upward) >= 0) {
      ++drained;
    }
  }
  if (drained != remaining) {
    fail("drain: claimed count differs from the reference", 0, 0,
         static_cast<long>(drained) - static_cast<long>(remaining));
  }
  if (h.tree.any_active()) {
    fail("drain: root bits left after every leaf came up empty", 0, 0, 0);
  }
  return 0;
}
