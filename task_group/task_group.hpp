// task_group<T> — a set of child tasks owned by one task (tokio's JoinSet):
// spawn children, take them as they finish, and never leave one running
// behind (include/canopy/task_group.hpp has the user's contract).
//
// Each child runs inside a small wrapper coroutine (group_child), spawned
// on the current executor. The `child_end` in the wrapper's parameter
// (child_args, after the child itself) is the one place a child's end is
// reported: a parameter (not a local) so that its destructor runs whether
// the child returned, threw, or was destroyed unfinished — cancelled,
// dropped at shutdown, even before its first run, when no local of the
// body exists yet — and, being destroyed after the child, once every
// destructor of the child ran; it records the outcome in the group's shared state
// (group_state, held by the group and by every wrapper, so a wrapper that
// ends after the group object went away still writes into live memory).
// The owner's waits (next, wait_all, close) suspend it on a wait_link that
// the child_end making the wait over fires; an owner cancelled (or dropped
// at shutdown) while it waits cancels the children and ends only after
// every one of them ended (group_wait.hpp). all_ended() is a wait source
// over the same state. group_state.hpp holds the shared state and child_end.
#pragma once

#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "../coroutine/await_all.hpp"
#include "../coroutine/coroutine.hpp"
#include "../executor/executor.hpp"
#include "group_state.hpp"
#include "group_wait.hpp"

namespace canopy {

class fiber_unwind;

namespace detail {

// fiber_unwind (fiber/fiber_task.hpp, which this header does not include:
// a group of coroutines needs no Boost.Context), named only where a fiber
// child is instantiated, when the fiber headers are in.
template <class Unwind, class>
struct dependent_type {
  using type = Unwind;
};

// A fiber child's callable: runs the user's fn on the fiber and puts what it
// returned or threw into the box (the child_end reads it when the wrapper
// ends). fiber_unwind passes through: the fiber is being cancelled.
template <class T, class Fn>
struct fiber_reporter {
  Fn fn;
  std::shared_ptr<typename group_state<T>::outcome> box;

  void operator()() {
    try {
      if constexpr (std::is_void_v<T>) {
        std::invoke(fn);
        box->value.emplace();
      } else {
        box->value.emplace(std::invoke(fn));
      }
    } catch (const typename dependent_type<fiber_unwind, Fn>::type&) {
      throw;
    } catch (...) {
      box->error = std::current_exception();
    }
  }
};

// The same fiber description with fn wrapped in a fiber_reporter.
template <class T, template <class> class Spec, class Fn>
auto reporting(Spec<Fn>&& spec, std::shared_ptr<typename group_state<T>::outcome> box) {
  return Spec<fiber_reporter<T, Fn>>{fiber_reporter<T, Fn>{std::move(spec.fn), std::move(box)},
                                     spec.stack_size};
}

// What awaiting a child gives: a task<U> or a handle to one (a join_handle<U>
// or a type derived from it, as a fiber's handle is) produces U. Spelled as a
// trait because decltype(co_await x) is not allowed (clang rejects it).
template <class U>
U produced_by(const task<U>*);
template <class U>
U produced_by(const join_handle<U>*);
template <class Awaited>
using produced_t = decltype(produced_by(static_cast<const Awaited*>(nullptr)));

// Child is a task<T>, a fiber description, or a callable making one (called
// here, so that a lambda's captures live in this frame as long as the child
// runs: a coroutine lambda reads them through its closure, a fiber's fn may
// borrow them too). A task is awaited inline (in the wrapper's frame). A
// fiber is spawned beside the wrapper and its handle awaited: cancelling the
// wrapper cancels it, and the wrapper (with its child_end) ends only after
// the fiber ended, its stack unwound. The fiber reports its own outcome
// through a box (fiber_reporter), so that an exception it throws after the
// group's stop was requested is reported, not lost to the cancel.
//
// The wrapper's one parameter holds the child and its end report, so that
// the order they are destroyed in is the members' (the child first) and
// not the compiler's: a coroutine's parameter copies go in an order the
// compiler chooses (g++ 12 the first first, clang 19 the last first), and
// a child_end destroyed before the callable would tell the owner that the
// child ended while the callable's captures were still to be destroyed.
template <class T, class Child>
struct child_args {
  child_end<T> end;  // last: reports the end once the rest is gone
  std::stop_token token;
  Child child;
};

template <class T, class Child>
task<void> group_child(child_args<T, Child> args) {
  Child& child = args.child;
  child_end<T>& end = args.end;
  // A group cancelled between this wrapper's spawn and launch() storing its
  // handle (cancel() from another thread cancels only the stored ones):
  // the child never starts, and `end` reports it cancelled.
  if (args.token.stop_requested()) {
    co_return;
  }
  try {
    auto made = [&] {
      if constexpr (std::is_invocable_v<Child&, std::stop_token>) {
        return child(args.token);
      } else if constexpr (std::is_invocable_v<Child&>) {
        return child();
      } else {
        return std::move(child);
      }
    }();
    using made_type = decltype(made);
    if constexpr (is_task<made_type>::value) {
      static_assert(
          std::is_same_v<std::decay_t<produced_t<made_type>>, std::decay_t<T>> || std::is_void_v<T>,
          "task_group<T>::spawn: the child must produce a T");
      if constexpr (std::is_void_v<T>) {
        co_await made;
        end.succeed();
      } else {
        end.succeed(co_await made);
      }
    } else {
      using fn_type = decltype(made.fn);
      static_assert(std::is_same_v<std::decay_t<std::invoke_result_t<fn_type&>>, std::decay_t<T>> ||
                        std::is_void_v<T>,
                    "task_group<T>::spawn: the child must produce a T");
      auto box = std::make_shared<typename group_state<T>::outcome>();
      end.report_from(box);
      using canopy::spawn;
      // Rethrows only what the fiber could not start with (no stack).
      co_await spawn(reporting<T>(std::move(made), std::move(box)));  // ADL: the fiber overloads
    }
  } catch (...) {
    end.fail(std::current_exception());
  }
}

}  // namespace detail

template <class T = void>
class task_group {
 public:
  using value_type = detail::group_value_t<T>;

