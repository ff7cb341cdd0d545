// driver_world — what the model checks of the poller share
// (model_poller_test: the epoll reactor; model_ring_test: the io_uring
// ring): the real summary_tree and sleep_module, tasks posted and claimed
// through the real protocol steps, the sleep probe a parking worker asks,
// the sleeper-count check every execution must pass, and the scenario that
// runs the workers, the outside producers and the kernel-side threads.
// Each world adds its model of the kernel, a driver_park_backend on it and
// its reduced worker loop.
//
// Threads: the model checker runs every logical thread on one OS thread and
// switches only at schedule points, so the plain counters here need no lock;
// the cases run without the sleep-set reduction (the checker cannot see
// these counters).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "signal_waker/sleep_module.hpp"
#include "summary_tree/summary_tree.hpp"
#include "tests/model/model_checker.hpp"
#include "tests/model/protocol_steps.hpp"

namespace canopy::detail::model {

struct task_position {
  std::size_t leaf;
  std::size_t signal;
  unsigned bit;
};

class driver_world : public sleep_probe {
 public:
  // One leaf per worker, two signal words per leaf.
  explicit driver_world(std::size_t workers)
      : workers_(workers),
        leaves_(workers),
        tree_(workers, 2),
        sleep_(workers, workers, /*yield_rounds=*/0, tree_.permits()) {}

  // An outside producer (a spawn from another thread).
  void produce(task_position task) {
    post(task);
    ++producers_done_;
  }

  // The sleeper counts against the parked workers (threads [0, workers) of
  // the scenario), then whether every task was claimed when all are parked.
  // Empty: both hold; `all_parked` says whether every worker ended parked.
  std::string check_tasks(const std::vector<bool>& parked, bool& all_parked) const {
    std::size_t parked_workers = 0;
    for (std::size_t index = 0; index < workers_; ++index) {
      parked_workers += parked[index] ? 1 : 0;
    }
    const auto counters = sleep_.counters();
    const auto permits = tree_.permits().load();
    if (counters.sleeping() != parked_workers || permits.sleepers != parked_workers) {
      return "sleeper counts disagree with parked workers: sleeping=" +
             std::to_string(counters.sleeping()) +
             " semaphore=" + std::to_string(permits.sleepers) +
             " parked=" + std::to_string(parked_workers);
    }
    all_parked = parked_workers == workers_;
    if (all_parked && claimed_ != produced_) {
      return "lost wakeup: " + std::to_string(produced_ - claimed_) +
             " task(s) runnable while every worker is parked";
    }
    return {};
  }

  // The first half of a teardown: every worker stops and is woken.
  void stop_workers() {
    stop_ = true;
    sleep_.wake_all_for_shutdown();
  }

  // A worker searches at most this many rounds, and stops this many rounds
  // after the last producer finished (then `exhausted_`).
  static constexpr int total_rounds = 24;
  static constexpr int stuck_rounds = 12;

 protected:
  // Make one task runnable and wake per the protocol (executor_core::signal_task).
  void post(task_position task) {
    post_task(tree_, sleep_, task.leaf, task.signal, task.bit);
    ++produced_;
  }

  // One search, the worker's own leaf first: the claimed task's leaf and
  // index within it (signal * 64 + bit), or false.
  bool claim_one(std::size_t worker, std::size_t& leaf, int& index) {
    for (std::size_t step = 0; step < leaves_; ++step) {
      leaf = (worker + step) % leaves_;
      index = claim_in_active_leaf(tree_, sleep_, leaf);
      if (index >= 0) {
        ++claimed_;
        return true;
      }
    }
    return false;
  }

  // Whether the producers have all finished and this worker has searched
  // stuck_rounds rounds since (then the world is marked exhausted).
  bool searched_too_long(std::size_t producer_threads, int& rounds_after_producers) {
    if (producers_done_ == producer_threads && ++rounds_after_producers > stuck_rounds) {
      exhausted_ = true;
      return true;
    }
    return false;
  }

  std::size_t workers_;
  std::size_t leaves_;
  summary_tree tree_;
  sleep_module sleep_;
  int produced_ = 0;
  int claimed_ = 0;
  bool stop_ = false;
  bool exhausted_ = false;
  std::size_t producers_done_ = 0;

 private:
  bool must_stay_awake(std::size_t worker) noexcept override {
    return stop_ || sleep_.waker(worker).sync_partition_summary(tree_, worker, workers_, leaves_) ||
           tree_.any_active();
  }
  void about_to_block(std::size_t /*worker*/) noexcept override {}
};

// The threads of one execution of a driver world: `workers` workers
// (world.work(worker, producers)), one outside producer per entry of
// `posts`, and `others` more threads that each run others_step(world, i)
// (the network, the kernel's device); `preexisting` tasks are runnable
// before the threads start. `producers` counts every thread but the
// workers, and the preexisting tasks.
template <class World>
exploration_result explore_driver_world(const std::function<std::shared_ptr<World>()>& make_world,
                                        std::size_t workers,
                                        const std::vector<task_position>& preexisting,
                                        const std::vector<task_position>& posts, std::size_t others,
                                        const std::function<void(World&, std::size_t)>& others_step,
                                        int preemption_bound, std::uint64_t max_executions) {
  return explore(
      [&] {
        const std::shared_ptr<World> current = make_world();
        for (const task_position& task : preexisting) {
          current->produce(task);  // no schedule points: before the execution
        }
        const std::size_t producers = preexisting.size() + posts.size() + others;
        scenario run;
        for (std::size_t worker = 0; worker < workers; ++worker) {
          run.threads.emplace_back(
              [world = current, worker, producers] { world->work(worker, producers); });
        }
        for (const task_position& task : posts) {
          run.threads.emplace_back([world = current, task] { world->produce(task); });
        }
        for (std::size_t other = 0; other < others; ++other) {
          run.threads.emplace_back(
              [world = current, other, &others_step] { others_step(*world, other); });
        }
        run.check = [world = current](const std::vector<bool>& parked) {
          return world->check(parked);
        };
        run.teardown = [world = current] { world->teardown(); };
        return run;
      },
      preemption_bound, max_executions);
}

}  // namespace canopy::detail::model
