// signal_waker/: counters, latch, SignalWaker and the sleep module, alone.
#include "signal_waker/signal_waker.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "signal_waker/atomic_counters.hpp"
#include "signal_waker/sleep_latch.hpp"
#include "signal_waker/sleep_module.hpp"
#include "summary_tree/summary_tree.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::detail::atomic_counters;
using canopy::detail::sleep_latch;
using canopy::testing::eventually;

namespace {

// A probe whose answer the test controls.
class scripted_probe final : public canopy::detail::sleep_probe {
 public:
  std::atomic<bool> stay_awake{false};
  std::atomic<int> blocks{0};
  bool must_stay_awake(std::size_t /*worker*/) noexcept override { return stay_awake.load(); }
  void about_to_block(std::size_t /*worker*/) noexcept override { blocks.fetch_add(1); }
};

// Worker threads looking for work, forever, on one sleep module with
// `spin_rounds` idle rounds; each records its parks. finish() (or the
// destructor) stops them through the shutdown wake.
class idle_workers {
 public:
  struct record {
    std::atomic<std::uint32_t> first_spin_rounds{99};       // before any park
    std::atomic<std::uint32_t> spin_rounds_after_park{99};  // after the latest
    std::atomic<int> jec_wakes{0};
    std::atomic<int> permit_wakes{0};
    std::atomic<int> parks{0};  // counted last: whoever sees it sees the rest
  };

  idle_workers(std::size_t count, std::uint32_t spin_rounds)
      : sleep(count, 1, spin_rounds, permits), records_(count) {
    for (std::size_t worker = 0; worker < count; ++worker) {
      threads_.emplace_back([this, worker] { look_until_stopped(worker); });
    }
  }
  idle_workers(const idle_workers&) = delete;
  idle_workers& operator=(const idle_workers&) = delete;
  ~idle_workers() { finish(); }

  void finish() {
    if (!threads_.empty()) {
      stop_.store(true);
      sleep.wake_all_for_shutdown();
      for (auto& thread : threads_) {
        thread.join();
      }
      threads_.clear();
    }
  }

  record& worker(std::size_t index) { return records_[index]; }
  int total_parks() {
    int total = 0;
    for (auto& one : records_) {
      total += one.parks.load();
    }
    return total;
  }

  canopy::detail::permit_semaphore permits;
  canopy::detail::sleep_module sleep;
  scripted_probe probe;

 private:
  void look_until_stopped(std::size_t index) {
    record& mine = records_[index];
    canopy::detail::idle_state idle;
    sleep.start_looking(idle);
    mine.first_spin_rounds.store(idle.spin_rounds);
    while (!stop_.load()) {
      const canopy::detail::idle_report report = sleep.no_work_found(index, idle, probe);
      if (report.parked) {
        mine.spin_rounds_after_park.store(idle.spin_rounds);
        if (report.reason == canopy::detail::wake_reason::jec) {
          mine.jec_wakes.fetch_add(1);
        } else if (report.reason == canopy::detail::wake_reason::permit) {
          mine.permit_wakes.fetch_add(1);
        }
        mine.parks.fetch_add(1);
      }
    }
    sleep.stop_looking();
  }

  std::atomic<bool> stop_{false};
  std::vector<record> records_;
  std::vector<std::thread> threads_;
};

}  // namespace

TEST_CASE("atomic_counters: the JEC has two toggles and the snapshot detects posts") {
  atomic_counters counters;
  CHECK(counters.load().jec() == 0);  // starts sleepy (even)
  const auto posted = counters.announce_new_jobs();
  CHECK(posted.jec() == 1);                        // sleepy -> active
  CHECK(counters.announce_new_jobs().jec() == 1);  // already active: unchanged
  const std::uint32_t snapshot = counters.announce_sleepy();
  CHECK(snapshot == 2);                      // active -> sleepy, snapshot taken after the toggle
  CHECK(counters.announce_sleepy() == 2);    // a second sleepy worker: unchanged
  CHECK(counters.load().jec() == snapshot);  // nothing posted: a sleeper may sleep
  counters.announce_new_jobs();
  CHECK(counters.load().jec() != snapshot);  // a post after sleepy is detected
}

TEST_CASE("atomic_counters: thread counts and awake_but_idle") {
  atomic_counters counters;
  counters.add_inactive();
  counters.add_inactive();
  counters.add_inactive();
  auto seen = counters.load();
  CHECK(seen.inactive() == 3);
  CHECK(counters.try_add_sleeping(seen));
  CHECK(counters.load().sleeping() == 1);
  CHECK(counters.load().awake_but_idle() == 2);
  CHECK_FALSE(counters.try_add_sleeping(seen));  // stale snapshot: refused
  const auto after = counters.sub_inactive();
  CHECK(after.inactive() == 2);
  counters.sub_sleeping();
  CHECK(counters.load().sleeping() == 0);
}