  explicit task_group(task_group_options options = {})
      : state_(std::make_shared<detail::group_state<T>>(options)) {}
  task_group(const task_group&) = delete;
  task_group& operator=(const task_group&) = delete;
  // Cancels the children still running; cannot wait for them (co_await
  // close() first to wait). Their outcomes are discarded.
  ~task_group() {
    std::vector<detail::join_state_base*> cancelling;
    {
      const std::lock_guard lock(state_->mutex);
      if (state_->running != 0) {
        cancelling = state_->stop_locked();
      }
    }
    detail::group_state<T>::cancel_taken(cancelling);
  }

  // Spawn a child on the current executor: a canopy::task<T>, a fiber
  // (canopy::fiber(fn), <canopy/fiber.hpp>) whose fn returns T, or a callable
  // taking a std::stop_token (the group's) or nothing and returning one of
  // those. Inside a running task only (std::logic_error otherwise); spawn
  // errors as canopy::spawn; std::logic_error after close();
  // std::invalid_argument for an empty task, a null function pointer or an
  // empty std::function.
  template <class X>
  void spawn(X&& child) {
    using C = std::decay_t<X>;
    check_open("spawn");
    if constexpr (detail::is_task<C>::value) {
      static_assert(std::is_same_v<C, task<T>>,
                    "task_group<T>::spawn: the child must be a task<T>");
      if (!child.valid()) {
        throw std::invalid_argument("canopy::task_group::spawn: an empty task");
      }
    } else {
      detail::refuse_empty_callable(child, "canopy::task_group::spawn");
    }
    launch(C(std::forward<X>(child)), true);
  }

  // Spawn a child whose value is not kept: as spawn(x), but when the child
  // returns its value is destroyed at once and nothing of it stays in the
  // group (its bookkeeping is reused by the next child). An exception it
  // throws is kept and reported like any child's: by next()/try_next(), or
  // rethrown by wait_all()/close() (the others in failures()); a group
  // that lives as long as a server keeps one outcome per failure not taken
  // yet (kept()), none per success. Same errors as spawn.
  template <class X>
  void spawn_detached(X&& child) {
    using C = std::decay_t<X>;
    check_open("spawn_detached");
    if constexpr (detail::is_task<C>::value) {
      static_assert(std::is_same_v<C, task<T>>,
                    "task_group<T>::spawn_detached: the child must be a task<T>");
      if (!child.valid()) {
        throw std::invalid_argument("canopy::task_group::spawn_detached: an empty task");
      }
    } else {
      detail::refuse_empty_callable(child, "canopy::task_group::spawn_detached");
    }
    launch(C(std::forward<X>(child)), false);
  }

