// reactor_timers — the timer queue behind canopy::sleep_for, sleep_until and
// with_timeout on an executor with a reactor, driven by the reactor's poller
// (epoll_pwait2 or io_uring, sub-millisecond).
//
// A reactor brings its own timer queue by default (reactor_options::timers),
// so most programs never create this type:
//
//   canopy::executor pool(canopy::io::with_reactor());   // timers included
//
// For a reactor built with timers = false, a reactor_timers adds them:
//
//   canopy::executor pool(canopy::io::with_reactor({}, {.timers = false}));
//   canopy::io::reactor_timers timers(pool);
//
// On a reactor that has its own timers, a reactor_timers is only a handle to
// them (queue()); older code that creates one keeps working.
//
// ~reactor_timers shuts the executor down first (shutdown() is idempotent):
// sleeping tasks hold timers in this queue, so they are destroyed, and
// disarm their timers, while the queue still lives. Declared after the
// executor, as above, it is destroyed first and that is all it takes.
// Destroy it on a thread that is not one of the executor's workers (as the
// executor itself).
//
// The constructor throws std::logic_error if the executor has no reactor,
// or has a timer queue that is not its reactor's own.
#pragma once

#include <memory>

#include "../../executor/executor.hpp"
#include "../reactor.hpp"
#include "timer_queue.hpp"

namespace canopy::io {

class reactor_timers {
 public:
  explicit reactor_timers(executor& pool);
  ~reactor_timers();
  reactor_timers(const reactor_timers&) = delete;
  reactor_timers& operator=(const reactor_timers&) = delete;

  [[nodiscard]] detail::timer_queue& queue() noexcept { return *queue_; }

 private:
  canopy::detail::scheduler* core_;
  reactor* reactor_;
  std::unique_ptr<detail::timer_queue> added_;  // null: the reactor's own timers
  detail::timer_queue* queue_;
};

}  // namespace canopy::io