TEST_CASE("sleep_latch: owner transitions, waker claims only SLEEPING") {
  sleep_latch latch;
  CHECK_FALSE(latch.claim_sleeper());  // UNSET: nothing to claim
  CHECK(latch.get_sleepy());
  CHECK_FALSE(latch.claim_sleeper());  // SLEEPY: not claimable yet
  CHECK(latch.fall_asleep());
  CHECK(latch.claim_sleeper());  // SLEEPING -> SET
  CHECK(latch.load() == sleep_latch::set_);
  CHECK_FALSE(latch.abort_sleep());  // the waker owns it now
  latch.reset();
  CHECK(latch.load() == sleep_latch::unset);
  CHECK(latch.get_sleepy());
  CHECK(latch.set() == sleep_latch::sleepy);  // forced wake while sleepy
  CHECK_FALSE(latch.fall_asleep());           // ... prevents the sleep
}

TEST_CASE("signal_waker: partition summary follows the leaf words of the partition") {
  canopy::detail::futex_park_backend backend;
  canopy::detail::summary_tree tree(10, 2);
  constexpr std::size_t workers = 3;
  canopy::detail::signal_waker waker(4, backend);  // worker 1 owns leaves 1, 4, 7
  CHECK_FALSE(waker.sync_partition_summary(tree, 1, workers, 10));
  CHECK((waker.status() & canopy::detail::signal_waker::task_bit) == 0);
  static_cast<void>(tree.set_task_bit(3, 0, 0));  // worker 0's leaf: not ours
  CHECK_FALSE(waker.sync_partition_summary(tree, 1, workers, 10));
  static_cast<void>(tree.set_task_bit(7, 1, 9));  // ours, partition position 2
  CHECK(waker.sync_partition_summary(tree, 1, workers, 10));
  CHECK(waker.partition_summary_word(0) == 0b100);
  CHECK((waker.status() & canopy::detail::signal_waker::task_bit) != 0);
  canopy::detail::summary_tree::activation upward;
  CHECK(tree.claim_task_bit(7, 1, 0, upward) == 9);
  CHECK_FALSE(waker.sync_partition_summary(tree, 1, workers, 10));
  CHECK((waker.status() & canopy::detail::signal_waker::task_bit) == 0);
}