  // What next() and try_next() give: std::optional<T>, bool for void.
  using next_type = std::conditional_t<std::is_void_v<T>, bool, std::optional<T>>;

  // co_await group.next(): the next child to finish — its value (bool true
  // for task_group<void>), or its exception rethrown; std::nullopt (false)
  // once no child runs and every outcome was taken. Children cancelled by
  // the group are not reported (cancelled() counts them), nor the values of
  // spawn_detached children.
  auto next() -> task<next_type> {
    check_open("next");
    co_await detail::group_link_wait<T>(*state_, true);
    co_return deliver(take_finished());
  }

  // group.try_next(): as next() without waiting — the outcome of a child
  // that has finished and was not taken yet (its value, or its exception
  // rethrown), else std::nullopt (false for task_group<void>) at once, also
  // while children still run (running() tells them apart). Never suspends;
  // the owning task (or fiber) only, as next(); std::logic_error after
  // close().
  next_type try_next() {
    check_open("try_next");
    return deliver(take_finished());
  }

  // co_await group.wait_all(): wait until no child runs; the values not
  // taken by next() in the order the children finished (nothing for
  // task_group<void>). If some of them failed, the first failure is
  // rethrown after all ended and the others go to failures().
  auto wait_all() -> task<std::conditional_t<std::is_void_v<T>, void, std::vector<T>>> {
    check_open("wait_all");
    co_await detail::group_link_wait<T>(*state_, false);
    std::vector<value_type> values = collect();
    if constexpr (!std::is_void_v<T>) {
      co_return values;
    }
  }

  // co_await group.close(): cancel the children still running, wait until
  // every one has ended, then rethrow the first failure not taken yet (the
  // others go to failures()). After it, spawn, next and wait_all throw
  // std::logic_error; a second close() returns at once.
  task<void> close() {
    if (closed_) {
      co_return;
    }
    closed_ = true;
    cancel();
    co_await detail::group_link_wait<T>(*state_, false);
    collect();
  }

  // Cancel the running children without waiting (close() waits). Any thread.
  void cancel() noexcept {
    std::vector<detail::join_state_base*> cancelling;
    {
      const std::lock_guard lock(state_->mutex);
      cancelling = state_->stop_locked();
    }
    detail::group_state<T>::cancel_taken(cancelling);
  }

  // Requested by cancel(), close(), the destructor, and the first failure
  // under cancel_on_failure. Nothing polls it for you: a child suspended in
  // an await is destroyed by the cancel itself; code between awaits (a loop,
  // a run_blocking fn it was handed to) reads it.
  [[nodiscard]] std::stop_token stop_token() const noexcept { return state_->stop.get_token(); }

  // A wait source (wait/wait_source.hpp), ready once no child runs; it
  // takes nothing. The drain with a deadline, in the owning task:
  //   auto ended = group.all_ended();
  //   if (!co_await canopy::with_timeout(2s, ended)) group.cancel();
  //   auto values = co_await group.wait_all();  // after the cancelled ended
  // with_timeout on a wait source waits in the calling task itself (no
  // child task), so the owner rule holds; the task form,
  // with_timeout(d, group.wait_all()), would run wait_all in another task,
  // which the owner rule does not allow. cancel() is for good (children
  // spawned after it are cancelled too): a drain that cancelled ends the
  // group's use; close() it. Owner only, one wait at a time
  // (with next, wait_all, close); it must outlive its wait, and the group
  // must outlive it.
  [[nodiscard]] detail::group_wait<T> all_ended() noexcept {
    return detail::group_wait<T>(*state_);
  }

