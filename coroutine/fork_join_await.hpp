// Strict fork-join of coroutine tasks, by continuation stealing (libfork's
// design; the protocol is coroutine/fork_region.hpp):
//
//   canopy::task<long> fib(int n) {
//     if (n < 2) co_return n;
//     auto [a, b] = co_await canopy::join(canopy::call(fib, n - 1), canopy::call(fib, n - 2));
//     co_return a + b;
//   }
//   canopy::task<long> fib_sum(int count) {
//     std::vector<long> values = co_await canopy::join_n(
//         count, [](std::size_t i) { return canopy::call(fib, static_cast<int>(i)); });
//     long sum = 0;
//     for (const long value : values) sum += value;
//     co_return sum;
//   }
//
// * co_await canopy::join(c1, ..., cn), inside a canopy::task: each ci is a
//   canopy::call(f, args...) (f a coroutine function returning task<T>,
//   called when its child is launched) or a task<T> already made. The
//   first child runs at once on this thread, nested in the co_await; the
//   rest of the join waits on this worker's deque, where an idle worker may
//   steal it and run the next child. When every child ended on this
//   thread, the co_await returns without suspending. Returns std::pair (two
//   children) or std::tuple of the results in argument order,
//   std::monostate for task<void>. Every child has ended
//   when the co_await returns: they may borrow the awaiting coroutine's
//   locals.
// * co_await canopy::join_n(count, make): make(i), for i in [0, count), is
//   called when child i is launched (on the launching thread, one call at a
//   time) and returns a call or a task<T>. Returns std::vector<T> in index
//   order (void for task<void>); join_n(count, make, out) writes them to
//   the output iterator `out` instead.
// * Children and everything they join are fork-join children: they run
//   under the task that opened the outermost join (current_waker() names
//   it) on whichever worker runs them, and may co_await join, join_n,
//   other tasks (inline) and waits that are ready at once. A co_await that
//   would suspend them on anything else, and any co_await of a handle, a
//   race or a foreign awaitable, throws std::logic_error (spawn a task for
//   anything that waits). They may
//   spawn tasks and call the callable canopy::join.
// * Errors: every child runs to its end; then the first exception in
//   argument order is rethrown, the others dropped. A child that could not
//   be made (make or f threw, an empty task<T>) counts as one that threw.
//   A task cancelled while its join runs stays until every running child
//   ended; children not launched by then are not (their result is
//   task_cancelled).
// * Not for fibers (use the callable canopy::join) nor outside a task (use
//   canopy::block_on on a task that joins).
// join_n is in coroutine/fork_join_n_await.hpp.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "../executor/errors.hpp"
#include "../executor/fork_stack.hpp"
#include "../executor/scheduler.hpp"
#include "fork_region.hpp"
#include "promise_base.hpp"
#include "task.hpp"
#include "task_context.hpp"

namespace canopy {

namespace detail {

// A deferred call of a coroutine function: canopy::call(f, args...). The
// arguments are decayed and moved in, as std::bind_front does; the call
// happens when the join launches the child.
template <class F, class... Args>
class deferred_call {
 public:
  using task_type = std::invoke_result_t<F&, Args&&...>;

  template <class G, class... A>
  explicit deferred_call(G&& fn, A&&... args)
      : fn_(std::forward<G>(fn)), args_(std::forward<A>(args)...) {}

  // Makes the task (once).
  task_type make() {
    return std::apply([this](Args&... args) { return std::invoke(fn_, std::move(args)...); },
                      args_);
  }

