// canopy::executor — the public face of the runtime.
//
//   canopy::executor pool;                       // one worker per hardware thread
//   auto answer = pool.spawn([] { return 42; }); // from any thread
//   int value = answer.get();                   // 42, or rethrows
//
// Thread-safety: every member may be called from any thread, including from
// inside tasks, except shutdown() and the destructor, which must not run on
// one of this executor's worker threads (they join those threads), and the
// run functions, which must not run inside one of its tasks.
//
// Embedding (docs/embedding.md): a thread the executor does not own — a
// server's event loop, main() — runs its tasks as the *host*:
//   run_once()        run at most one ready task
//   run_until_idle()  run ready tasks until none is ready
//   run_for(d), run_until(t)  run tasks, sleeping while none is ready, until the time is up
//   run()             the same until shutdown() begins (the host joins the pool)
//   notify_fd()       readable while the host has work: poll it in your own loop
//   post(fn)          run fn on the host thread (the loop thread), as a task
// and a coroutine continues on the host with co_await canopy::resume_on_host()
// (coroutine/host.hpp). With worker_count = 0 the host runs every task; with
// owned workers it runs only what is pinned to it (post, resume_on_host;
// what those spawn goes to the pool), except in run(), where it also takes
// the pool's tasks as one more worker. One host thread at a time (another
// caller gets errc::host_busy); all run functions return 0 once shutdown()
// began, and shutdown() then runs the pinned tasks itself (drain policy).
// With worker_count = 0, get()/wait_for() on a handle (and canopy::join)
// from another thread drive the executor themselves while they wait: they
// borrow the host role when it is free. Meanwhile run_once and
// run_until_idle return 0 (the joiner runs what is ready), and run_for,
// run_until and run wait, within their time, for the joiner to hand it back.
//
// Waiting behind a busy worker: a task spawned or woken on a worker runs on
// that worker next (its LIFO slot); it waits at most for the rest of the
// task that made it runnable (and one more task when the worker has taken
// 16 such tasks in a row) unless an idle awake worker steals it, and no
// sleeping worker is woken for it. A task that yields waits for at most
// one other task of its worker before any worker may take it.
//
// Errors:
//   * spawn() after shutdown() began throws spawn_error(errc::shut_down).
//   * At capacity (max_leaves full) spawn() blocks the calling thread until a
//     slot frees (shutdown() releases it with errc::shut_down; with
//     worker_count = 0 it runs the executor's tasks meanwhile, as get()
//     does, unless another thread is running it); on a worker
//     thread, where blocking could deadlock the pool, it throws
//     spawn_error(errc::at_capacity) instead. try_spawn() — for every task
//     kind: callables, coroutines, fibers (canopy::fiber(fn)) — never blocks
//     and returns the error code. capacity() and stats().live_tasks
//     tell how full the executor is.
//   * An invalid executor_config throws std::invalid_argument naming the field.
//   * A task's exception travels to get(); for detached tasks — spawned with
//     spawn_detached, or whose handle was dropped or detach()ed before the
//     task ended, whatever its kind — it goes to
//     executor_config::on_detached_exception.
// Every spawned task either runs or is destroyed at shutdown (counted in
// stats().dropped_tasks; its join handle reports task_cancelled); either way
// its destructor runs.
#pragma once

#include <chrono>
#include <concepts>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "callable_task.hpp"
#include "config.hpp"
#include "deadline.hpp"
#include "errors.hpp"
#include "host/host_budget.hpp"
#include "join_handle.hpp"
#include "scheduler.hpp"
#include "stats.hpp"

namespace canopy {

namespace ext {

// Extension point for task kinds that are not callables (a C++20
// canopy::task<T>, see coroutine/spawn.hpp; a fiber description,
// canopy::fiber(fn), see fiber/fiber_task.hpp): specialise
// ext::task_spawner<Task> with a `handle_type` and
//   static std::error_code spawn(detail::scheduler&, Task&&, detail::spawn_mode,
//                                handle_type& out);
//   static std::error_code spawn_detached(detail::scheduler&, Task&&, detail::spawn_mode);
// and executor::spawn / try_spawn / spawn_detached use them instead of the
// callable path.
template <class Task>
struct task_spawner {};

}  // namespace ext

namespace detail {

template <class Task>
concept spawnable_task = requires {
  typename ext::task_spawner<std::remove_cvref_t<Task>>::handle_type;
};

}  // namespace detail

namespace detail {

// A null function pointer or an empty std::function as a task's callable is
// refused at the spawn: called on a worker it would crash it (a null
// pointer) or fail far from the mistake (std::bad_function_call at get()).
template <class Fn>
struct is_std_function : std::false_type {};
template <class Signature>
struct is_std_function<std::function<Signature>> : std::true_type {};

template <class Fn>
void refuse_empty_callable(const Fn& fn, const char* verb) {
  if constexpr (std::is_pointer_v<Fn> || is_std_function<Fn>::value) {
    if (!static_cast<bool>(fn)) {
      throw std::invalid_argument(std::string(verb) +
                                  ": an empty callable (a null function pointer or an empty "
                                  "std::function)");
    }
  }
}

}  // namespace detail

// What try_spawn returns: the handle, or why the task was not accepted.
template <class Handle>
struct spawn_attempt {
  Handle handle;  // valid only when !error
  std::error_code error;
  explicit operator bool() const noexcept { return !error; }
};

class executor {
 public:
  executor() : executor(executor_config{}) {}
  explicit executor(executor_config config)
      : core_(detail::make_scheduler(std::move(config))) {}
  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;
  ~executor() = default;  // core's destructor runs shutdown()

