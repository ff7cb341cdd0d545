// co_await canopy::await_all(handles): wait for many spawned children at once.
//
//   std::vector<canopy::join_handle<int>> children;
//   for (int i = 0; i < n; ++i) children.push_back(canopy::spawn(work(i)));
//   co_await canopy::await_all(children);            // every child has ended
//   int sum = 0;
//   for (auto& child : children) sum += co_await child;  // ready: no suspension
//
//   std::vector<int> values(children.size());
//   co_await canopy::await_all(children, values.begin());  // values, or rethrow
//
// Contract:
//   * Only inside a canopy::task (a coroutine task of an executor). `handles`
//     is a range (vector, array, span...) of join handles (join_handle<T> or
//     join_handle<T>) of children spawned on any executor; it must stay
//     alive and unchanged until the co_await returns. Every handle must be
//     valid (std::logic_error otherwise, thrown by await_all() itself).
//   * await_all(handles) returns once every child has ended, and leaves the
//     handles valid: read each with co_await (it does not suspend then) or
//     ready(). It never throws a child's exception.
//   * await_all(handles, out) (non-void T) then consumes every handle in
//     order: it writes the values to *out++ until the first child that
//     failed (threw, or was cancelled), discards the rest, and rethrows that
//     first failure (task_cancelled for a cancelled child); handles are
//     empty afterwards.
//   * If the awaiting task is cancelled while it waits, its children are
//     asked to cancel, and its frame (which holds the handles) is destroyed
//     when the last child ended.
//
// Cost: at most one suspension and one wake for the whole range, and no
// allocation. Before it suspends, the awaiter runs the children of its own
// executor that no worker has started yet, newest first (the newest is in
// this worker's LIFO slot), nested on this worker, as co_await on one
// handle does (scheduler::run_pending_inline); then it registers one
// countdown with every child still running. Each child's completion
// decrements it; the last one wakes the task. (Awaiting N handles one after
// the other may instead suspend and be woken N times.)
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <iterator>
#include <ranges>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "../atomics/atomics.hpp"
#include "../executor/join_handle.hpp"
#include "../executor/join_state.hpp"
#include "../executor/scheduler.hpp"
#include "../wait/wait_link.hpp"
#include "join_await.hpp"
#include "task.hpp"

namespace canopy {

namespace detail {

template <class T>
T handle_result_of(const join_handle<T>*);
// A range of join states (when_all's, of tasks with different results):
// awaited without output.
void handle_result_of(join_state_base* const*);

// T for a range of join_handle<T> (or of a type derived from it).
template <class Range>
using joined_result_t = decltype(handle_result_of(
    static_cast<const std::remove_cvref_t<std::ranges::range_reference_t<Range>>*>(nullptr)));

template <class Range>
concept join_handle_range = std::ranges::forward_range<Range> && requires {
  typename joined_result_t<Range>;
} && std::is_lvalue_reference_v<std::ranges::range_reference_t<Range>>;

// The join state an element of the awaited range stands for.
template <class T>
join_state_base* awaited_state(const join_handle<T>& handle) noexcept {
  return handle.state();
}
inline join_state_base* awaited_state(join_state_base* state) noexcept { return state; }

template <class Range, class Out = void>
class await_all_awaiter {
 public:
  using canopy_awaiter = void;
  using value_type = joined_result_t<Range>;
  struct no_output {};
  using output_type = std::conditional_t<std::is_void_v<Out>, no_output, Out>;

  explicit await_all_awaiter(Range& handles) : handles_(&handles) { check_valid(); }
  await_all_awaiter(Range& handles, output_type out) : handles_(&handles), out_(std::move(out)) {
    check_valid();
  }
  // g++ may move an awaiter before it suspends; nothing in it is live yet.
  await_all_awaiter(await_all_awaiter&& other) noexcept
      : handles_(other.handles_), out_(std::move(other.out_)) {}
  await_all_awaiter& operator=(await_all_awaiter&&) = delete;
  ~await_all_awaiter() = default;

