// canopy::join and canopy::parallel_invoke — fork-join for plain callables
// (rayon's join, oneTBB's parallel_invoke).
//
//   auto [left, right] = canopy::join([&] { return sum(lo, mid); },
//                                     [&] { return sum(mid, hi); });
//   auto [a, b, c] = canopy::parallel_invoke(f, g, h);
//   auto [x, y] = canopy::join(pool, f, g);   // from a thread outside `pool`
//
// What runs where:
//   * canopy::join(f, g) inside a task (a callable, a coroutine, a fiber, or
//     a task the host thread runs) of an executor: g is offered on the
//     calling thread's deque (executor/offer_deque.hpp), f runs at once on
//     the calling thread, then g is taken back and run here if no idle
//     worker stole it meanwhile. parallel_invoke(f1, ..., fn) runs f1 here
//     and offers f2..fn, taking them back in that order. A thief runs a
//     callable under the joining task (current_waker() names it). Joins
//     nested more than offer_deque::capacity deep offer the rest as tasks.
//     The wake for an offered callable is a hint (rayon's): a worker about
//     to sleep may miss it, and then the joiner runs it at its join.
//   * canopy::join(pool, f, g) / parallel_invoke(pool, f1, ...) from a thread
//     that is not a worker of any executor: every callable runs as a task
//     of `pool` and the caller blocks until all of them ended (on an
//     executor with no owned workers, worker_count = 0, the caller runs
//     the executor's tasks as its host meanwhile, as join_handle::join
//     does, unless another thread is the host). From a task of `pool`
//     itself it behaves as the first form.
// Results: std::pair (join) or std::tuple (parallel_invoke) of the
// callables' results in argument order; a callable returning void
// contributes std::monostate (as canopy::when_all; rayon returns `()`).
// The callables are invoked as lvalues and must stay valid until the call
// returns, which it does only after every one of them ended: a join never
// leaves a callable running behind it, so they may capture the caller's
// locals by reference.
//
// Errors:
//   * An empty callable (a null function pointer, an empty std::function)
//     throws std::invalid_argument naming the call before anything runs.
//   * If callables throw, the join still waits for all of them, then
//     rethrows the exception of the first one in argument order that threw;
//     the others' exceptions are dropped.
//   * A callable offered to the pool that shutdown (cancel_pending) destroys
//     before it ran makes the join throw canopy::task_cancelled, once the
//     others ended (only possible from outside: on a worker the joiner runs
//     an untaken callable itself).
//   * On a worker, a callable that cannot become a task (every slot taken:
//     errc::at_capacity, or shutdown began) simply runs on the calling
//     thread after the first: the join never fails for lack of capacity.
//     From outside, at capacity the spawn blocks until a slot frees (as
//     executor::spawn); after shutdown began the join throws
//     spawn_error(errc::shut_down) once the callables already spawned ended.
//   * Inside a fiber, the callables must not suspend that fiber
//     (this_fiber::await, yield, wait_on): the join holds its thread, and
//     its offered callables know that thread as the joiner. A suspension
//     inside the first callable that resumed the fiber on another thread,
//     or on the same thread after another join left its callable above
//     this one's, is detected when the callable returns and aborts the
//     process with a message on stderr. (A coroutine cannot suspend inside
//     a plain callable.)
//   * canopy::join(f, g) on a thread that is running no task of any executor
//     throws std::logic_error (use the form that names the executor).
//     canopy::join(pool, f, g) on a worker of another executor throws
//     std::system_error(errc::worker_thread): blocking that worker could
//     deadlock its pool (as join_handle::join()).
//
// Waiting. A plain callable cannot suspend, so a joiner whose callable was
// taken by another worker waits on its thread. Meanwhile it helps, as
// rayon's join does: it runs callables other joins offered (stolen from
// the other threads' deques), on a worker thread's own stack only and while
// half of it is free; when a spin and a yield phase found none, it sleeps
// on a futex until the last callable ended. A worker waits only for
// callables other threads are running, each of which waits only for its
// own callables, so waits follow the join tree downwards and cannot form a
// cycle; a helped callable belongs to another subtree.
//
// Cost: nothing on the heap. Each offered callable is a deque entry: a
// pointer to its record on the joiner's stack (the callable, its result,
// the countdown; results, exceptions and the countdown live there too). The
// offer is two plain stores, the take-back one locked exchange; a callable
// the joiner takes back runs as a plain call and ends with a plain store,
// one a thief took ends with one locked decrement. Past the deque's
// capacity an offered callable is a task-slot body instead, retired unrun
// when taken back (scheduler::take_back_unrun).
#pragma once