  // Spawn fn() as a task; returns its join handle.
  template <class Fn>
  requires(!detail::spawnable_task<Fn> && std::invocable<std::decay_t<Fn>&>) auto spawn(Fn&& fn)
      -> join_handle<std::invoke_result_t<std::decay_t<Fn>&>> {
    using result = std::invoke_result_t<std::decay_t<Fn>&>;
    detail::refuse_empty_callable(fn, "canopy::executor::spawn");
    auto outcome = spawn_joined<result>(std::forward<Fn>(fn), detail::spawn_mode::block);
    if (outcome.error) {
      throw spawn_error(static_cast<errc>(outcome.error.value()));
    }
    return std::move(outcome.handle);
  }

  // Spawn a task of another kind (a canopy::task<T> coroutine, or a fiber:
  // canopy::fiber(fn, stack_size)); returns its handle (a join_handle<T>,
  // which is a join_handle<T>).
  template <class Task>
  requires detail::spawnable_task<Task>
  auto spawn(Task&& task) -> typename ext::task_spawner<std::remove_cvref_t<Task>>::handle_type {
    typename ext::task_spawner<std::remove_cvref_t<Task>>::handle_type handle;
    if (const std::error_code error = ext::task_spawner<std::remove_cvref_t<Task>>::spawn(
            *core_, std::forward<Task>(task), detail::spawn_mode::block, handle)) {
      throw spawn_error(static_cast<errc>(error.value()));
    }
    return handle;
  }

  // Like spawn(), but never blocks: at capacity or after shutdown it
  // returns the error instead (errc::at_capacity, errc::shut_down).
  template <class Task>
  requires detail::spawnable_task<Task>
  auto try_spawn(Task&& task)
      -> spawn_attempt<typename ext::task_spawner<std::remove_cvref_t<Task>>::handle_type> {
    spawn_attempt<typename ext::task_spawner<std::remove_cvref_t<Task>>::handle_type> attempt;
    attempt.error = ext::task_spawner<std::remove_cvref_t<Task>>::spawn(
        *core_, std::forward<Task>(task), detail::spawn_mode::fail, attempt.handle);
    return attempt;
  }

  template <class Fn>
  requires(!detail::spawnable_task<Fn> && std::invocable<std::decay_t<Fn>&>) auto try_spawn(Fn&& fn)
      -> spawn_attempt<join_handle<std::invoke_result_t<std::decay_t<Fn>&>>> {
    using result = std::invoke_result_t<std::decay_t<Fn>&>;
    detail::refuse_empty_callable(fn, "canopy::executor::try_spawn");
    return spawn_joined<result>(std::forward<Fn>(fn), detail::spawn_mode::fail);
  }

  // Spawn without a join handle (cheapest). Exceptions go to the handler.
  template <class Fn>
  requires(!detail::spawnable_task<Fn> &&
           std::invocable<std::decay_t<Fn>&>) void spawn_detached(Fn&& fn) {
    detail::refuse_empty_callable(fn, "canopy::executor::spawn_detached");
    using body = detail::callable_body<std::decay_t<Fn>, std::invoke_result_t<std::decay_t<Fn>&>>;
    body task{std::forward<Fn>(fn), nullptr};
    if (const detail::spawn_status status = spawn_body(task, detail::spawn_mode::block, nullptr);
        status != detail::spawn_status::spawned) {
      throw spawn_error(status);
    }
  }

  // Spawn a task of another kind (a coroutine, a fiber) without a handle;
  // its exception, if any, goes to the handler, as for a callable.
  template <class Task>
  requires detail::spawnable_task<Task>
  void spawn_detached(Task&& task) {
    if (const std::error_code error = ext::task_spawner<std::remove_cvref_t<Task>>::spawn_detached(
            *core_, std::forward<Task>(task), detail::spawn_mode::block)) {
      throw spawn_error(static_cast<errc>(error.value()));
    }
  }

