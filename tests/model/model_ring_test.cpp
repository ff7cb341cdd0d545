// Model checking of the io_uring park path (docs/io.md, "The io_uring
// backend"): the real sleep_module, signal_waker, summary_tree and
// driver_park_backend, with the poller parked in a model of the ring
// (tests/model/model_ring_kernel.hpp: the submission queue, a device, a
// sync cancel, the eventfd's multishot poll that may end, io_uring_enter's
// wait), under a copy of the reactor's io_uring half
// (tests/model/model_ring_reactor.hpp); the worker loop here mirrors
// worker_main's driver calls. The epoll descriptor's poll is not
// modelled: model_poller_test covers readiness.
//
// What must hold in every execution, while every worker is parked: no task
// runnable, no CQE unreaped (the cancelled request's included), no request
// queued but unsubmitted, the eventfd's poll armed (else the next notify
// posts nothing), and every completed request delivered to its task; the
// sleeper counts agree with the parked workers. And in every execution: no
// canceller left waiting, and a poller that wakes itself (its wait() said
// it collected a completion) has one to deliver, so a wake-up CQE never
// costs a worker's wake and search (unless a canceller reaped what that
// wait() kept: a cancel racing the poller may cost one wake).
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executor/driver_park_backend.hpp"
#include "executor/idle_driver.hpp"
#include "tests/model/driver_world.hpp"
#include "tests/model/expect_clean.hpp"
#include "tests/model/explored_bound.hpp"
#include "tests/model/model_checker.hpp"
#include "tests/model/model_ring_kernel.hpp"
#include "tests/model/model_ring_reactor.hpp"
#include "tests/model/protocol_steps.hpp"

namespace {

using canopy::detail::model::model_ring_driver;
using canopy::detail::model::model_ring_kernel;
using canopy::detail::model::task_position;

struct ring_case {
  std::size_t workers;
  std::vector<task_position> request_tasks;  // runnable at the start; each queues a request
  std::vector<task_position> posts;          // one outside producer thread each
  task_position io_task;                     // woken by a request's completion
  std::uint32_t multishot_posts = 0;         // model_ring_kernel's; 0: the poll never ends
  std::uint32_t poll_interval = 61;          // executor_config::driver_poll_interval
  bool canceller = false;        // a thread that cancels a request and reaps (wait_until_reaped)
  bool outside_request = false;  // a thread that is not a worker starts a request
};

class ring_world final : public canopy::detail::model::driver_world {
 public:
  explicit ring_world(const ring_case& setup)
      : driver_world(setup.workers),
        request_tasks_(setup.request_tasks),
        io_task_(setup.io_task),
        outside_requests_(setup.outside_request ? 1 : 0),
        poll_interval_(setup.poll_interval),
        canceller_(setup.canceller),
        kernel_(setup.multishot_posts),
        driver_(kernel_, setup.canceller),
        backend_(driver_) {
    sleep_.set_poller_backend(&backend_);
    driver_.set_completion_handler(&ring_world::request_completed, this);
  }

  // A worker of executor_core::worker_main, reduced to its protocol steps
  // and its driver calls.
  void work(std::size_t worker, std::size_t producer_threads) {
    canopy::detail::model::search_steps search;
    int rounds_after_producers = 0;
    std::uint32_t since_poll = 0;
    bool out_of_work = false;
    for (int round = 0; round < total_rounds && !stop_; ++round) {
      if (searched_too_long(producer_threads, rounds_after_producers)) {
        break;
      }
      std::size_t leaf = 0;
      int index = 0;
      if (claim_one(worker, leaf, index)) {
        search.found_work(tree_, sleep_);
        run_task(leaf, index);
        // count_towards_driver_poll (not after the run that ends a search:
        // worker_main's inner loop runs that one without it).
        if (!out_of_work && ++since_poll >= poll_interval_) {
          since_poll = 0;
          driver_.submit();
          if (sleep_.try_take_poller()) {
            driver_.dispatch();
            sleep_.release_poller();
          }
        }
        out_of_work = false;
        continue;
      }
      if (!out_of_work) {
        out_of_work = true;
        // worker_main: out of work, its tasks' requests go to the kernel
        // while the token is taken; with it free, the worker that takes it
        // flushes them in its wait. A poller that flushed before they were
        // queued took the token before that: seen taken here.
        if (!sleep_.poller_is_free()) {
          driver_.submit();
        }
      }
      const canopy::detail::idle_report report = search.found_none(sleep_, worker, *this);
      if (report.holds_poller) {
        const std::size_t delivered = driver_.dispatch();
        // The poller woke itself (wait() said it collected something).
        if (report.parked && report.reason == canopy::detail::wake_reason::io && delivered == 0 &&
            !driver_.take_kept_reaped_elsewhere()) {
          ++woke_for_nothing_;
        }
        sleep_.release_poller();
      }
    }
  }