 private:
  F fn_;
  std::tuple<Args...> args_;
};

// Whether a child's call must outlive the call of its function: a
// deferred call of a function object (a lambda) whose operator() is the
// coroutine keeps a pointer to that object in the child's frame.
template <class C>
inline constexpr bool call_outlives_launch = false;
template <class F, class... Args>
inline constexpr bool call_outlives_launch<deferred_call<F, Args...>> = std::is_class_v<F>;

template <class C>
struct fork_child_traits : std::false_type {};
template <class T>
struct fork_child_traits<task<T>> : std::true_type {
  using value_type = T;
  static task<T> make(task<T>& child) { return std::move(child); }
};
template <class F, class... Args>
requires is_task<typename deferred_call<F, Args...>::task_type>::value struct fork_child_traits<
    deferred_call<F, Args...>> : std::true_type {
  using value_type = typename deferred_call<F, Args...>::task_type::value_type;
  static task<value_type> make(deferred_call<F, Args...>& child) { return child.make(); }
};

// What join and join_n accept: a task<T> or a canopy::call of a function
// returning one.
template <class C>
concept fork_child = fork_child_traits<std::remove_cvref_t<C>>::value;

template <class C>
using fork_value_t = typename fork_child_traits<std::remove_cvref_t<C>>::value_type;

template <class T>
using fork_joined_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

// What join(c1, ..., cn) returns: a pair for two children, else a tuple.
template <class... Values>
struct fork_join_result {
  using type = std::tuple<Values...>;
};
template <class First, class Second>
struct fork_join_result<First, Second> {
  using type = std::pair<First, Second>;
};

// Child `child` made, pointed at `slot` and run on this thread, nested.
// Returns whether it ended (also when it could not be made: then the
// reason is in its slot) rather than waiting in a join another thread
// holds. For a caller that checked the region's cancel and prepared the
// child's link.
template <class T, class C>
[[gnu::always_inline]] inline bool run_fork_child(C& child, fork_result<T>& slot,
                                                  task_context* context) noexcept {
  // The first task frame make() allocates goes on this thread's stack
  // (fork_stack.hpp) and starts as it is made (promise_of's
  // initial_suspend): a call's own frame. A task<T> made before the join
  // stays where it is and is resumed below.
  // (Where children do not start as they are made, only the mark and
  // the type are written: the type tells the call's own task from a
  // scratch task of another type if one is dropped.)
  fork_stack_thread& here = fork_stack_state();
  here.mark = want_stack_frame;
  here.launch_type = &launch_type_tag<T>;
  if constexpr (children_start_when_made) {
    here.launch_result = promise_of<T>::fork_result_word(&slot);
    here.launch_context = context;
  }
  std::coroutine_handle<task_promise<T>> handle;
  bool started = false;
  try {
    task<T> made = fork_child_traits<C>::make(child);
    handle = made.release();
    started = children_start_when_made && fork_stack_state().launch_result == 0;
  } catch (...) {
    fork_stack_thread& failed = fork_stack_state();
    if (children_start_when_made && failed.launch_result == 0) [[unlikely]] {
      started_frame_not_returned();  // f threw after the child it made ran
    }
    failed.launch_result = 0;
    stack_frame_not_kept(std::exchange(failed.mark, 0));
    slot.error = std::current_exception();
    return true;
  }
  if (started) [[likely]] {
    // It ran, and ended or waits in a join another thread holds (which may
    // end the join and free the slot before make() returns here: nothing of
    // the join is read from here on). The frame that started was the first
    // on this stack, and any frame made after it came from the pool: the
    // returned task is the one that started if and only if its frame is a
    // stack's.
    if (!on_fork_stack(handle.address())) [[unlikely]] {
      started_frame_not_returned();
    }
    return child_ended_here();
  }
  fork_stack_thread& after = fork_stack_state();
  if constexpr (children_start_when_made) {
    after.launch_result = 0;
  }
  const std::uintptr_t consumed = std::exchange(after.mark, 0);
  if (consumed != reinterpret_cast<std::uintptr_t>(handle.address())) [[unlikely]] {
    stack_frame_not_kept(consumed);
  }
  if (!handle) {
    slot.error = std::make_exception_ptr(
        std::invalid_argument("canopy::join: an empty task (moved from or already awaited)"));
    return true;
  }
  handle.promise().fork_into(&slot, context);
  handle.resume();
  return child_ended_here();
}

template <class T>
fork_joined_t<T> take_fork_result(fork_result<T>& slot) {
  if constexpr (std::is_void_v<T>) {
    slot.take();
    return {};
  } else {
    return slot.take();
  }
}

// The part of a join's awaiter that does not know its children: open the
// region or join the running one, and run or hand over the children.
class fork_join_base : protected fork_record {
 public:
  using canopy_awaiter = void;
  using canopy_fork_join_awaiter = void;

