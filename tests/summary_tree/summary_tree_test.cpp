// summary_tree, permit_semaphore and partition_owner, each on its own.
#include "summary_tree/summary_tree.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "summary_tree/partition.hpp"
#include "summary_tree/permit_semaphore.hpp"
#include "tests/watchdog.hpp"

using canopy::detail::permit_semaphore;
using canopy::detail::summary_tree;

namespace {
bool tree_is_empty(const summary_tree& tree) {
  for (std::size_t leaf = 0; leaf < tree.leaf_count(); ++leaf) {
    if (tree.leaf_word(leaf) != 0) {
      return false;
    }
    for (std::size_t signal = 0; signal < tree.signals_per_leaf(); ++signal) {
      if (tree.signal_word(leaf, signal) != 0) {
        return false;
      }
    }
  }
  return !tree.any_active();
}
}  // namespace

TEST_CASE("summary_tree rejects impossible geometry") {
  CHECK_THROWS_AS(summary_tree(0, 4), std::invalid_argument);
  CHECK_THROWS_AS(summary_tree(4, 0), std::invalid_argument);
  CHECK_THROWS_AS(summary_tree(4, 65), std::invalid_argument);
  CHECK_NOTHROW(summary_tree(1, 64));
}

TEST_CASE("setting a bit propagates to leaf and root exactly when a word becomes non-empty") {
  for (std::size_t leaves : {1U, 7U, 64U, 65U, 200U}) {
    for (std::size_t signals : {1U, 3U, 64U}) {
      summary_tree tree(leaves, signals);
      const std::size_t leaf = leaves - 1;
      const std::size_t signal = signals - 1;
      const auto first = tree.set_task_bit(leaf, signal, 5);
      CHECK(first.newly_set);
      CHECK(first.signal_activated);
      CHECK(first.upward.leaf_activated);
      CHECK(first.upward.wakes_owed == 0);  // nobody sleeps: no permit
      CHECK(tree.leaf_word(leaf) == (std::uint64_t{1} << signal));
      CHECK(tree.root_word(leaf / 64) == (std::uint64_t{1} << (leaf % 64)));
      CHECK(tree.any_active());

      const auto again = tree.set_task_bit(leaf, signal, 5);
      CHECK_FALSE(again.newly_set);
      CHECK_FALSE(again.signal_activated);

      const auto second = tree.set_task_bit(leaf, signal, 9);
      CHECK(second.newly_set);
      CHECK_FALSE(second.signal_activated);  // word already non-empty: no propagation

      summary_tree::activation upward;
      CHECK(tree.claim_task_bit(leaf, signal, 0, upward) == 5);
      CHECK(tree.any_active());
      CHECK(tree.claim_task_bit(leaf, signal, 0, upward) == 9);
      CHECK(tree.claim_task_bit(leaf, signal, 0, upward) == -1);
      CHECK(tree_is_empty(tree));
    }
  }
}

TEST_CASE("claim prefers bits at or after the start bit and wraps") {
  summary_tree tree(1, 1);
  static_cast<void>(tree.set_task_bit(0, 0, 3));
  static_cast<void>(tree.set_task_bit(0, 0, 40));
  summary_tree::activation upward;
  CHECK(tree.claim_task_bit(0, 0, 10, upward) == 40);
  CHECK(tree.claim_task_bit(0, 0, 10, upward) == 3);
}

TEST_CASE("clearing re-checks: a schedule that raced the clear keeps its summary bits") {
  summary_tree tree(2, 4);
  // The signal word is non-empty, but a claimer that (wrongly, or just too
  // late) saw it empty clears the leaf bit: the re-check must set it again.
  static_cast<void>(tree.set_task_bit(1, 2, 7));
  const auto outcome = tree.mark_signal_inactive(1, 2);
  CHECK(outcome.leaf_activated);
  CHECK(tree.leaf_word(1) == (std::uint64_t{1} << 2));
  CHECK((tree.root_word(0) & 2U) != 0);
  // A truly empty word is cleared for good, up to the root.
  summary_tree::activation upward;
  CHECK(tree.claim_task_bit(1, 2, 0, upward) == 7);
  CHECK(tree.leaf_word(1) == 0);
  CHECK(tree.root_word(0) == 0);
}