  // Run fn() on the host thread (the next run_* call there), as a task of
  // this executor; its exception goes to on_detached_exception. Any thread.
  // Errors as spawn_detached (spawn_error: shut_down, or at_capacity on a
  // worker). A posted task that no host runs before shutdown() is run by
  // shutdown() (drain policy) or dropped (cancel_pending).
  template <class Fn>
  requires std::invocable < std::decay_t<Fn>
  & > void post(Fn&& fn) {
    detail::refuse_empty_callable(fn, "canopy::executor::post");
    using body = detail::callable_body<std::decay_t<Fn>, std::invoke_result_t<std::decay_t<Fn>&>>;
    body task{std::forward<Fn>(fn), nullptr};
    if (const detail::spawn_status status =
            spawn_body(task, detail::spawn_mode::block, nullptr, detail::spawn_placement::host);
        status != detail::spawn_status::spawned) {
      throw spawn_error(status);
    }
  }

  // The host role (see the top of this file). Each returns how many task
  // runs the calling thread made. Not from inside a task of this executor
  // (std::system_error errc::worker_thread); not while another thread's run
  // function holds the host role (errc::host_busy; a joiner that borrowed it
  // is waited for instead, see the top of this file). On return, notify_fd() is readable if
  // work for the host is left, else it becomes readable when some arrives.
  std::size_t run_once() {
    detail::host_budget budget;
    budget.max_tasks = 1;
    return core_->run_as_host(budget);
  }
  std::size_t run_until_idle() { return core_->run_as_host(detail::host_budget{}); }
  template <class Rep, class Period>
  std::size_t run_for(std::chrono::duration<Rep, Period> duration) {
    detail::host_budget budget;
    budget.wait_for_work = true;
    budget.deadline = detail::steady_deadline_after(duration);
    return core_->run_as_host(budget);
  }
  template <class Clock, class Duration>
  std::size_t run_until(std::chrono::time_point<Clock, Duration> deadline) {
    detail::host_budget budget;
    budget.wait_for_work = true;
    budget.deadline = detail::steady_deadline_at(deadline);  // min() and max() saturate
    return core_->run_as_host(budget);
  }
  std::size_t run() {
    detail::host_budget budget;
    budget.wait_for_work = true;
    budget.until_shutdown = true;
    return core_->run_as_host(budget);
  }
  // An eventfd, owned by the executor (do not read or close it): readable
  // while the host has work — a pinned task, or with worker_count = 0 any
  // ready task. Add it to your epoll/poll set and call run_until_idle()
  // (or run_once()) when it is readable.
  [[nodiscard]] int notify_fd() const noexcept { return core_->host_notify_fd(); }

  // Stop accepting tasks and finish per executor_config::on_shutdown.
  // Idempotent; blocks until every worker has exited.
  void shutdown() { core_->shutdown(); }

  [[nodiscard]] executor_stats stats() const { return core_->stats(); }
  [[nodiscard]] std::size_t worker_count() const noexcept { return core_->worker_count(); }
  // The most tasks alive at once (executor_config::max_leaves * 64 *
  // signals_per_leaf); stats().live_tasks says how many are alive now.
  [[nodiscard]] std::size_t capacity() const noexcept { return core_->capacity(); }

  // The runtime underneath, for task kinds built on it (coroutines, fibers).
  [[nodiscard]] detail::scheduler& core() noexcept { return *core_; }

 private:
  template <class Result, class Fn>
  spawn_attempt<join_handle<Result>> spawn_joined(Fn&& fn, detail::spawn_mode mode) {
    using body = detail::callable_body<std::decay_t<Fn>, Result>;
    // Two references (task + handle); owned here until the spawn succeeded,
    // so that a throwing copy of fn, or a failed spawn, frees it.
    std::unique_ptr<detail::pooled_join_state<Result>> owner(
        new detail::pooled_join_state<Result>());
    body task{std::forward<Fn>(fn), owner.get()};
    detail::task_id id;
    if (const detail::spawn_status status = spawn_body(task, mode, &id);
        status != detail::spawn_status::spawned) {
      return {join_handle<Result>(), to_error_code(status)};
    }
    detail::pooled_join_state<Result>* const state = owner.release();
    // Lets a coroutine or fiber that awaits the handle run the task at the
    // join if it has not started (scheduler::run_pending_inline).
    state->set_task(core_.get(), id);
    return {join_handle<Result>(state, core_.get(), id), {}};
  }

  template <class Body>
  detail::spawn_status spawn_body(
      Body& task, detail::spawn_mode mode, detail::task_id* spawned,
      detail::spawn_placement placement = detail::spawn_placement::anywhere) {
    return core_->spawn_body(
        &detail::body_vtable<Body>::table,
        [](void* storage, void* context) {
          detail::body_storage<Body>::construct(storage, std::move(*static_cast<Body*>(context)));
        },
        &task, mode, spawned, placement);
  }

  detail::owned_scheduler core_;
};

}  // namespace canopy
