// coop_budget — the cooperative I/O budget: a task whose sockets are always
// ready (a peer that floods it, a listener under a connection storm) never
// suspends on its own, so on a busy worker it would hold that worker and
// every other connection queued there waits. As tokio's coop budget does,
// each socket operation of a task run takes one unit from a per-thread
// budget; the operation that finds it spent yields first (the task goes
// behind the worker's other ready tasks) and starts a new budget, and the
// worker polls its reactor after that run (worker_context's
// driver_poll_wanted), so that other sockets' readiness is seen. The yield
// comes before the operation touches the socket, so a task cancelled while
// it yields has taken no bytes.
//
//   co_await detail::coop_point();   // coroutine task forms (io/*.cpp)
//   fiber_coop_point();              // fiber forms (io/fiber/fiber_io.cpp)
//
// The budget is the thread's and is tied to the task that used it last:
// another task running on the thread starts a new one. A task that runs
// alone on its worker and always waits yields once per budget, which costs
// it one pass through the yield queue. A fork-join child (which may not
// suspend) and a thread that is not a worker never yield here.
// Internal (canopy::io::detail): the library's sources only.
#pragma once

#include <coroutine>
#include <cstdint>

#include "../coroutine/promise_base.hpp"
#include "../coroutine/task_context.hpp"
#include "../executor/scheduler.hpp"
#include "../executor/task_slot.hpp"

namespace canopy::io::detail {

// Socket operations a task may make in one run before it yields.
inline constexpr std::uint32_t coop_budget_operations = 128;

struct coop_budget {
  canopy::detail::task_id task{};
  std::uint32_t used = 0;
};

inline thread_local coop_budget thread_coop_budget;

// Takes a unit of the running task's budget: false when it is spent (the
// caller yields; the next budget starts then).
[[nodiscard]] inline bool coop_take() noexcept {
  canopy::detail::worker_context* const worker = canopy::detail::current_worker();
  if (worker == nullptr || !worker->has_running) {
    return true;
  }
  coop_budget& budget = thread_coop_budget;
  if (budget.task.slot != worker->running.slot ||
      budget.task.generation != worker->running.generation) {
    budget.task = worker->running;
    budget.used = 0;
  }
  if (++budget.used <= coop_budget_operations) {
    return true;
  }
  budget.used = 0;
  // The worker polls its driver after this run: the sockets that kept this
  // task busy also kept the worker from polling for the others.
  worker->driver_poll_wanted = true;
  return false;
}

// co_await coop_point(): a yield when the budget is spent, else nothing.
struct coop_point {
  using canopy_awaiter = void;

  [[nodiscard]] bool await_ready() const noexcept { return coop_take(); }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) noexcept {
    if constexpr (canopy::detail::is_task_promise<Promise>()) {
      if (self.promise().in_region()) {
        return false;  // a fork-join child may not suspend: it goes on
      }
    }
    canopy::detail::task_context& context = canopy::detail::context_of(self);
    context.suspend_on(self, canopy::detail::wait_kind::none, nullptr);
    context.signal = canopy::detail::run_outcome::yielded;
    return true;
  }

  void await_resume() const noexcept {}
};

}  // namespace canopy::io::detail