TEST_CASE("a search clears summary bits left set over empty words") {
  summary_tree tree(3, 4);
  // What a late re-check re-activation leaves behind: leaf and root bits set
  // for a signal word whose task another claimer already took.
  static_cast<void>(tree.mark_signal_active(2, 3));
  REQUIRE(tree.signal_word(2, 3) == 0);
  REQUIRE(tree.any_active());
  summary_tree::activation upward;
  CHECK(tree.claim_in_leaf(2, upward) == -1);
  CHECK(tree_is_empty(tree));
  // claim_task_bit alone clears the stale leaf bit of the word it tried.
  static_cast<void>(tree.mark_signal_active(1, 0));
  CHECK(tree.claim_task_bit(1, 0, 0, upward) == -1);
  CHECK(tree_is_empty(tree));
  // A real task next to a stale bit is found, and the stale bit goes.
  static_cast<void>(tree.mark_signal_active(0, 0));
  static_cast<void>(tree.set_task_bit(0, 2, 17));
  CHECK(tree.claim_in_leaf(0, upward) == 2 * 64 + 17);
  CHECK(tree.claim_in_leaf(0, upward) == -1);
  CHECK(tree_is_empty(tree));
}

TEST_CASE("race: two claimers and a producer on one word never leave a stale bit behind") {
  // The interleaving that leaves a stale bit: claimer A empties the word,
  // its re-check sees the producer's second task and re-sets the leaf bit,
  // but claimer B has claimed that task (and cleared the bit) in between.
  // After each round one search over the quiet tree must leave it empty.
  canopy::testing::watchdog guard("stale summary bits", 120);
  summary_tree tree(1, 1);
  // Up to 200,000 rounds, but at most 30 s of them: three threads stepping
  // a barrier on 2 cores crawl when something else loads the machine, and
  // the watchdog is for hangs, not for slowness.
  const long max_rounds = 200000 / canopy::testing::stress_divisor();
  const auto time_budget = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::barrier phase(3);  // the two claimers and this thread, the producer
  std::atomic<long> claimed{0};
  std::atomic<bool> finished{false};
  auto claimer = [&] {
    for (;;) {
      phase.arrive_and_wait();                         // the first task is set, or the run is over
      if (finished.load(std::memory_order_relaxed)) {  // the barrier orders it
        return;
      }
      for (int attempt = 0; attempt < 2; ++attempt) {
        summary_tree::activation upward;
        if (tree.claim_task_bit(0, 0, 0, upward) >= 0) {
          claimed.fetch_add(1, std::memory_order_relaxed);
        }
      }
      phase.arrive_and_wait();  // claims done
      phase.arrive_and_wait();  // the producer has checked the quiet tree
    }
  };
  std::thread first(claimer);
  std::thread second(claimer);
  long stale_after_search = 0;
  long rounds = 0;
  for (; rounds < max_rounds && std::chrono::steady_clock::now() < time_budget; ++rounds) {
    static_cast<void>(tree.set_task_bit(0, 0, 0));
    phase.arrive_and_wait();
    static_cast<void>(tree.set_task_bit(0, 0, 1));  // races the claims
    phase.arrive_and_wait();
    summary_tree::activation upward;
    while (tree.claim_in_leaf(0, upward) >= 0) {
      claimed.fetch_add(1, std::memory_order_relaxed);
    }
    if (!tree_is_empty(tree)) {
      ++stale_after_search;
      static_cast<void>(tree.mark_signal_inactive(0, 0));  // start the next round clean
    }
    phase.arrive_and_wait();
  }
  finished.store(true, std::memory_order_relaxed);
  phase.arrive_and_wait();  // releases the claimers, which see `finished`
  first.join();
  second.join();
  MESSAGE("stale summary bits: " << rounds << " rounds");
  CHECK(rounds >= 1000 / canopy::testing::stress_divisor());
  CHECK(stale_after_search == 0);
  CHECK(claimed.load() == 2 * rounds);
}