  [[nodiscard]] bool await_ready() const noexcept { return std::ranges::empty(*handles_); }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    task_context& context = context_of(self);
    detail::scheduler* const core = detail::current_worker()->core;
    // Children nobody started yet run here, newest first; count the rest.
    std::uint32_t running = 0;
    for_each_newest_first([&](detail::join_state_base* state) {
      if (!state->ready() && state->has_task_on(core)) {
        static_cast<void>(core->run_pending_inline(state->task()));
      }
      running += state->ready() ? 0U : 1U;
    });
    if (running == 0) {
      return false;
    }
    // One more than the children registered below: the share this task
    // holds until it registered them all, so that the count cannot reach
    // zero (and fire) before every registration is done.
    // relaxed: published to the children by set_continuation's release.
    remaining_.store(running + 1, atomics::relaxed);
    link_.arm_for_current_task();
    link_.disarm = &cancel_children;
    link_.source = this;
    context.suspend_on(self, wait_kind::link, &link_);
    std::uint32_t settled = 1;  // our own share
    std::uint32_t registered = 0;
    for (auto& handle : *handles_) {
      detail::join_state_base* const state = awaited_state(handle);
      if (registered == running) {
        break;  // only the first `running` not-ready children were counted
      }
      if (state->ready()) {
        continue;
      }
      ++registered;
      if (!state->set_continuation(detail::continuation{&child_done, this})) {
        ++settled;  // ended meanwhile: registered nothing
      }
    }
    settled += running - registered;  // counted as running, ended before we got to them
    // acq_rel: the children's completions decrement the same word; whoever
    // takes it to zero saw every other decrement. If it is us, no child is
    // left to fire the link, and we go on without suspending.
    if (remaining_.fetch_sub(settled, atomics::acq_rel) == settled) {
      context.clear_wait();
      return false;
    }
    return true;
  }

  auto await_resume() {
    if constexpr (!std::is_void_v<Out>) {
      std::exception_ptr first_failure;
      for (auto& handle : *handles_) {
        try {
          if (first_failure) {
            static_cast<void>(take_and_detach(handle));
          } else {
            *out_ = take_and_detach(handle);
            ++out_;
          }
        } catch (...) {
          if (!first_failure) {
            first_failure = std::current_exception();
          }
        }
      }
      if (first_failure) {
        std::rethrow_exception(first_failure);
      }
      return out_;
    }
  }

 private:
  void check_valid() const {
    for (auto& handle : *handles_) {
      if (awaited_state(handle) == nullptr) {
        throw std::logic_error("canopy::await_all: the range holds an empty join handle");
      }
    }
  }

  template <class Visit>
  void for_each_newest_first(Visit visit) {
    if constexpr (std::ranges::bidirectional_range<Range>) {
      auto first = std::ranges::begin(*handles_);
      auto last = std::ranges::next(first, std::ranges::end(*handles_));
      while (last != first) {
        --last;
        visit(awaited_state(*last));
      }
    } else {
      for (auto& handle : *handles_) {
        visit(awaited_state(handle));
      }
    }
  }

  // A child's completion (join_state::complete runs it once).
  static void child_done(void* context) noexcept {
    auto* const self = static_cast<await_all_awaiter*>(context);
    // acq_rel: see await_suspend. Only the last one touches the awaiter
    // afterwards (the task cannot resume, or be freed, before it fires).
    if (self->remaining_.fetch_sub(1, atomics::acq_rel) == 1) {
      wait_link::fire(&self->link_);
    }
  }

  // The task is destroyed while it waits: registrations cannot be taken
  // back, so ask every child still running to stop early; the last one's
  // fire() then frees the frame (wait_link::abandon).
  static bool cancel_children(wait_link& link) noexcept {
    auto* const self = static_cast<await_all_awaiter*>(link.source);
    for (auto& handle : *self->handles_) {
      detail::join_state_base* const state = awaited_state(handle);
      if (state->has_task_on(link.core)) {
        state->cancel_and_wake();
      } else {
        state->request_cancel();  // another executor's: no wake through its core
      }
    }
    return false;
  }

  Range* handles_;
  [[no_unique_address]] output_type out_{};
  atomics::atomic<std::uint32_t> remaining_{0};
  wait_link link_;
};

}  // namespace detail

// Wait for every child in `handles` with one suspension; see the top of
// this file.
template <class Range>
requires detail::join_handle_range<Range>
[[nodiscard]] detail::await_all_awaiter<Range> await_all(Range& handles) {
  return detail::await_all_awaiter<Range>(handles);
}

// The same, then write the values to `out` (or rethrow the first failure).
template <class Range, std::output_iterator<detail::joined_result_t<Range>> Out>
requires detail::join_handle_range<Range> &&(!std::is_void_v<detail::joined_result_t<Range>>)
    [[nodiscard]] detail::await_all_awaiter<Range, Out> await_all(Range& handles, Out out) {
  return detail::await_all_awaiter<Range, Out>(handles, std::move(out));
}

}  // namespace canopy
