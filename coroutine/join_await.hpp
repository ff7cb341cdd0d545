// co_await on a join handle: suspend the awaiting task (no worker held)
// until the spawned task ends; yield its value or rethrow its exception
// (task_cancelled if it was destroyed without completing).
//
//   auto child = canopy::spawn(work());
//   int value = co_await child;             // consumes the handle, like get()
//   int other = co_await canopy::spawn(more());
//
// Mechanism: a coroutine registers its task id (set_waiting_task) and the
// child's completion schedules it; a fiber registers wait_link::fire
// (wait/join_wait.hpp). If the child is already done, registration says so and
// nothing suspends.
// A handle may be awaited once.
#pragma once

#include <coroutine>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "../executor/block_pool.hpp"
#include "../executor/join_handle.hpp"
#include "../executor/join_state.hpp"
#include "../wait/join_wait.hpp"
#include "../wait/wait_link.hpp"
#include "spawn.hpp"
#include "task.hpp"

namespace canopy {

namespace detail {

// A coroutine awaiting a join handle of its own executor registers its task
// id with the join state (join_state_base::set_waiting_task): no wait_link,
// nothing in the frame that the completing side touches, so a cancelled or
// dropped awaiter is destroyed at once. Its body resumes it once the state
// is ready().
//
// A handle of another executor is awaited through a wait_link instead (in
// a small pooled block): the completing task then never keeps a pointer to
// this task's executor, which may be destroyed first. If this task is
// destroyed while waiting, the link is abandoned and the child's
// completion frees the frame (wait/wait_link.hpp) without touching
// this executor; the child is asked to cancel.
// A coroutine child that has not started yet is taken over by its awaiter
// instead (scheduler::take_over_pending): its slot is retired unrun
// and its frame runs inside the awaiting task, by symmetric transfer, as
// co_await on a task<T> runs one — no task run, no completion handshake
// (docs/fork_join.md). The awaiter then owns the frame, and the join state
// goes at once: the child delivers its result into the awaiter.
//
// Handle is join_handle<T>& (co_await on an lvalue handle: borrowed) or
// join_handle<T> (on an rvalue: moved into the awaiter); either way the
// handle is consumed, like get(). The awaiter keeps the state pointer (read
// at every step), a taken-over child's frame until it ends and the result
// it delivers, and, for a handle of another executor only, the link. It is
// not moved once awaited (the child holds the result's address).
template <class T, class Handle = join_handle<T>&>
class join_awaiter {
 public:
  using canopy_awaiter = void;

  explicit join_awaiter(Handle&& handle)
      : handle_(std::forward<Handle>(handle)), state_(checked(handle_)) {}
  join_awaiter(join_awaiter&& other) noexcept
      : handle_(std::forward<Handle>(other.handle_)),
        state_(other.state_),
        adopted_(std::exchange(other.adopted_, {})),
        adopted_frame_(other.adopted_frame_),
        foreign_(std::exchange(other.foreign_, nullptr)),
        taken_over_(std::exchange(other.taken_over_, false)),
        suspended_(std::exchange(other.suspended_, false)) {}
  join_awaiter& operator=(join_awaiter&&) = delete;
  // The link has fired (or was never used) by the time the awaiter goes:
  // the child is done with it. A taken-over child that has not ended (the
  // awaiting task is destroyed while the child is suspended) is destroyed
  // with it, as an inline-awaited task<T> is. A borrowed handle whose await
  // never resumed (the awaiting task was cancelled or destroyed while it
  // waited, and its body has cancelled the awaited task) is consumed all
  // the same, as the contract says: detached, its outcome discarded.
  ~join_awaiter() {
    delete foreign_;
    if (adopted_) {
      adopted_.destroy();
    }
    if constexpr (std::is_lvalue_reference_v<Handle>) {
      if (suspended_ && handle_.state() == state_) {
        handle_.detach();
      }
    }
  }

