// timer_thread — drives an executor's timers from a thread of its own, for
// an executor that runs no reactor (the reactor's poller drives them
// otherwise). It owns a timer_queue, attaches it to the executor for the
// thread's lifetime, sleeps until the queue's next deadline
// (clock_nanosleep-precise: a condition variable's wait_until) and expires
// what is due. An arm() that brings the earliest deadline forward wakes it.
//
//   canopy::executor pool;
//   canopy::io::timer_thread timers(pool);   // before any sleep_for in pool's tasks
//   ...                                      // ~timer_thread, then ~executor
//
// ~timer_thread shuts the executor down first (shutdown() is idempotent),
// as ~reactor_timers does: sleeping tasks hold timers in this queue, so
// they are destroyed, and disarm their timers, while the queue still
// lives. Declared after the executor, it is destroyed first and that is
// all it takes. Destroy it on a thread that is not one of the executor's
// workers (as the executor itself).
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

#include "../../executor/executor.hpp"
#include "timer_queue.hpp"

namespace canopy::io {

class timer_thread {
 public:
  explicit timer_thread(executor& pool);
  ~timer_thread();
  timer_thread(const timer_thread&) = delete;
  timer_thread& operator=(const timer_thread&) = delete;

  [[nodiscard]] detail::timer_queue& queue() noexcept { return queue_; }

 private:
  static void on_earlier_deadline(void* self) noexcept;
  void run();

  canopy::detail::scheduler* core_;
  detail::timer_queue queue_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool poke_ = false;      // guarded by mutex_
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace canopy::io