  // A thread that is not a worker cancels a request (a socket closed from
  // outside the pool): its wait_until_reaped reaps the completion queue.
  void cancel_from_outside() {
    driver_.cancel_from_outside();
    ++producers_done_;
  }

  // A thread that is not a worker starts a request (a read on a socket from
  // a plain thread): it queues and notifies.
  void start_from_outside() {
    ++requests_;
    driver_.queue_request_from_outside();
    ++producers_done_;
  }

  // The device: completes each request once it is in the kernel.
  void device() {
    for (std::size_t request = 0; request < request_tasks_.size() + outside_requests_; ++request) {
      kernel_.complete_request();
    }
    ++producers_done_;
  }

  std::string check(const std::vector<bool>& parked) const {
    bool all_parked = false;
    if (std::string failure = check_tasks(parked, all_parked); !failure.empty()) {
      return failure;
    }
    if (canceller_ && parked.back()) {  // the canceller is the last thread
      return "the cancelling thread waits for its request's completion and nobody reaps it";
    }
    if (woke_for_nothing_ != 0) {
      return "the poller woke itself for I/O and had nothing to deliver (a spurious wake)";
    }
    if (all_parked) {
      if (kernel_.queued_requests() != 0) {
        return "a request queued but never submitted while every worker is parked";
      }
      if (kernel_.unreaped() != 0 || driver_.holds_collected()) {
        return "a completion unreaped while every worker is parked";
      }
      if (canceller_ && !driver_.cancel_reaped()) {
        return "the cancelled request's completion never reaped while every worker is parked";
      }
      if (!kernel_.wake_poll_armed()) {
        return "the eventfd's poll is not armed while every worker is parked (a notify would "
               "post nothing)";
      }
      if (delivered_ != requests_) {
        return "a request's completion never reached its task while every worker is parked";
      }
    }
    if (exhausted_ && (claimed_ != produced_ || delivered_ != requests_)) {
      return "stuck: work stays undelivered while a worker searched " +
             std::to_string(stuck_rounds) + " rounds";
    }
    return {};
  }

  void teardown() {
    stop_workers();
    kernel_.close_for_teardown();
    driver_.close_for_teardown();
  }

 private:
  // A request task queues its request (uring_backend::start, on a
  // worker: queued only); any other task just runs.
  void run_task(std::size_t leaf, int index) {
    for (const task_position& task : request_tasks_) {
      if (task.leaf == leaf && static_cast<int>(task.signal * 64 + task.bit) == index) {
        driver_.queue_request();
        ++requests_;
      }
    }
  }

  static void request_completed(void* self) {
    auto& world = *static_cast<ring_world*>(self);
    ++world.delivered_;
    world.post(world.io_task_);
  }

  std::vector<task_position> request_tasks_;
  task_position io_task_;
  std::size_t outside_requests_;
  std::uint32_t poll_interval_;
  bool canceller_;
  model_ring_kernel kernel_;
  model_ring_driver driver_;
  canopy::detail::driver_park_backend backend_;
  int requests_ = 0;
  int delivered_ = 0;
  int woke_for_nothing_ = 0;
};

canopy::detail::model::exploration_result check_ring_case(const ring_case& given,
                                                          int preemption_bound) {
  // Under ThreadSanitizer, no preemption with two workers, a canceller or
  // an outside request: TSan's memory grows with every execution's fiber
  // switches, and these cases run hundreds at one preemption (a whole
  // TSan run peaked at 23 GB with the canceller cases at one). At none,
  // a canceller case explores only 10 schedules: a second post gives it
  // more blocking points to order.
  const bool heavy = given.workers >= 2 || given.canceller || given.outside_request;
  ring_case setup = given;
  if (canopy::detail::model::under_thread_sanitizer && given.canceller) {
    setup.posts.push_back({0, 0, 4});
  }
  const std::size_t devices = setup.request_tasks.empty() && !setup.outside_request ? 0 : 1;
  const std::size_t requesters = setup.outside_request ? 1 : 0;
  const std::size_t others = devices + requesters + (setup.canceller ? 1 : 0);
  const auto threads = static_cast<int>(setup.workers + setup.posts.size() + others);
  const int bound = canopy::detail::model::under_thread_sanitizer && heavy
                        ? 0
                        : canopy::detail::model::explored_bound(preemption_bound, threads);
  return canopy::detail::model::explore_driver_world<ring_world>(
      [&] { return std::make_shared<ring_world>(setup); }, setup.workers, setup.request_tasks,
      setup.posts, others,
      [devices, requesters](ring_world& world, std::size_t other) {
        if (other < devices) {
          world.device();
        } else if (other < devices + requesters) {
          world.start_from_outside();
        } else {
          world.cancel_from_outside();
        }
      },
      bound, 400000);
}

}  // namespace