  // A member, not static: co_await calls it on the awaiter object.
  // NOLINTNEXTLINE(readability-convert-member-functions-to-static)
  [[nodiscard]] bool await_ready() const noexcept { return false; }

  fork_join_base(fork_join_base&&) = delete;
  fork_join_base(const fork_join_base&) = delete;
  fork_join_base& operator=(const fork_join_base&) = delete;
  fork_join_base& operator=(fork_join_base&&) = delete;

 protected:
  template <start_fn Start>
  fork_join_base(typed_start<Start> start, std::uint32_t count) noexcept
      : fork_record(start, count) {}
  ~fork_join_base() = default;

  // co_await of the awaiter whose children Start makes: a region frame
  // joins its region, inline (its first child runs next, nested); any other
  // coroutine opens a region. Returns whether `self` suspends.
  template <start_fn Start, class Promise>
  [[gnu::always_inline]] bool suspend_with(std::coroutine_handle<Promise> self) noexcept {
    if constexpr (!is_task_promise<Promise>()) {
      std::terminate();
    } else {
      if (children() == 0) {
        return false;  // nothing to join (join_n of 0)
      }
      if (self.promise().in_region()) {
        return join_region<Start>(self, self.promise().context());
      }
      return open_region<Start>(self, self.promise().context());
    }
  }

  // A region frame `self`, whose context is `context`, joins its region:
  // the task that opened the region waits on it for as long as it runs,
  // and its recorded wait names the region. The children run nested, here;
  // when the join completes on this thread, `self` goes on without a
  // suspension. Inline in the joining frame with GCC, where a fork's launch
  // is most of its cost.
  template <start_fn Start>
  CANOPY_INLINE_THREAD_LOCAL_STEP bool join_region(std::coroutine_handle<> self,
                                                   task_context* context) noexcept {
    context_ = context;
    auto* const region = static_cast<fork_region*>(context->waiting_on);
    joiner_task = region->task();
    joiner_has_task = true;
    open(self, region);
    // The join completed here (its parent, self, goes on) or another
    // thread holds it now (self suspends; only locals from here).
    return !run_rest<Start>();
  }

  // Any other coroutine `self` opens a region and runs it on this worker.
  // Once a region, so never inline: in the joining frame's code it would
  // add to what every resumption of that frame saves and restores.
  template <start_fn Start>
  [[gnu::noinline]] bool open_region(std::coroutine_handle<> self,
                                     task_context* context) noexcept {
    context_ = context;
    worker_context* const worker = current_worker();
    region_.emplace(worker->core, worker->running, running_task_cancel_state());
    joiner_task = worker->running;
    joiner_has_task = worker->has_running;
    const region_scope scope(worker->joins);
    // Recorded before any child runs: a worker that ends the region after
    // this one left schedules the task, whose run then finds the region
    // wait over (fork_region::finished).
    context->suspend_on(self, wait_kind::fork_region, &*region_);
    open({}, &*region_);
    drive(run_rest<Start>());
    if (region_->leave()) {
      context->clear_wait();
      return false;  // the region ended on this thread's run: go on at once
    }
    return true;  // the worker that ends the region wakes the task
  }

  task_context* context_ = nullptr;
  std::optional<fork_region> region_;
};

template <class Result, class... Children>
class fork_join_awaiter : public fork_join_base {
  static constexpr std::size_t count = sizeof...(Children);

