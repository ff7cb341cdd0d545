// task<T> — a lazy C++20 coroutine that becomes an executor task when spawned.
//
//   canopy::task<int> answer() { co_return 42; }
//   canopy::task<int> twice() { co_return 2 * co_await answer(); }   // inline
//   auto handle = pool.spawn(twice());                                 // a task
//
// * Lazy: creating a task<T> runs nothing. It runs when it is co_awaited
//   (inline, in the awaiting task, by symmetric transfer — no spawn, no
//   scheduling) or when it is spawned (executor::spawn, canopy::spawn).
// * A task<T> owns its coroutine frame; it is move-only. A task runs once:
//   co_await consumes it (an awaited lvalue task is empty afterwards), and
//   its frame, parameters included, is gone when the co_await yields.
//   co_await of an empty task (default-made, moved from, already awaited)
//   throws std::invalid_argument in the awaiting task.
// * An exception leaving the body is stored and rethrown where the task is
//   co_awaited (inline) or joined (spawned).
//
// How a spawned coroutine runs (coroutine/coroutine_body.hpp has the body): the slot
// holds the root coroutine handle and a task_context. Every coroutine of the
// task — the root and the tasks it awaits inline — points at that context.
// An awaiter that suspends records, in the context, which coroutine to
// resume (`resume_point`), how the run ends (`signal`) and what a wake
// must have completed (`armed`: a wait_link that must have fired, or
// `joining`: a join state that must be ready); the body's run() returns
// that signal to the worker. So a waiting task holds no worker and no thread stack.
// A task that ends frees its own frame (final_suspend does not suspend):
// an inline-awaited one names its awaiter in the context, which the body
// resumes next; a root tells the body it completed.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <new>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "../executor/block_pool.hpp"
#include "../executor/fork_stack.hpp"
#include "../executor/join_state.hpp"
#include "../executor/sanitizers.hpp"
#include "../executor/task_slot.hpp"
#include "foreign_await.hpp"
#include "promise_base.hpp"
#include "task_context.hpp"

namespace canopy {

template <class T = void>
class task;

namespace detail {

template <class T>
class task_promise;

// Where an inline-awaited task's result goes: into its awaiter, in the
// awaiting coroutine's frame (task::awaiter, or a join awaiter that took an
// unstarted child over). `awaiter` is resumed when the task ends.
template <class T>
struct inline_result {
  std::coroutine_handle<> awaiter;
  std::exception_ptr error;
  std::optional<T> value;

  T take() {
    if (error) {
      std::rethrow_exception(error);
    }
    return std::move(*value);
  }
};

template <>
struct inline_result<void> {
  std::coroutine_handle<> awaiter;
  std::exception_ptr error;