  // Children spawned and not ended yet.
  [[nodiscard]] std::size_t running() const {
    const std::lock_guard lock(state_->mutex);
    return state_->running;
  }
  // Children destroyed unfinished (cancelled by the group, or by shutdown).
  [[nodiscard]] std::size_t cancelled() const {
    const std::lock_guard lock(state_->mutex);
    return state_->cancelled;
  }
  // Outcomes the group holds for children that ended and were not taken
  // yet (by next, try_next, wait_all or close): the finished children's
  // values and exceptions; for spawn_detached children the exceptions only.
  // Any thread (a count under the group's mutex; the owner's next take
  // may change it at once).
  [[nodiscard]] std::size_t kept() const {
    const std::lock_guard lock(state_->mutex);
    return state_->finished.size();
  }
  // The failures wait_all() and close() did not rethrow (in finishing order).
  [[nodiscard]] const std::vector<std::exception_ptr>& failures() const noexcept {
    return failures_;
  }

 private:
  void check_open(const char* what) const {
    if (closed_) {
      throw std::logic_error(std::string("canopy::task_group::") + what + " after close()");
    }
  }

  std::optional<typename detail::group_state<T>::outcome> take_finished() {
    std::optional<typename detail::group_state<T>::outcome> taken;
    const std::lock_guard lock(state_->mutex);
    if (!state_->finished.empty()) {
      taken.emplace(std::move(state_->finished.front()));
      state_->finished.pop_front();
    }
    return taken;
  }

  // What next() and try_next() give for a taken outcome (or none).
  static next_type deliver(std::optional<typename detail::group_state<T>::outcome> taken) {
    if (taken && taken->error) {
      std::rethrow_exception(taken->error);
    }
    if constexpr (std::is_void_v<T>) {
      return taken.has_value();
    } else {
      if (!taken) {
        return std::nullopt;
      }
      return std::move(*taken->value);
    }
  }

  std::size_t reserve_slot() {
    const std::lock_guard lock(state_->mutex);
    if (!state_->free_slots.empty()) {
      const std::size_t slot = state_->free_slots.back();
      state_->free_slots.pop_back();
      return slot;
    }
    state_->slots.emplace_back();
    return state_->slots.size() - 1;
  }

  // Spawn the wrapper and record its handle. The wrapper may run (and end)
  // on another worker before the handle is stored: it marks its slot ended
  // then, and `running` was counted before the spawn.
  template <class Child>
  void launch(Child child, bool keep_value) {
    const std::size_t slot = reserve_slot();
    {
      const std::lock_guard lock(state_->mutex);
      state_->slots[slot].ended = false;
      ++state_->running;
    }
    join_handle<void> handle;
    try {
      handle = canopy::spawn(detail::group_child<T>(detail::child_args<T, Child>{
          detail::child_end<T>(state_, slot, keep_value), state_->stop.get_token(),
          std::move(child)}));
    } catch (...) {
      // The wrapper's frame (or the argument) was destroyed here, and its
      // child_end reported a cancelled child: a child that never was.
      const std::lock_guard lock(state_->mutex);
      if (state_->slots[slot].ended) {
        --state_->cancelled;
      } else {
        --state_->running;
      }
      state_->free_slots.push_back(slot);
      throw;
    }
    const std::lock_guard lock(state_->mutex);
    auto& stored = state_->slots[slot];
    if (stored.ended) {
      handle.detach();  // ended already
      state_->free_slots.push_back(slot);
      return;
    }
    stored.handle = std::move(handle);
    if (state_->stop.stop_requested()) {
      stored.handle.cancel();  // spawned into a cancelled group
    }
  }

  std::vector<value_type> collect() {
    std::deque<typename detail::group_state<T>::outcome> taken;
    {
      const std::lock_guard lock(state_->mutex);
      taken.swap(state_->finished);
    }
    std::vector<value_type> values;
    std::exception_ptr first;
    for (auto& each : taken) {
      if (each.error) {
        if (first) {
          failures_.push_back(std::move(each.error));
        } else {
          first = std::move(each.error);
        }
      } else {
        values.push_back(std::move(*each.value));
      }
    }
    if (first) {
      std::rethrow_exception(first);
    }
    return values;
  }

  std::shared_ptr<detail::group_state<T>> state_;
  std::vector<std::exception_ptr> failures_;
  bool closed_ = false;
};

}  // namespace canopy