 public:
  explicit fork_join_awaiter(std::tuple<Children...>&& children)
      : fork_join_base(typed_start<&start>{}, static_cast<std::uint32_t>(count)),
        children_(std::move(children)) {}
  fork_join_awaiter(const fork_join_awaiter&) = delete;
  fork_join_awaiter& operator=(const fork_join_awaiter&) = delete;
  fork_join_awaiter(fork_join_awaiter&&) = delete;
  fork_join_awaiter& operator=(fork_join_awaiter&&) = delete;
  ~fork_join_awaiter() = default;

  template <class Promise>
  [[gnu::always_inline]] bool await_suspend(std::coroutine_handle<Promise> self) noexcept {
    return suspend_with<&start>(self);
  }
  Result await_resume() { return collect(std::index_sequence_for<Children...>{}); }

 private:
  static child_run start(fork_record& record, std::uint32_t index) noexcept {
    auto& self = static_cast<fork_join_awaiter&>(record);
    return self.start_at(index, std::index_sequence_for<Children...>{});
  }

  template <std::size_t... Is>
  child_run start_at(std::uint32_t index, std::index_sequence<Is...> /*indices*/) noexcept {
    child_run run = child_run::ended;
    static_cast<void>(((index == Is ? (run = start_one<Is>(), true) : false) || ...));
    return run;
  }

  template <std::size_t I>
  child_run start_one() noexcept {
    auto& slot = std::get<I>(slots_);
    if (cancelled()) {
      slot.error = std::make_exception_ptr(task_cancelled());
      return child_run::ended;
    }
    const bool offered = prepare_launch<&start>(slot.link);
    using child_type = std::tuple_element_t<I, std::tuple<Children...>>;
    if (!run_fork_child<fork_value_t<child_type>>(std::get<I>(children_), slot, context_)) {
      return child_run::suspended;
    }
    return offered ? child_run::ended_offered : child_run::ended;
  }

  template <std::size_t... Is>
  Result collect(std::index_sequence<Is...> /*indices*/) {
    // The first exception in argument order: every slot is checked before
    // any value is moved out.
    (rethrow_if_failed(std::get<Is>(slots_)), ...);
    return Result(take_fork_result(std::get<Is>(slots_))...);
  }

  template <class T>
  static void rethrow_if_failed(const fork_result<T>& slot) {
    if (slot.error) {
      std::rethrow_exception(slot.error);
    }
  }

  std::tuple<Children...> children_;
  std::tuple<fork_result<fork_value_t<Children>>...> slots_;
};

// What join(...) returns: the children, until co_await makes the awaiter
// in the awaiting coroutine's frame (in place: the awaiter does not move).
template <class Result, class... Children>
class [[nodiscard]] fork_join_call {
 public:
  explicit fork_join_call(Children&&... children) : children_(std::move(children)...) {}
  fork_join_awaiter<Result, Children...> operator co_await() && {
    return fork_join_awaiter<Result, Children...>(std::move(children_));
  }

 private:
  std::tuple<Children...> children_;
};

}  // namespace detail

// A deferred call of `fn(args...)`, a coroutine function returning a
// task<T>, for canopy::join and join_n: the call happens when its child is
// launched, on the launching thread.
template <class F, class... Args>
requires detail::is_task < std::invoke_result_t < std::decay_t<F>
&, std::decay_t<Args>&&... >> ::value [[nodiscard]] auto call(F&& fn, Args&&... args) {
  return detail::deferred_call<std::decay_t<F>, std::decay_t<Args>...>(std::forward<F>(fn),
                                                                       std::forward<Args>(args)...);
}

// co_await canopy::join(c1, c2, ...): see the top of this file.
// The children are taken by value: a task<T> lvalue is passed with std::move.
template <detail::fork_child... Children>
requires(sizeof...(Children) >= 1) [[nodiscard]] auto join(Children... children) {
  using result = typename detail::fork_join_result<
      detail::fork_joined_t<detail::fork_value_t<Children>>...>::type;
  return detail::fork_join_call<result, Children...>(std::move(children)...);
}

}  // namespace canopy
