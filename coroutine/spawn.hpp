// Spawning a canopy::task<T>: spawn_coroutine, and the spawn APIs.
//
//   auto handle = pool.spawn(work());   // from any thread: join_handle<T>
//   auto child  = canopy::spawn(work()); // inside a running task: same executor
//
// How the spawned task runs, is cancelled and is destroyed is its body's
// part (coroutine/coroutine_body.hpp); a joined task starts as a
// lazy_child (coroutine/lazy_child.hpp).
#pragma once

#include <stdexcept>
#include <system_error>
#include <utility>

#include "../executor/errors.hpp"
#include "../executor/executor.hpp"
#include "../executor/join_state.hpp"
#include "../executor/scheduler.hpp"
#include "../executor/task_slot.hpp"
#include "../wait/current_task.hpp"
#include "../wait/task_handle.hpp"
#include "coroutine_body.hpp"
#include "lazy_child.hpp"
#include "task.hpp"

namespace canopy {

namespace detail {

// Spawn `work` on `core`; with `joined`, a join state is made for it (two
// references: the body's and the handle's), the root delivers its result
// there, and *state points at it. A detached task allocates nothing but
// its slot here. `spawner`: the calling worker's context when a task of
// `core` spawns (offered placement), else null.
template <class T>
detail::spawn_status spawn_coroutine(
    detail::scheduler& core, task<T>&& work, bool joined, detail::spawn_mode mode,
    detail::task_id* spawned, detail::join_state<T>** state = nullptr,
    detail::spawn_placement placement = detail::spawn_placement::anywhere,
    detail::worker_context* spawner = nullptr) {
  if (!work.valid()) {
    throw std::invalid_argument("canopy: spawning an empty canopy::task");
  }
  detail::pooled_join_state<T>* const made = joined ? make_join_state<T>(spawner) : nullptr;
  const typename coroutine_body<T>::handle_type root = work.release();
  detail::spawn_status status = detail::spawn_status::spawned;
  try {
    if (made != nullptr) {
      // Named before the slot is published: the body reads it at its build.
      root.promise().deliver_to(made);
    }
    if (joined && placement == detail::spawn_placement::offered) {
      // The fork's path: a lazy body (one pointer).
      status = core.spawn_child(&lazy_child<T>::table, root.address(), mode, spawned);
    } else if (joined) {
      status = core.spawn_body(&lazy_child<T>::table, &lazy_child<T>::construct, root.address(),
                               mode, spawned, placement);
    } else {
      status = core.spawn_body(&coroutine_body<T>::table, &construct_detached_body<T>,
                               root.address(), mode, spawned, placement);
    }
  } catch (...) {
    root.destroy();  // not spawned: the frame never ran
    delete made;
    throw;
  }
  if (status != detail::spawn_status::spawned) {
    root.destroy();
    delete made;
    return status;
  }
  if (state != nullptr) {
    *state = made;
  }
  return detail::spawn_status::spawned;
}

template <class T>
detail::spawn_status spawn_joined(
    detail::scheduler& core, task<T>&& work, detail::spawn_mode mode, join_handle<T>& out,
    detail::spawn_placement placement = detail::spawn_placement::anywhere,
    detail::worker_context* spawner = nullptr) {
  detail::task_id id;
  detail::join_state<T>* state = nullptr;
  if (const detail::spawn_status status =
          spawn_coroutine(core, std::move(work), true, mode, &id, &state, placement, spawner);
      status != detail::spawn_status::spawned) {
    return status;
  }
  state->set_task(&core, id);
  out = join_handle<T>(state, &core, id);
  return detail::spawn_status::spawned;
}

}  // namespace detail

template <class T>
struct ext::task_spawner<task<T>> {
  using handle_type = join_handle<T>;
  static std::error_code spawn(detail::scheduler& core, task<T>&& work, detail::spawn_mode mode,
                               handle_type& out) {
    return to_error_code(detail::spawn_joined(core, std::move(work), mode, out));
  }
  static std::error_code spawn_detached(detail::scheduler& core, task<T>&& work,
                                        detail::spawn_mode mode) {
    return to_error_code(detail::spawn_coroutine<T>(core, std::move(work), false, mode, nullptr));
  }
};

// Inside a running task (coroutine, fiber or callable): spawn `work` on the
// same executor. At capacity this throws spawn_error(errc::at_capacity)
// rather than block the worker; after shutdown began, errc::shut_down.
// (The handle is built once, in the caller's frame, not default-built and
// then assigned.)
//
// The child is offered on this worker's deque (fork-join: the spawner most
// likely awaits it soon): an idle worker steals it, or the spawner's await
// takes it back and runs it inside the awaiting task, or this worker runs
// it when it next looks for work. A sleeping worker is woken for it only
// as a hint (docs/architecture.md, "Offered callables").
template <class T>
join_handle<T> spawn(task<T> work) {
  detail::worker_context& worker = detail::current_worker_for("canopy::spawn(task)");
  detail::scheduler& core = *worker.core;
  detail::task_id id;
  detail::join_state<T>* state = nullptr;
  if (const detail::spawn_status status =
          detail::spawn_coroutine(core, std::move(work), true, detail::spawn_mode::block, &id,
                                  &state, detail::spawn_placement::offered, &worker);
      status != detail::spawn_status::spawned) {
    throw spawn_error(status);
  }
  state->set_task(&core, id);
  return join_handle<T>(state, &core, id);
}

// The same without blocking: at capacity, or after shutdown began, the
// result carries errc::at_capacity / errc::shut_down instead of a handle.
template <class T>
spawn_attempt<join_handle<T>> try_spawn(task<T> work) {
  spawn_attempt<join_handle<T>> attempt;
  detail::worker_context& worker = detail::current_worker_for("canopy::try_spawn(task)");
  attempt.error = to_error_code(detail::spawn_joined(*worker.core, std::move(work),
                                                     detail::spawn_mode::fail, attempt.handle,
                                                     detail::spawn_placement::offered, &worker));
  return attempt;
}

// The same without a join handle; an exception goes to the executor's
// on_detached_exception handler. (From outside a task:
// pool.spawn_detached(task).)
template <class T>
void spawn_detached(task<T> work) {
  if (const detail::spawn_status status =
          detail::spawn_coroutine<T>(detail::current_core("canopy::spawn_detached(task)"),
                                     std::move(work), false, detail::spawn_mode::block, nullptr);
      status != detail::spawn_status::spawned) {
    throw spawn_error(status);
  }
}

}  // namespace canopy