#include <array>
#include <chrono>
#include <climits>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "../executor/errors.hpp"
#include "../executor/executor.hpp"
#include "../executor/scheduler.hpp"
#include "../executor/join_worker.hpp"
#include "../executor/task_slot.hpp"
#include "join_branch.hpp"

namespace canopy {

namespace detail {

template <class... Fns>
class fork_join {
 public:
  static constexpr std::size_t count = sizeof...(Fns);
  using result_type = std::tuple<detail::joined_value_t<std::invoke_result_t<Fns&>>...>;

  explicit fork_join(Fns&... fns) noexcept : fns_(fns...) {}

  // On a worker (or the host thread running a task) of `core`; `self` is
  // the calling thread's current_worker().
  [[gnu::always_inline]] result_type run_on_worker(detail::scheduler& core,
                                                   const detail::worker_context* self) {
    join_countdown countdown(static_cast<std::uint32_t>(count - 1));
    offered_ids offered;
    // Offered last to first: the second callable is pushed last, so it is
    // the deque's newest entry, the first taken back.
    offer_reversed(core, countdown, self, offered, std::make_index_sequence<count - 1>{});

    std::get<0>(outcomes_).run(std::get<0>(fns_));
    if (detail::current_worker() != self) [[unlikely]] {
      // A fiber that called join was suspended inside the first callable
      // and resumed on another thread: the offered callables still name
      // the old thread as the joiner.
      fail_suspended_fiber();
    }
    // Callables that could not be offered (no slot, or shutdown) run here.
    run_unoffered(std::make_index_sequence<count>{});
    // Done when every callable not run here has counted down.
    const auto all_ended = [this, &countdown] {
      return countdown.remaining() == finished_here(std::make_index_sequence<count>{});
    };
    take_back(core, *self, offered, all_ended, std::make_index_sequence<count>{});
    if (!all_ended()) {
      countdown.forgive(finished_here(std::make_index_sequence<count>{}));
      // Waits follow the join tree downwards, so running a callable another
      // join offered cannot wait for this one: no cycle (docs/fork_join.md).
      countdown.wait([self] { return self->joins->help(); });
    }
    return collect(std::make_index_sequence<count>{});
  }

  // From a thread that runs no task: every callable becomes a task of
  // `core` and this thread blocks until all ended.
  result_type run_from_outside(executor& pool) {
    detail::scheduler& core = pool.core();
    join_countdown countdown(static_cast<std::uint32_t>(count));
    detail::spawn_status failure = detail::spawn_status::spawned;
    std::exception_ptr thrown;
    offer_all(core, countdown, failure, thrown, std::make_index_sequence<count>{});
    if (core.worker_count() == 0) {
      drive_as_host(core, countdown);
    }
    countdown.wait([] { return false; });  // an outside thread has no work of the pool's to run
    if (thrown) {
      std::rethrow_exception(thrown);
    }
    if (failure != detail::spawn_status::spawned) {
      throw spawn_error(failure);
    }
    return collect(std::make_index_sequence<count>{});
  }

 private:
  template <std::size_t I>
  using fn_t = std::tuple_element_t<I, std::tuple<Fns...>>;
  template <std::size_t I>
  using body_t = branch_body<fn_t<I>, std::invoke_result_t<fn_t<I>&>>;
  template <std::size_t I>
  using job_t = branch_job<fn_t<I>, std::invoke_result_t<fn_t<I>&>>;
  // The ids of callables offered as tasks (past the deque's capacity),
  // callable count - 1 - k at k; written only for those.
  using offered_ids = std::array<deferred<detail::task_id>, count == 1 ? 1 : count - 1>;

  // Offer callable I as a task; false if it could not be (spawn_status or
  // an exception from the slot allocation).
  template <std::size_t I>
  detail::spawn_status offer(detail::scheduler& core, join_countdown& countdown,
                             const detail::worker_context* joiner, detail::spawn_mode mode,
                             detail::task_id& id) {
    body_t<I> body{&std::get<I>(fns_), &std::get<I>(outcomes_), &countdown, joiner};
    return core.spawn_body(&body_t<I>::table, &body_t<I>::construct, &body, mode, &id);
  }