TEST_CASE("a root bit going 0 -> 1 releases one permit, only for sleepers") {
  summary_tree tree(128, 2);
  tree.permits().add_sleeper();
  tree.permits().add_sleeper();
  const auto a = tree.set_task_bit(0, 0, 0);
  CHECK(a.upward.wakes_owed == 1);
  const auto same_leaf = tree.set_task_bit(0, 1, 0);  // leaf already active
  CHECK(same_leaf.upward.wakes_owed == 0);
  const auto b = tree.set_task_bit(70, 0, 0);  // other root word
  CHECK(b.upward.wakes_owed == 1);
  const auto c = tree.set_task_bit(5, 0, 0);  // both sleepers already have a permit
  CHECK(c.upward.wakes_owed == 0);
  CHECK(tree.permits().load().permits == 2);
  CHECK(tree.permits().load().sleepers == 2);
}

TEST_CASE("permit_semaphore: permits never exceed sleepers and do not pile up") {
  permit_semaphore permits;
  for (int index = 0; index < 1000; ++index) {
    CHECK(permits.release(1) == 0);  // all workers busy: no permit is created
  }
  CHECK(permits.load().permits == 0);
  CHECK_FALSE(permits.try_acquire());

  permits.add_sleeper();
  permits.add_sleeper();
  permits.add_sleeper();
  CHECK(permits.release(5) == 3);  // min(n, sleepers)
  CHECK(permits.release(1) == 0);
  CHECK(permits.try_acquire());
  CHECK(permits.load().permits == 2);
  // Removing a sleeper whose permit would be left over consumes it.
  CHECK_FALSE(permits.remove_sleeper());  // 2 permits, 2 sleepers left: fine
  CHECK(permits.remove_sleeper());        // 2 permits, 1 sleeper: one consumed
  CHECK(permits.load().permits == 1);
  CHECK(permits.load().sleepers == 1);
  CHECK(permits.remove_sleeper());
  CHECK(permits.load().permits == 0);
  CHECK(permits.load().sleepers == 0);
}

TEST_CASE("permit_semaphore: a sleeper woken by a permit takes one permit with it") {
  permit_semaphore permits;
  permits.add_sleeper();
  permits.add_sleeper();
  CHECK(permits.release(1) == 1);
  CHECK(permits.remove_sleeper_woken_by_permit());  // 1 permit, 2 sleepers -> 0, 1
  CHECK(permits.load().permits == 0);
  CHECK(permits.load().sleepers == 1);
  // No permit outstanding (a worker committing to park took it): only the
  // sleeper goes.
  permits.add_sleeper();
  CHECK(permits.release(1) == 1);
  CHECK(permits.try_acquire());
  CHECK_FALSE(permits.remove_sleeper_woken_by_permit());
  CHECK(permits.load().permits == 0);
  CHECK(permits.load().sleepers == 1);
}

TEST_CASE("permit_semaphore under concurrency keeps permits <= sleepers") {
  canopy::testing::watchdog guard("permit concurrency", 60);
  permit_semaphore permits;
  std::atomic<bool> stop{false};
  std::atomic<bool> violated{false};
  const long rounds = 200000 / canopy::testing::stress_divisor();
  std::thread checker([&] {
    while (!stop.load()) {
      const auto snapshot = permits.load();
      if (snapshot.permits > snapshot.sleepers) {
        violated.store(true);
      }
    }
  });
  std::thread sleeper([&] {
    for (long round = 0; round < rounds; ++round) {
      permits.add_sleeper();
      static_cast<void>(permits.try_acquire());
      if (round % 2 == 0) {
        static_cast<void>(permits.remove_sleeper());
      } else {
        static_cast<void>(permits.remove_sleeper_woken_by_permit());
      }
    }
  });
  std::thread releaser([&] {
    for (long round = 0; round < rounds; ++round) {
      static_cast<void>(permits.release(2));
    }
  });
  sleeper.join();
  releaser.join();
  stop.store(true);
  checker.join();
  CHECK_FALSE(violated.load());
  CHECK(permits.load().sleepers == 0);
  CHECK(permits.load().permits == 0);
}