  void take() const {
    if (error) {
      std::rethrow_exception(error);
    }
  }
};

// How a fork-join child's end reaches its join (coroutine/fork_region.hpp):
// after the child's frame is gone, `ended` says which coroutine runs next.
// Written whole when the child is launched (fork_record::prepare_launch)
// and read only after that.
struct region_link {
  std::coroutine_handle<> (*ended)(region_link& link) noexcept;
  void* record;  // the join's fork_record
  bool offered;  // the record was offered when this child was launched
};

// A fork-join child's result slot: its value or exception, and its link.
// The constructor is user-provided so that a join's tuple of slots is not
// zero-filled first (value-initialisation): the result's members start
// empty by their own constructors, the link is left for its launch.
template <class T>
struct fork_result : inline_result<T> {
  // = default would make value-initialisation zero-fill the slot again.
  fork_result() noexcept {}  // NOLINT(modernize-use-equals-default)
  region_link link;
};

// What a region frame's end leaves for its region's driver
// (fork_region.hpp, drive), per thread: its link (a fork-join child), or
// its awaiter (a task awaited inline by a region frame). The frame frees
// itself first, as every task's does (final_suspend does not suspend);
// the driver then follows what it left. A region frame does not end by a
// symmetric transfer: a chain of those grows the stack wherever the
// compiler does not make the transfer a tail call (sanitizer builds, -O0).
// The driver also keeps the thread's offer deque at hand (`joins`), which
// every fork uses.
class join_worker;
struct region_thread {
  region_link* ended = nullptr;
  std::coroutine_handle<> next;
  join_worker* joins = nullptr;
  // Children run nested in their launcher's C++ frame while the stack is
  // above this address; a join opened below it is deferred to the driver
  // (fork_region.hpp), which runs it from the bottom of the run.
  std::uintptr_t nesting_floor = 0;
  void* deferred = nullptr;  // that join's record
  std::coroutine_handle<> (*deferred_rest)(void* record) noexcept = nullptr;
};
// The model check (tests/model/) and the Relacy check (tests/relacy/) run
// their threads on one OS thread and give each its own.
#if !defined(CANOPY_MODEL_CHECK) && !defined(CANOPY_RELACY)
inline thread_local region_thread region_here{};
inline region_thread& region_state() noexcept { return region_here; }
#else
region_thread& region_state() noexcept;
#endif

// Code that reads a thread_local and runs inside a coroutine body stays a
// call of its own: Clang may compute a thread_local's address before a
// suspension and keep it in the frame, and the coroutine may resume on
// another thread (block_pool.hpp keeps its allocator out of line for the
// same reason). GCC computes it anew in each resumption.
// CANOPY_INLINE_THREAD_LOCAL_STEP: the same, for a step that GCC must
// inline (a fork's launch, where a call's saved registers cost most).
#if defined(__clang__)
#define CANOPY_THREAD_LOCAL_STEP [[gnu::noinline]]
#define CANOPY_INLINE_THREAD_LOCAL_STEP [[gnu::noinline]]
#else
#define CANOPY_THREAD_LOCAL_STEP
#define CANOPY_INLINE_THREAD_LOCAL_STEP [[gnu::always_inline]]
#endif

// A region frame's end: what comes next, for the driver.
CANOPY_THREAD_LOCAL_STEP inline void leave_region_frame(region_link* link,
                                                        std::coroutine_handle<> awaiter) noexcept {
  region_thread& here = region_state();
  here.ended = link;
  here.next = awaiter;
}

// Under ASan, a coroutine body whose stack holds an instrumented local (an
// exception_ptr temporary) cannot make its symmetric transfer a tail call,
// and deep inline recursion then grows the stack. Under Clang (19, -O2),
// return_value inlined into a coroutine that resumed from a custom wait
// once lost its store of the result (a value co_returned after a custom
// wait never reached the joiner). The promise helpers
// stay out of line in both cases.
#if defined(CANOPY_ADDRESS_SANITIZER) || defined(__clang__)
#define CANOPY_PROMISE_HELPER [[gnu::noinline]]
#else
#define CANOPY_PROMISE_HELPER
#endif

// The parts of a promise that know T: where the result goes.
//
// A frame is only the coroutine's own: nothing is allocated in front of it,
// so a pending detached task is its slot and its frame. The result is
// written where its reader is, through `result_`, a tagged pointer:
//   * an inline_result<T> (tag 0): the task is awaited inline; at its end it
//     names that awaiter as the next coroutine to resume;
//   * the same with the region tag: a task awaited inline by a region frame
//     (a region frame itself); with the fork tag too, a fork_result<T>: a
//     child of co_await canopy::join (fork_join_await.hpp). Their ends go
//     through the region's driver (leave_region_frame);
//   * a join_state<T> (tag 1): a root spawned with a handle (spawn.hpp);
//   * null: a detached root: a value is dropped and an exception goes to the
//     executor's on_detached_exception handler at once.
// It is written by whoever owns the unstarted or suspended frame (the
// spawner before publishing the task, an awaiter before resuming it) and
// read by the coroutine on the thread that runs it.
template <class T>
class promise_of : public promise_base {
 public:
  // Frames come from the per-thread block pool (executor/block_pool.hpp);
  // the sized delete gives the block's size back, so the block holds none.
  // A fork-join child's frame goes on its worker's stack instead
  // (executor/fork_stack.hpp: the first task frame a canopy::call's make()
  // allocates); delete tells the two apart by address.
  [[gnu::always_inline]] static void* operator new(std::size_t size) {
    return new_task_frame(size);
  }
  static void operator delete(void* frame, std::size_t size) noexcept {
    delete_task_frame(frame, size);
  }

  // The task is awaited inline by `awaiter`, whose coroutine runs in
  // `context`: the result goes to `result`. `in_region`: the awaiter is a
  // region frame, so this one is too.
  void await_inline(inline_result<T>* result, std::coroutine_handle<> awaiter,
                    task_context* context, bool in_region) noexcept {
    result->awaiter = awaiter;
    result_ = reinterpret_cast<std::uintptr_t>(result) | (in_region ? region_tag : 0);
    context_ = context;
  }
  // The task is a fork-join child (coroutine/fork_region.hpp): the result
  // goes to `result`, its end to `result->link`.
  void fork_into(fork_result<T>* result, task_context* context) noexcept {
    result_ = fork_result_word(result);
    context_ = context;
  }
  // The result word fork_into writes for `result`.
  static std::uintptr_t fork_result_word(fork_result<T>* result) noexcept {
    return reinterpret_cast<std::uintptr_t>(result) | region_tag | fork_tag;
  }