  template <std::size_t... Is>
  void offer_reversed(detail::scheduler& core, join_countdown& countdown,
                      const detail::worker_context* self, offered_ids& offered,
                      std::index_sequence<Is...> /*indices*/) {
    bool stopped = false;
    const auto offer_one = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      if (stopped) {
        return;
      }
      job_t<I>& job = *::new (static_cast<void*>(&std::get<I>(jobs_).value))
                          job_t<I>(*self, std::get<I>(fns_), std::get<I>(outcomes_), countdown);
      if (self->joins->offer_job(core, job)) {
        placed_[I] = placement::deque;
        return;
      }
      // The deque is full (joins nested deeper than its capacity): a task.
      detail::task_id id;
      detail::spawn_status status = detail::spawn_status::at_capacity;
      try {
        status = offer<I>(core, countdown, self, detail::spawn_mode::fail, id);
      } catch (...) {
        status = detail::spawn_status::at_capacity;  // no slot could be made: run it here instead
      }
      if (status != detail::spawn_status::spawned) {
        stopped = true;
        return;
      }
      ::new (static_cast<void*>(&offered[count - 1 - I].value)) detail::task_id(id);
      placed_[I] = placement::task;
    };
    (offer_one(std::integral_constant<std::size_t, count - 1 - Is>{}), ...);
  }

  // Take back the offered callables nobody took, in argument order, and
  // run each here as a plain call: its slot is retired unrun, so neither
  // the task's run nor its body is paid for (with tracing on, the core runs
  // it as a nested task instead, and run_entry marks it finished here).
  // offered[k] holds callable count - 1 - k (offer_reversed).
  template <class AllEnded, std::size_t... Is>
  void take_back(detail::scheduler& core, const detail::worker_context& self,
                 const offered_ids& offered, const AllEnded& all_ended,
                 std::index_sequence<Is...> /*indices*/) {
    const auto take_back_one = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      if constexpr (I > 0) {
        if (placed_[I] == placement::here || all_ended()) {
          return;
        }
        const bool taken_back = placed_[I] == placement::deque
                                    ? self.joins->take_back_job(std::get<I>(jobs_).value)
                                    : core.take_back_unrun(offered[count - 1 - I].value) ==
                                          detail::scheduler::pending_run::adopted;
        if (taken_back) {
          std::get<I>(outcomes_).run(std::get<I>(fns_));
          std::get<I>(outcomes_).finished_here = true;
        }
      }
    };
    (take_back_one(std::integral_constant<std::size_t, Is>{}), ...);
  }

  template <std::size_t... Is>
  void run_unoffered(std::index_sequence<Is...> /*indices*/) {
    const auto run_one = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      if constexpr (I > 0) {
        if (placed_[I] == placement::here) {
          std::get<I>(outcomes_).run(std::get<I>(fns_));
          std::get<I>(outcomes_).finished_here = true;
        }
      }
    };
    (run_one(std::integral_constant<std::size_t, Is>{}), ...);
  }

  // How many callables after the first this thread ran itself.
  template <std::size_t... Is>
  [[nodiscard]] std::uint32_t finished_here(std::index_sequence<Is...> /*indices*/) const noexcept {
    return ((Is > 0 && std::get<Is>(outcomes_).finished_here ? 1U : 0U) + ...);
  }

  template <std::size_t... Is>
  void offer_all(detail::scheduler& core, join_countdown& countdown,
                 detail::spawn_status& failure, std::exception_ptr& thrown,
                 std::index_sequence<Is...> /*indices*/) {
    const auto offer_one = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      if (failure != detail::spawn_status::spawned || thrown) {
        countdown.count_down();  // never offered: nothing will count it
        return;
      }
      detail::task_id id;
      try {
        failure = offer<I>(core, countdown, nullptr, detail::spawn_mode::block, id);
      } catch (...) {
        thrown = std::current_exception();
      }
      if (failure != detail::spawn_status::spawned || thrown) {
        countdown.count_down();
      }
    };
    (offer_one(std::integral_constant<std::size_t, Is>{}), ...);
  }

  // With no owned workers nobody else would run the callables: run the
  // executor's ready tasks on this thread (the host role, as
  // join_handle::join does) until they ended. If a run function holds the
  // role, or shutdown began, that thread or shutdown runs (or drops) them
  // and the caller just waits; if another joiner holds it, it hands the
  // role back when its own wait ends, so this one tries again meanwhile.
  static void drive_as_host(detail::scheduler& core, const join_countdown& countdown) {
    for (;;) {
      const detail::host_drive drive = core.run_host_until(
          [](const void* waited) noexcept {
            return static_cast<const join_countdown*>(waited)->done();
          },
          &countdown, -1);
      if (countdown.done() ||
          (drive != detail::host_drive::ran && drive != detail::host_drive::held_by_joiner)) {
        return;
      }
      if (drive == detail::host_drive::held_by_joiner) {
        std::this_thread::sleep_for(detail::scheduler::host_role_retry);
      }
    }
  }

  [[noreturn]] static void fail_suspended_fiber() noexcept {
    std::fputs(
        "canopy::join / parallel_invoke: the calling fiber was suspended inside the first "
        "callable; the callables of a join must not suspend the fiber that joins "
        "(this_fiber::await, yield, wait_on)\n",
        stderr);
    std::abort();
  }

  template <std::size_t... Is>
  result_type collect(std::index_sequence<Is...> /*indices*/) {
    (std::get<Is>(outcomes_).rethrow_if_failed(), ...);
    return result_type(std::get<Is>(outcomes_).value()...);
  }

  std::tuple<Fns&...> fns_;
  std::tuple<branch_outcome<std::invoke_result_t<Fns&>>...> outcomes_;
  // Each offered callable's deque entry, constructed when it is offered
  // (element 0 never is).
  std::tuple<deferred<branch_job<Fns, std::invoke_result_t<Fns&>>>...> jobs_;
  // Where each callable went: kept here (element 0, and those after a
  // failed offer: the offers go from the last callable down and stop at
  // the first failure), into the deque, or to a task (its id in `offered`).
  enum class placement : std::uint8_t { here, deque, task };
  std::array<placement, count> placed_{};
};