using canopy::detail::model::expect_clean;

TEST_CASE("model ring: a task's request queued just before its worker goes idle") {
  // Two workers: one may park in the ring first (its wait flushed nothing),
  // the other runs the task that queues the request and then goes idle; its
  // out-of-work submit is all that brings the request to the kernel. An
  // outside post wakes the poller or the other sleeper meanwhile.
  expect_clean(check_ring_case({2, {{1, 0, 1}}, {{0, 0, 2}}, {1, 0, 9}}, 1));
}

TEST_CASE("model ring: a request completes while the poller parks") {
  // One worker queues the request, submits it when it runs out of work and
  // parks in the ring; the completion lands anywhere in that: it is reaped
  // by the busy poll, the park's dispatch, or the wait, which keeps it for
  // dispatch and wakes the worker itself.
  expect_clean(check_ring_case({1, {{0, 0, 1}}, {}, {0, 0, 9}, 0, 1}, 3));
}

TEST_CASE("model ring: notifies race the poller's drain and re-arm of a poll that ends") {
  // The eventfd's poll ends with every CQE it posts: each drain re-arms it,
  // and a notify can land between the drain and the re-arm's submission (the
  // re-armed poll then posts at once) or leave a stale CQE for the next park.
  expect_clean(check_ring_case({1, {}, {{0, 0, 3}, {0, 0, 4}}, {0, 0, 9}, 1}, 2));
}

TEST_CASE("model ring: two workers, a request, a post and a poll that ends") {
  // One worker in the ring, one on its futex; the request's completion and
  // an outside post (whose waker prefers the futex sleeper) race the
  // poller's self-claim, with the poll re-armed after every wake.
  expect_clean(check_ring_case({2, {{0, 0, 1}}, {{1, 0, 2}}, {1, 0, 9}, 1}, 1));
}

TEST_CASE("model ring: a thread that cancels reaps the poller's wake-up and passes it on") {
  // wait_until_reaped reaps every CQE on the cancelling thread, the
  // eventfd's among them: a notify's CQE consumed there between the
  // poller's look at its latch and its io_uring_enter would leave the
  // poller blocked in the kernel although a waker claimed it. The
  // canceller leaves the eventfd undrained and notifies again after it
  // lets go of the reaping lock, which posts a CQE for the poller.
  ring_case setup{1, {}, {{0, 0, 3}}, {0, 0, 9}};
  setup.canceller = true;
  expect_clean(check_ring_case(setup, 2));
}

TEST_CASE("model ring: a thread that is not a worker starts a request") {
  // It queues the request and notifies; the poller (parked, or about to
  // park in the ring) is woken by the notify's CQE and its next wait
  // submits the request, whose completion wakes it again.
  ring_case setup{1, {}, {}, {0, 0, 9}};
  setup.outside_request = true;
  expect_clean(check_ring_case(setup, 2));
}

TEST_CASE("model ring: a canceller leaves a poll's last CQE to the poller while it waits") {
  // With a poll that ends, a canceller that took the notify's CQE ending it
  // (no IORING_CQE_F_MORE) after the poller's arm_watches and before its
  // io_uring_enter left the watch marked ended: its second notify found no
  // poll, and the claimed poller stayed blocked (b804569). Now it reaps
  // only while poller_waiting_ is clear (set with the look, cleared in the
  // reap after the wait); else the cancelled CQE wakes the poller to reap.
  ring_case setup{1, {}, {{0, 0, 3}}, {0, 0, 9}, 1};
  setup.canceller = true;
  expect_clean(check_ring_case(setup, 2));
}
