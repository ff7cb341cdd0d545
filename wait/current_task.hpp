// current_task — the executor of the task running on this thread, for the
// spawn functions of every task kind that run inside a task
// (canopy::spawn / try_spawn / spawn_detached of a coroutine task, a fiber).
// The waker of that task is current_waker() (wait/waker.hpp).
#pragma once

#include <stdexcept>
#include <string>

#include "../executor/scheduler.hpp"

namespace canopy::detail {

[[noreturn, gnu::cold, gnu::noinline]] inline void throw_outside_task(const char* what) {
  throw std::logic_error(std::string(what) +
                         " outside a running task: use executor::spawn from other threads");
}

// The throw is out of line so that this inlines into every spawn (out of
// line the whole check is a call on every fork).
inline detail::worker_context& current_worker_for(const char* what) {
  detail::worker_context* worker = detail::current_worker();
  if (worker == nullptr) [[unlikely]] {
    throw_outside_task(what);
  }
  return *worker;
}

inline detail::scheduler& current_core(const char* what) {
  return *current_worker_for(what).core;
}

}  // namespace canopy::detail