TEST_CASE("signal_waker: a claimed sleeper is unparked and learns why") {
  canopy::testing::watchdog guard("park/unpark", 30);
  canopy::detail::futex_park_backend backend;
  canopy::detail::signal_waker waker(1, backend);
  REQUIRE(waker.latch().get_sleepy());
  REQUIRE(waker.latch().fall_asleep());
  std::atomic<bool> returned{false};
  std::thread sleeper([&] {
    waker.park();
    returned.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(returned.load());  // really blocked
  REQUIRE(waker.claim(canopy::detail::wake_reason::permit));
  waker.unpark();
  sleeper.join();
  CHECK(returned.load());
  CHECK(waker.take_wake_reason() == canopy::detail::wake_reason::permit);
}

TEST_CASE("sleep_module: a worker parks after its rounds; new_jobs wakes it via the JEC") {
  canopy::testing::watchdog guard("sleep module", 30);
  idle_workers idle(1, 3);
  REQUIRE(eventually([&] { return idle.sleep.counters().sleeping() == 1; }));
  // The sleeping count goes up before the semaphore's sleeper count, the
  // final probe and the block, so those are seen a moment later.
  REQUIRE(eventually([&] { return idle.permits.load().sleepers == 1; }));
  REQUIRE(eventually([&] { return idle.probe.blocks.load() == 1; }));
  CHECK(idle.sleep.new_jobs(1) == 1);  // nobody awake and idle: wake the sleeper
  REQUIRE(eventually([&] { return idle.worker(0).parks.load() == 1; }));
  CHECK(idle.worker(0).jec_wakes.load() == 1);
  // The waker, not the sleeper, took it off the sleeping count.
  REQUIRE(eventually([&] { return idle.sleep.counters().sleeping() == 1; }));  // parked again
  CHECK(idle.sleep.wake_for_permits(1) == 1);
  REQUIRE(eventually([&] { return idle.worker(0).parks.load() == 2; }));
  idle.finish();
  CHECK(idle.sleep.counters().sleeping() == 0);
  CHECK(idle.sleep.counters().inactive() == 0);
  CHECK(idle.permits.load().sleepers == 0);
}

TEST_CASE("sleep_module: a permit wake takes its permit along; the other sleeper keeps sleeping") {
  canopy::testing::watchdog guard("permit wake", 30);
  idle_workers idle(2, 0);
  REQUIRE(eventually([&] { return idle.sleep.counters().sleeping() == 2; }));
  REQUIRE(eventually([&] { return idle.permits.load().sleepers == 2; }));
  const std::uint32_t granted = idle.permits.release(1);  // what a root bit 0 -> 1 does
  CHECK(granted == 1);
  CHECK(idle.sleep.wake_for_permits(granted) == 1);
  // The woken worker's permit is gone with it: nobody is left to spend it on
  // a search for nothing before parking again.
  CHECK(idle.permits.load().permits == 0);
  REQUIRE(eventually([&] { return idle.total_parks() == 1; }));
  REQUIRE(eventually([&] { return idle.sleep.counters().sleeping() == 2; }));  // parked again
  CHECK(idle.permits.load().permits == 0);
  CHECK(idle.total_parks() == 1);
  CHECK(idle.worker(0).permit_wakes.load() + idle.worker(1).permit_wakes.load() == 1);
}

TEST_CASE("sleep_module: new_jobs wakes nobody while enough workers are awake and idle") {
  canopy::detail::permit_semaphore permits;
  canopy::detail::sleep_module sleep(2, 1, 0, permits);
  canopy::detail::idle_state idle;
  sleep.start_looking(idle);  // one awake-but-idle worker, nobody sleeping
  CHECK(sleep.new_jobs(1) == 0);
  CHECK(sleep.counters().jec() % 2 == 1);  // but the JEC went active
  sleep.stop_looking();
}

TEST_CASE("sleep_module: a JEC change between sleepy and sleep prevents the park") {
  canopy::testing::watchdog guard("jec abort", 30);
  canopy::detail::permit_semaphore permits;
  canopy::detail::sleep_module sleep(1, 1, 0, permits);
  scripted_probe probe;
  canopy::detail::idle_state idle;
  sleep.start_looking(idle);
  // Round 0 == yield_rounds: announce sleepy.
  CHECK_FALSE(sleep.no_work_found(0, idle, probe).parked);
  CHECK(sleep.counters().jec() % 2 == 0);
  sleep.new_jobs(1);  // work posted while sleepy
  // The next call tries to sleep, sees the JEC moved and returns at once.
  CHECK_FALSE(sleep.no_work_found(0, idle, probe).parked);
  CHECK(sleep.counters().sleeping() == 0);
  CHECK(probe.blocks.load() == 0);
  sleep.stop_looking();
}

TEST_CASE("sleep_module: the final probe keeps a worker awake") {
  canopy::detail::permit_semaphore permits;
  canopy::detail::sleep_module sleep(1, 1, 0, permits);
  scripted_probe probe;
  probe.stay_awake.store(true);
  canopy::detail::idle_state idle;
  sleep.start_looking(idle);
  for (int round = 0; round < 10; ++round) {
    CHECK_FALSE(sleep.no_work_found(0, idle, probe).parked);
  }
  CHECK(probe.blocks.load() == 0);
  CHECK(sleep.counters().sleeping() == 0);
  CHECK(permits.load().sleepers == 0);
  sleep.stop_looking();
}

TEST_CASE("spin_history: long parks stop the spinning; a short park or early work restarts it") {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  canopy::detail::spin_history history;
  CHECK(history.rounds_to_spin(4) == 4);  // a new worker spins
  // Parks between short_park and idle_park count down.
  for (std::uint32_t park = 1; park < canopy::detail::spin_history::max_score; ++park) {
    history.parked(microseconds(200));
    CHECK(history.rounds_to_spin(4) == 4);  // not yet enough long parks
  }
  history.parked(microseconds(200));
  CHECK(history.rounds_to_spin(4) == 0);
  history.parked(microseconds(200));  // stays off, never wraps around
  CHECK(history.rounds_to_spin(4) == 0);
  history.parked(microseconds(10));  // work came back quickly: spin again
  CHECK(history.rounds_to_spin(4) == 4);
  // One park past idle_park (the executor was idle) stops it at once.
  history.parked(milliseconds(2));
  CHECK(history.rounds_to_spin(4) == 0);
  history.found_work_without_parking();
  CHECK(history.rounds_to_spin(4) == 4);
  history.parked(canopy::detail::spin_history::idle_park);
  CHECK(history.rounds_to_spin(4) == 0);
}

TEST_CASE("sleep_module: a worker whose parks are long stops spinning before it parks") {
  canopy::testing::watchdog guard("adaptive spin", 30);
  idle_workers idle(1, 3);
  // Parks of 2 ms or more (above idle_park): the first one stops the
  // spinning, and the next idle period does not turn it back on.
  for (int park = 1; park <= 2; ++park) {
    REQUIRE(eventually([&] { return idle.sleep.counters().sleeping() == 1; }));
    REQUIRE(eventually([&] { return idle.probe.blocks.load() == park; }));  // the park's clock runs
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    CHECK(idle.sleep.wake_for_permits(1) == 1);
    REQUIRE(eventually([&] { return idle.worker(0).parks.load() == park; }));
    CHECK(idle.worker(0).spin_rounds_after_park.load() == 0U);
  }
  CHECK(idle.worker(0).first_spin_rounds.load() == 3);  // a fresh worker spins its configured rounds
  idle.finish();
  CHECK(idle.sleep.counters().sleeping() == 0);
}