// Inlined into canopy::join and parallel_invoke, so that a recursion of
// joins is one function whose two results come back in registers.
template <class... Fns>
[[gnu::always_inline]] inline auto fork_join_here(const char* what, Fns&... fns) ->
    typename fork_join<Fns...>::result_type {
  (refuse_empty_callable(fns, what), ...);
  detail::worker_context* const worker = detail::current_worker();
  if (worker == nullptr) {
    throw std::logic_error(std::string(what) +
                           " outside a task of a canopy executor: name the executor "
                           "(canopy::join(pool, f, g), canopy::parallel_invoke(pool, ...))");
  }
  return fork_join<Fns...>(fns...).run_on_worker(*worker->core, worker);
}

template <class... Fns>
auto fork_join_on(executor& pool, const char* what, Fns&... fns) ->
    typename fork_join<Fns...>::result_type {
  (refuse_empty_callable(fns, what), ...);
  detail::scheduler& core = pool.core();
  if (detail::worker_context* const worker = detail::current_worker(); worker != nullptr) {
    if (worker->core == &core) {
      return fork_join<Fns...>(fns...).run_on_worker(core, worker);
    }
    throw std::system_error(make_error_code(errc::worker_thread),
                            std::string(what) +
                                " on a worker thread of another canopy executor would block "
                                "that worker");
  }
  return fork_join<Fns...>(fns...).run_from_outside(pool);
}

}  // namespace detail

// Inside a task: run f here and g on whichever worker gets to it first
// (most likely this one, right after f). Returns {f(), g()}.
template <class F, class G>
requires std::invocable < std::remove_reference_t<F>
& > &&std::invocable<std::remove_reference_t<G>&> auto join(F&& f, G&& g)
          -> std::pair<detail::joined_value_t<std::invoke_result_t<std::remove_reference_t<F>&>>,
                       detail::joined_value_t<std::invoke_result_t<std::remove_reference_t<G>&>>> {
  auto [first, second] = detail::fork_join_here("canopy::join(f, g)", f, g);
  return {std::move(first), std::move(second)};
}

// From any thread: on a worker of `pool` as above; elsewhere both run as
// tasks of `pool` and the caller blocks until both ended.
template <class F, class G>
requires std::invocable < std::remove_reference_t<F>
& > &&std::invocable<std::remove_reference_t<G>&> auto join(executor& pool, F&& f, G&& g)
          -> std::pair<detail::joined_value_t<std::invoke_result_t<std::remove_reference_t<F>&>>,
                       detail::joined_value_t<std::invoke_result_t<std::remove_reference_t<G>&>>> {
  auto [first, second] = detail::fork_join_on(pool, "canopy::join(pool, f, g)", f, g);
  return {std::move(first), std::move(second)};
}

// Inside a task: run the first callable here and offer the others.
template <class... Fns>
requires(sizeof...(Fns) >= 1 &&
         (std::invocable<std::remove_reference_t<Fns>&> && ...)) auto parallel_invoke(Fns&&... fns)
    -> std::tuple<detail::joined_value_t<std::invoke_result_t<std::remove_reference_t<Fns>&>>...> {
  return detail::fork_join_here("canopy::parallel_invoke", fns...);
}

// From any thread, as join(pool, f, g).
template <class... Fns>
requires(sizeof...(Fns) >= 1 && (std::invocable<std::remove_reference_t<Fns>&> &&
                                 ...)) auto parallel_invoke(executor& pool, Fns&&... fns)
    -> std::tuple<detail::joined_value_t<std::invoke_result_t<std::remove_reference_t<Fns>&>>...> {
  return detail::fork_join_on(pool, "canopy::parallel_invoke(pool, ...)", fns...);
}

}  // namespace canopy