TEST_CASE("concurrent producers and claimers: every bit is claimed exactly once") {
  canopy::testing::watchdog guard("tree concurrency", 120);
  constexpr std::size_t leaves = 8;
  constexpr std::size_t signals = 4;
  summary_tree tree(leaves, signals);
  constexpr std::size_t slots = leaves * signals * 64;
  std::vector<std::atomic<int>> claimed(slots);
  std::atomic<long> produced{0};
  std::atomic<long> consumed{0};
  std::atomic<bool> producers_done{false};
  std::atomic<long> failures{0};  // assertions off the main thread are counted here
  const long per_producer = 200000 / canopy::testing::stress_divisor();

  // Each slot is owned by one producer at a time: it sets the bit only after
  // the previous claim of that slot (claimed[slot] back to 0).
  auto producer = [&](std::size_t first) {
    std::size_t slot = first;
    for (long round = 0; round < per_producer; ++round) {
      slot = (slot + 2) % slots;  // producer 0: even slots, producer 1: odd
      while (claimed[slot].load(std::memory_order_acquire) != 0) {
        std::this_thread::yield();
      }
      claimed[slot].store(1, std::memory_order_relaxed);
      const auto outcome = tree.set_task_bit(slot / (signals * 64), slot / 64 % signals, slot % 64);
      if (!outcome.newly_set) {
        failures.fetch_add(1);
      }
      produced.fetch_add(1);
    }
  };
  auto consumer = [&] {
    for (;;) {
      bool found = false;
      for (std::size_t root = 0; root < tree.root_word_count(); ++root) {
        std::uint64_t active = tree.root_word(root);
        while (active != 0) {
          const std::size_t leaf = root * 64 + static_cast<std::size_t>(__builtin_ctzll(active));
          active &= active - 1;
          std::uint64_t words = tree.leaf_word(leaf);
          while (words != 0) {
            const std::size_t signal = static_cast<std::size_t>(__builtin_ctzll(words));
            words &= words - 1;
            summary_tree::activation upward;
            const int bit = tree.claim_task_bit(leaf, signal, 0, upward);
            if (bit >= 0) {
              const std::size_t slot =
                  (leaf * signals + signal) * 64 + static_cast<std::size_t>(bit);
              if (claimed[slot].exchange(0, std::memory_order_acq_rel) != 1) {
                failures.fetch_add(1);  // claimed twice, or never set
              }
              consumed.fetch_add(1);
              found = true;
            }
          }
        }
      }
      if (!found && producers_done.load() && consumed.load() == produced.load()) {
        return;
      }
    }
  };
  std::thread p0(producer, 0);
  std::thread p1(producer, 1);
  std::thread c0(consumer);
  std::thread c1(consumer);
  p0.join();
  p1.join();
  producers_done.store(true);
  c0.join();
  c1.join();
  CHECK(failures.load() == 0);
  CHECK(consumed.load() == 2 * per_producer);
  CHECK(tree_is_empty(tree));
}

TEST_CASE("partition_owner deals leaves round-robin and agrees with its helpers") {
  for (std::size_t workers : {1U, 2U, 3U, 7U, 16U, 64U, 100U}) {
    for (std::size_t leaf_count : {1U, 5U, 64U, 1000U}) {
      std::vector<std::size_t> owned(workers, 0);
      for (std::size_t leaf = 0; leaf < leaf_count; ++leaf) {
        const std::size_t owner = canopy::detail::partition_owner(leaf, workers);
        REQUIRE(owner < workers);
        CHECK(canopy::detail::partition_leaf(owner, canopy::detail::partition_slot(leaf, workers),
                                             workers) == leaf);
        ++owned[owner];
      }
      for (std::size_t worker = 0; worker < workers; ++worker) {
        CHECK(owned[worker] == canopy::detail::partition_size(worker, leaf_count, workers));
      }
    }
  }
}
