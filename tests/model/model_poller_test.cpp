// Model checking of the poller (docs/architecture.md, "The poller"): the
// real sleep_module, signal_waker, summary_tree and driver_park_backend,
// with one worker at a time parking in the idle driver instead of on its
// futex. The driver here is a model of the kernel side of io/reactor: an
// eventfd counter (level-triggered: readable until drained) and an epoll
// ready list of readiness edges; epoll_wait blocks until either is non-empty.
// A readiness edge stands for a socket becoming readable: the poller (or a
// busy worker's poll) dispatches it, which makes the task waiting on that
// socket runnable through the ordinary posting path.
//
// What must hold in every execution: no task stays runnable, and no edge
// stays undelivered, while every worker is parked (a parked poller with an
// edge on its ready list is not parked: its epoll_wait returns), and the
// sleeper counts agree with the parked workers.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executor/driver_park_backend.hpp"
#include "executor/idle_driver.hpp"
#include "atomics/atomics.hpp"
#include "tests/model/driver_world.hpp"
#include "tests/model/expect_clean.hpp"
#include "tests/model/model_checker.hpp"
#include "tests/model/protocol_steps.hpp"
#include "tests/watchdog.hpp"

namespace {

// The kernel side of the reactor: the eventfd and the epoll ready list.
// Every event first makes itself visible (counter or list), then bumps the
// generation an epoll_wait blocks on, then wakes that waiter: a waiter that
// checked before the event sees the generation moved and does not block.
class model_kernel_driver final : public canopy::ext::idle_driver {
 public:
  // The poster side (any thread): an edge lands on the ready list.
  void readiness_edge() noexcept {
    ready_edges_.fetch_add(1);
    signal_epoll();
  }

  bool wait() noexcept override {
    if (collected_ != 0) {
      return true;  // collected, not dispatched yet (the reactor's first check)
    }
    const std::uint32_t generation = epoll_generation_.load();
    const std::uint32_t edges = ready_edges_.exchange(0);
    const bool notified = eventfd_.exchange(0) != 0;  // drained with the events it came with
    if (edges != 0) {
      collected_ += edges;
      return true;
    }
    if (notified) {
      return false;  // a notify(): park() re-reads its latch
    }
    canopy::detail::model::park_on(&epoll_generation_, generation, epoll_generation_.peek());
    return false;  // woken by an event: the caller's loop calls wait() again
  }

  void notify() noexcept override {
    eventfd_.fetch_add(1);
    signal_epoll();
  }

  std::size_t dispatch() noexcept override {
    // What wait() collected, then a non-blocking poll of the ready list.
    const std::uint32_t edges = collected_ + ready_edges_.exchange(0);
    collected_ = 0;
    for (std::uint32_t edge = 0; edge < edges; ++edge) {
      on_edge_(on_edge_target_);
    }
    return edges;
  }

  void set_edge_handler(void (*handler)(void*), void* target) noexcept {
    on_edge_ = handler;
    on_edge_target_ = target;
  }

  // After an execution (no schedule points): edges neither collected nor dispatched.
  [[nodiscard]] std::uint32_t undelivered() const noexcept {
    return ready_edges_.peek() + collected_;
  }
  void wake_for_teardown() noexcept { signal_epoll(); }

 private:
  void signal_epoll() noexcept {
    epoll_generation_.fetch_add(1);
    canopy::detail::model::unpark_on(&epoll_generation_);
  }

  canopy::detail::atomics::atomic<std::uint32_t> eventfd_{0};
  canopy::detail::atomics::atomic<std::uint32_t> ready_edges_{0};
  canopy::detail::atomics::atomic<std::uint32_t> epoll_generation_{0};
  std::uint32_t collected_ = 0;  // the poller's own buffer (one holder at a time)
  void (*on_edge_)(void*) = nullptr;
  void* on_edge_target_ = nullptr;
};

using canopy::detail::model::task_position;

class poller_world final : public canopy::detail::model::driver_world {
 public:
  // `io_task`: where the task waiting on the socket goes when its edge is dispatched.
  poller_world(std::size_t workers, task_position io_task, std::uint32_t poll_interval)
      : driver_world(workers), io_task_(io_task), poll_interval_(poll_interval), backend_(driver_) {
    sleep_.set_poller_backend(&backend_);
    driver_.set_edge_handler(&poller_world::edge_dispatched, this);
  }

  // The network: the socket the I/O task waits on becomes readable.
  void edge_arrives() {
    driver_.readiness_edge();
    ++producers_done_;
  }