  // A child of this executor that has not started yet runs here instead of
  // this task suspending and being rescheduled when the child ends: a
  // coroutine child inside this task (taken over: await_suspend transfers
  // to it), any other kind nested, here, so that the await then goes on
  // without suspending. (Not in await_suspend returning this task's own
  // handle: where the compiler cannot make that transfer a tail call, as
  // under ThreadSanitizer, each such await would leave a frame on the
  // stack until the task next suspends.)
  // A task whose id its handle gave out keeps it: kind null adopts nothing.
  [[nodiscard]] bool await_ready() {
    if (state_->ready()) {
      return true;
    }
    const detail::worker_context* const worker = detail::current_worker();
    if (worker == nullptr || !state_->has_task_on(worker->core)) {
      return false;
    }
    // Not taken over (kind null: it runs nested, as a task): a child whose
    // id was given out, or one asked to cancel, whose body then destroys
    // the frame and completes the record "cancelled". Tested here, before
    // the claim, without a call into the slot: the handle is this
    // awaiter's, and a request made after the test finds the child
    // started, as one made after any start does.
    const bool takeable = !state_->identity_shared() && !state_->cancel_requested();
    // An adopted child's lazy body is its frame's address: copied here.
    const detail::scheduler::adoption adopt{takeable ? &lazy_child<T>::table : nullptr, nullptr,
                                            static_cast<void*>(&adopted_frame_),
                                            sizeof(adopted_frame_)};
    switch (worker->core->take_over_pending(state_->task(), adopt)) {
      case detail::scheduler::pending_run::adopted:
        taken_over_ = true;
        return false;
      case detail::scheduler::pending_run::ran:
        return state_->ready();
      case detail::scheduler::pending_run::none:
        break;
    }
    return false;
  }

  template <class Promise>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> self) {
    task_context& context = context_of(self);
    suspended_ = true;
    if (taken_over_) {
      return take_over(context, self);
    }
    const detail::worker_context* const worker = detail::current_worker();
    if (!state_->has_task_on(worker->core)) {
      return suspend_on_foreign(context, self) ? std::noop_coroutine()
                                               : std::coroutine_handle<>(self);
    }
    context.suspend_on(self, wait_kind::join, state_);
    if (!state_->set_waiting_task(worker->running)) {
      context.clear_wait();
      return self;  // completed meanwhile: continue at once
    }
    return std::noop_coroutine();
  }

  T await_resume() {
    if (adopted_) {
      // The child ran to its end inside this task (its frame freed itself):
      // the value it delivered here, or rethrow.
      adopted_ = {};
      return adopted_result_.take();
    }
    return take_and_detach(handle_);
  }

 private:
  // The link for a handle of another executor, from the block pool.
  struct foreign_wait final : join_wait<T> {
    using join_wait<T>::join_wait;
    static void* operator new(std::size_t size) { return allocate_block(size); }
    static void operator delete(void* block, std::size_t size) noexcept { free_block(block, size); }
  };

  bool suspend_on_foreign(task_context& context, std::coroutine_handle<> self) {
    foreign_ = new foreign_wait(state_);
    context.suspend_on(self, wait_kind::link, &foreign_->link());
    if (!foreign_->arm()) {
      context.clear_wait();
      delete std::exchange(foreign_, nullptr);
      return false;  // completed meanwhile
    }
    return true;
  }

  using child_handle = typename coroutine_body<T>::handle_type;

  // The slot of the child is retired; its body held the join state's
  // second reference, the handle the first: both are this awaiter's, and
  // nobody else can reach the state (its id went stale with the slot), so
  // it goes now. The child reports to this task's context, delivers its
  // result into this awaiter and resumes this task at its end.
  std::coroutine_handle<> take_over(task_context& context, std::coroutine_handle<> self) noexcept {
    static_cast<void>(handle_.let_go());
    discard_unstarted(state_);
    adopted_ = child_handle::from_address(adopted_frame_);
    adopted_.promise().await_inline(
        &adopted_result_, self, &context,
        false);  // not in a region: await_transform refuses handles there
    return adopted_;
  }

  static detail::join_state<T>* checked(join_handle<T>& handle) {
    if (!handle.valid()) {
      throw std::logic_error("canopy: co_await on an empty join handle");
    }
    return handle.state();
  }

  Handle handle_;
  detail::join_state<T>* state_;
  child_handle adopted_;           // a taken-over child, until it ends
  void* adopted_frame_ = nullptr;  // its frame, copied from its lazy body
  inline_result<T> adopted_result_{};
  foreign_wait* foreign_ = nullptr;
  bool taken_over_ = false;  // await_ready adopted the child; await_suspend transfers to it
  bool suspended_ = false;   // await_suspend ran: a destruction before await_resume consumes
};

}  // namespace detail

template <class T>
detail::join_awaiter<T> operator co_await(join_handle<T>& handle) {
  return detail::join_awaiter<T>(handle);
}

template <class T>
detail::join_awaiter<T, join_handle<T>> operator co_await(join_handle<T>&& handle) {
  return detail::join_awaiter<T, join_handle<T>>(std::move(handle));
}

}  // namespace canopy