  // A fork-join child made by a canopy::call starts as it is made (with
  // GCC: children_start_when_made, executor/fork_stack.hpp): the frame
  // that consumed the launch's stack mark (executor/fork_stack.hpp)
  // takes its result slot and context at its initial suspension and does
  // not suspend, so its body runs in the same entry into the frame, not in
  // a second one for the launch's resume. Any other task suspends as
  // usual. The awaiter is empty (a pointer in it would grow every frame):
  // the promise is reached through the handle await_suspend gets.
  struct start_if_launched {
    // NOLINTNEXTLINE(readability-convert-member-functions-to-static): co_await calls it on the awaiter
    [[nodiscard]] bool await_ready() const noexcept { return false; }
    template <class Promise>
    bool await_suspend(std::coroutine_handle<Promise> self) const noexcept {
      return !self.promise().start_if_launched_here(self.address());
    }
    void await_resume() const noexcept {}
  };
  auto initial_suspend() noexcept {
    if constexpr (children_start_when_made) {
      return start_if_launched{};
    } else {
      return std::suspend_always{};
    }
  }

  // The task is a root spawned with a handle: the result goes to `state`.
  void deliver_to(detail::join_state<T>* state) noexcept {
    result_ = reinterpret_cast<std::uintptr_t>(state) | joined_tag;
  }
  // The join state deliver_to named (a joined root), else null.
  // (A tagged pointer: the integer-to-pointer casts are the point. The
  // analyzer cannot see a frame's promise constructed behind from_address.)
  [[nodiscard]] detail::join_state<T>* joined_state() const noexcept {
    // NOLINTBEGIN(performance-no-int-to-ptr,clang-analyzer-core.UndefinedBinaryOperatorResult)
    return (result_ & joined_tag) != 0
               ? reinterpret_cast<detail::join_state<T>*>(result_ & ~tag_mask)
               : nullptr;
    // NOLINTEND(performance-no-int-to-ptr,clang-analyzer-core.UndefinedBinaryOperatorResult)
  }

  CANOPY_PROMISE_HELPER void unhandled_exception() noexcept {
    if (detail::join_state<T>* const state = joined_state()) {
      state->set_error(std::current_exception());
    } else if (inline_result<T>* const result = awaiting()) {
      result->error = std::current_exception();
    } else {
      report_detached_exception_here(std::current_exception());
    }
  }

  // The body ended (its result delivered): the frame frees itself as the
  // coroutine runs off its end, in the same resumption, instead of
  // suspending and being destroyed by a second entry into the coroutine,
  // which every task would pay at its end. An inline-awaited task then
  // names its awaiter as the next coroutine to resume (the body does that
  // at once, so the stack does not grow); a spawned root tells the body it
  // completed.
  // A region frame (in_region()) leaves what comes next for its region's
  // driver instead.
  std::suspend_never final_suspend() noexcept {
    if (inline_result<T>* const result = awaiting()) {
      if (in_region()) [[unlikely]] {
        if ((result_ & fork_tag) != 0) {
          leave_region_frame(&static_cast<fork_result<T>*>(result)->link, {});
        } else {
          leave_region_frame(nullptr, result->awaiter);
        }
        return {};
      }
      context_->resume_point = result->awaiter;
      context_->resume_awaiter = true;
    } else {
      context_->signal = detail::run_outcome::completed;
    }
    return {};
  }

 private:
  // A thread_local read inside the body (used with GCC, inline there;
  // CANOPY_INLINE_THREAD_LOCAL_STEP would make it a call with Clang).
  CANOPY_INLINE_THREAD_LOCAL_STEP bool start_if_launched_here(void* frame) noexcept {
    fork_stack_thread& here = fork_stack_state();
    if (here.mark != reinterpret_cast<std::uintptr_t>(frame) || here.launch_result == 0 ||
        here.launch_type != &launch_type_tag<T>) [[likely]] {
      return false;
    }
    result_ = here.launch_result;
    context_ = static_cast<task_context*>(here.launch_context);
    here.launch_result = 0;
    here.mark = 0;
    return true;
  }

 protected:
  // The inline awaiter's or fork-join slot's result (not joined, not null),
  // else null.
  [[nodiscard]] inline_result<T>* awaiting() const noexcept {
    // NOLINTNEXTLINE(performance-no-int-to-ptr): a tagged pointer
    return (result_ & joined_tag) == 0 ? reinterpret_cast<inline_result<T>*>(result_ & ~tag_mask)
                                       : nullptr;
  }

 private:
  static_assert(alignof(inline_result<T>) > tag_mask && alignof(detail::join_state<T>) > tag_mask);
};

template <class T>
class task_promise final : public promise_of<T> {
 public:
  task<T> get_return_object() noexcept;