  // A worker of executor_core::worker_main, reduced to its protocol steps.
  void work(std::size_t worker, std::size_t producer_threads) {
    canopy::detail::model::search_steps search;
    int rounds_after_producers = 0;
    std::uint32_t since_poll = 0;
    for (int round = 0; round < total_rounds && !stop_; ++round) {
      if (searched_too_long(producer_threads, rounds_after_producers)) {
        break;
      }
      std::size_t leaf = 0;
      int index = 0;
      if (claim_one(worker, leaf, index)) {
        search.found_work(tree_, sleep_);
        // poll_driver_if_due: a busy worker polls when it can take the token.
        if (++since_poll >= poll_interval_) {
          since_poll = 0;
          if (sleep_.try_take_poller()) {
            driver_.dispatch();
            sleep_.release_poller();
          }
        }
        continue;
      }
      const canopy::detail::idle_report report = search.found_none(sleep_, worker, *this);
      if (report.holds_poller) {
        driver_.dispatch();
        sleep_.release_poller();
      }
    }
  }

  std::string check(const std::vector<bool>& parked) const {
    bool all_parked = false;
    if (std::string failure = check_tasks(parked, all_parked); !failure.empty()) {
      return failure;
    }
    if (all_parked && driver_.undelivered() != 0) {
      return "lost readiness: an edge is pending while every worker is parked and none waits in "
             "the driver";
    }
    if (exhausted_ && (claimed_ != produced_ || driver_.undelivered() != 0)) {
      return "stuck: work stays undelivered while a worker searched " +
             std::to_string(stuck_rounds) + " rounds";
    }
    return {};
  }

  void teardown() {
    stop_workers();
    driver_.wake_for_teardown();
  }

 private:
  static void edge_dispatched(void* self) {
    static_cast<poller_world*>(self)->post(static_cast<poller_world*>(self)->io_task_);
  }

  task_position io_task_;
  std::uint32_t poll_interval_;
  model_kernel_driver driver_;
  canopy::detail::driver_park_backend backend_;
};

using canopy::detail::model::under_thread_sanitizer;

struct poller_case {
  std::size_t workers;
  std::vector<task_position> preexisting;  // runnable before the threads start
  std::vector<task_position> posts;        // one outside producer thread each
  int edges;                               // one network thread each
  task_position io_task;
  std::uint32_t poll_interval = 1;
};

canopy::detail::model::exploration_result check_poller_case(const poller_case& setup,
                                                            int preemption_bound) {
  if (canopy::testing::stress_divisor() > 1 && preemption_bound > 1) {
    --preemption_bound;
  }
  if (under_thread_sanitizer) {
    // TSan keeps about a megabyte per execution's fiber switches (the
    // bounds of model_check_test.cpp): the two-worker case's 14,385
    // executions at bound 1 took over 20 GB. The plain build explores it.
    preemption_bound = setup.workers >= 2 ? 0 : std::min(preemption_bound, 1);
  }
  return canopy::detail::model::explore_driver_world<poller_world>(
      [&] {
        return std::make_shared<poller_world>(setup.workers, setup.io_task, setup.poll_interval);
      },
      setup.workers, setup.preexisting, setup.posts, static_cast<std::size_t>(setup.edges),
      [](poller_world& world, std::size_t /*edge*/) { world.edge_arrives(); }, preemption_bound,
      400000);
}

}  // namespace

using canopy::detail::model::expect_clean;

TEST_CASE("model poller: a task posted while the only sleeper waits in the driver") {
  // One worker: it parks as the poller (epoll_wait); the outside post must
  // reach it through the driver's notify (eventfd), not a futex wake.
  expect_clean(check_poller_case({1, {}, {{0, 0, 3}}, 0, {0, 0, 9}}, 3));
}

TEST_CASE("model poller: readiness arrives while the worker runs, searches or parks") {
  // The edge lands at any point of the worker's run, search and park: it is
  // delivered by the busy poll, or the parking worker takes the poller role
  // and its epoll_wait returns for the edge, which it claims itself.
  expect_clean(check_poller_case({1, {{0, 0, 1}}, {}, 1, {0, 0, 9}}, 3));
}

TEST_CASE("model poller: two workers, readiness and a post race the poller's self-claim") {
  // One worker parks in the driver, the other on its futex; an edge (which
  // the poller claims itself) and a post (whose waker prefers the futex
  // sleeper, and claims the poller only when it is the last sleeper) race.
  expect_clean(check_poller_case({2, {}, {{1, 0, 2}}, 1, {0, 0, 9}}, 1));
}
