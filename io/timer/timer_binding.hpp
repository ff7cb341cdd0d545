// reactor_timers — gives an executor's reactor a timer queue, so that
// canopy::sleep_for, sleep_until and with_timeout work in its tasks, with
// the reactor's poller (epoll_pwait2, sub-millisecond) as their driver.
//
//   canopy::executor pool(canopy::io::with_reactor());
//   canopy::io::reactor_timers timers(pool);
//   ...
//
// ~reactor_timers shuts the executor down first (shutdown() is idempotent):
// sleeping tasks hold timers in this queue, so they are destroyed, and
// disarm their timers, while the queue still lives. Declared after the
// executor, as above, it is destroyed first and that is all it takes.
// Destroy it on a thread that is not one of the executor's workers (as the
// executor itself).
//
// The constructor throws std::logic_error if the executor has no reactor
// or already has a timer queue.
#pragma once

#include "../../executor/executor.hpp"
#include "../reactor.hpp"
#include "timer_queue.hpp"

namespace canopy::io {

class reactor_timers {
 public:
  explicit reactor_timers(executor& pool) : core_(&pool.core()), reactor_(&reactor::of(pool)) {
    queue_.set_earlier_deadline_listener(&notify_reactor, reactor_);
    timer_queue::attach(*core_, queue_);
    reactor_->set_deadline_source(&queue_);
  }
  ~reactor_timers() {
    core_->shutdown();
    reactor_->set_deadline_source(nullptr);
    timer_queue::detach(*core_);
  }
  reactor_timers(const reactor_timers&) = delete;
  reactor_timers& operator=(const reactor_timers&) = delete;

  [[nodiscard]] timer_queue& queue() noexcept { return queue_; }

 private:
  static void notify_reactor(void* target) noexcept { static_cast<reactor*>(target)->notify(); }

  executor_core* core_;
  reactor* reactor_;
  timer_queue queue_;
};

}  // namespace canopy::io