  template <class U = T>
  requires std::is_convertible_v<U&&, T> CANOPY_PROMISE_HELPER void return_value(
      U&& value) noexcept(std::is_nothrow_constructible_v<T, U&&>) {
    if (detail::join_state<T>* const state = this->joined_state()) {
      state->set_value(std::forward<U>(value));
    } else if (inline_result<T>* const result = this->awaiting()) {
      result->value.emplace(std::forward<U>(value));
    }
  }
};

template <>
class task_promise<void> final : public promise_of<void> {
 public:
  task<void> get_return_object() noexcept;
  void return_void() noexcept {}
};

// Destroys a task's frame through a call the optimiser cannot see into.
// Clang elides the heap allocation of a coroutine whose frame it can prove
// dies inside the caller (an inline-awaited task): the child's frame then
// becomes part of the awaiting coroutine's frame, for every await in it,
// awaited or not. A destroy it cannot see keeps every frame in its own
// pooled block. (GCC does not elide; the call costs it nothing.)
#if defined(__clang__)
[[gnu::noinline]] inline void destroy_frame_opaque(void* frame) noexcept {
  std::coroutine_handle<>::from_address(frame).destroy();
}
#else
inline void destroy_frame_opaque(void* frame) noexcept {
  std::coroutine_handle<>::from_address(frame).destroy();
}
#endif

}  // namespace detail

template <class T>
class [[nodiscard]] task {
 public:
  static_assert(!std::is_reference_v<T>, "canopy::task<T&> is not supported");
  using promise_type = detail::task_promise<T>;
  using value_type = T;

  task() noexcept = default;
  explicit task(std::coroutine_handle<promise_type> handle) noexcept : handle_(handle) {}
  task(task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  task& operator=(task&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  task(const task&) = delete;
  task& operator=(const task&) = delete;
  [[gnu::always_inline]] ~task() { reset(); }

  [[nodiscard]] bool valid() const noexcept { return static_cast<bool>(handle_); }

  // Give up ownership of the frame (the spawner takes it).
  [[nodiscard]] std::coroutine_handle<promise_type> release() noexcept {
    return std::exchange(handle_, {});
  }

  // co_await task: run it inline in the awaiting task (symmetric transfer),
  // then return its value or rethrow its exception. The task wrote its
  // result into the awaiter and freed its frame at its end; the awaiter
  // leaves the task empty. (If the awaiting task is destroyed
  // while the awaited one is suspended, ~task destroys the frame.)
  struct awaiter {
    using canopy_awaiter = void;
    using canopy_fork_join_awaiter = void;  // a fork-join child may await a task inline
    task& awaited;
    detail::inline_result<T> result{};

    // An empty task has no frame to resume: refused here, where the
    // exception still reaches the awaiting coroutine (await_suspend is
    // noexcept and would jump to a null frame).
    bool await_ready() const {
      if (!awaited.handle_) [[unlikely]] {
        refuse_empty();
      }
      return false;
    }
    template <class Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> parent) noexcept {
      if constexpr (!detail::is_task_promise<Promise>()) {
        std::terminate();
      } else {
        const std::coroutine_handle<promise_type> child = awaited.handle_;
        child.promise().await_inline(&result, parent, parent.promise().context(),
                                     parent.promise().in_region());
        return child;
      }
    }
    T await_resume() {
      awaited.handle_ = {};  // the frame freed itself at its end
      return result.take();
    }
    [[noreturn, gnu::cold, gnu::noinline]] static void refuse_empty() {
      throw std::invalid_argument(
          "canopy: co_await on an empty canopy::task (default-made, moved from or already "
          "awaited)");
    }
  };
  awaiter operator co_await() && noexcept { return awaiter{*this}; }
  awaiter operator co_await() & noexcept { return awaiter{*this}; }

 private:
  // Inline where the task was released (its usual end); dropping a frame
  // is a call of its own.
  [[gnu::always_inline]] void reset() noexcept {
    if (handle_) {
      drop(std::exchange(handle_, {}).address());
    }
  }
  [[gnu::noinline]] static void drop(void* frame) noexcept {
    if (detail::on_fork_stack(frame)) [[unlikely]] {
      detail::stack_frame_dropped(frame, &detail::launch_type_tag<T>,
                                  detail::children_start_when_made);
    }
    detail::destroy_frame_opaque(frame);
  }

  std::coroutine_handle<promise_type> handle_;
};

namespace detail {

template <class T>
task<T> task_promise<T>::get_return_object() noexcept {
  return task<T>(std::coroutine_handle<task_promise<T>>::from_promise(*this));
}

inline task<void> task_promise<void>::get_return_object() noexcept {
  return task<void>(std::coroutine_handle<task_promise<void>>::from_promise(*this));
}

// Whether T is a canopy::task (race and task_group take tasks and other
// awaitables).
template <class T>
struct is_task : std::false_type {};
template <class T>
struct is_task<task<T>> : std::true_type {};

}  // namespace detail

}  // namespace canopy
