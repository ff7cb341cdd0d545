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
// * An exception leaving the body is stored and rethrown where the task is
//   co_awaited (inline) or joined (spawned).
//
// How a spawned coroutine runs (coroutine/spawn.hpp has the body): the slot
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
#include <type_traits>
#include <utility>

#include "../executor/block_pool.hpp"
#include "../executor/join_state.hpp"
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

// The block every task frame lives in: [frame_record<T>][coroutine frame].
//
// The record is the task's completion record — a join_state<T> holding the
// value or exception that return_value / unhandled_exception write — so a
// spawned task needs no allocation besides its (pooled) frame block, and a
// joiner reads the result from memory next to the frame it just resumed.
// A task that runs to its end frees its own frame (final_suspend does not
// suspend), so the record outlives the frame whenever someone still reads
// it (`keep_block`):
//   * not kept (a task destroyed before its end: cancelled, dropped, an
//     unstarted task<T> going out of scope): destroying the frame frees the
//     whole block (promise operator delete);
//   * kept by its reader (set at final_suspend when no join handle shares
//     it): an inline-awaited task's awaiter takes the result and frees the
//     block; a detached root's body takes the exception and frees it;
//   * kept by the join handle (spawned with a handle, set before it is
//     published): the record's reference count (task body + handle)
//     decides, and the last release_ref() frees it (destroy_self). If the
//     frame must outlive the body (a cancelled task whose wait_link fires
//     later), the frame takes a reference of its own (frame_holds_ref) and
//     releases it when it is destroyed.
// `keep_block` and `frame_holds_ref` are written by the task's owner before
// the task is published (spawn), by the task itself at its end, or before
// wait_link::abandon's release, and read where the frame is destroyed, after
// the matching acquire (or on the same thread).
template <class T>
class frame_record;

// Under ASan, a coroutine body whose stack holds an instrumented local (an
// exception_ptr temporary) cannot make its symmetric transfer a tail call,
// and deep inline recursion then grows the stack. Under Clang (19, -O2),
// return_value inlined into a coroutine that resumed from a custom wait
// lost its store into the completion record, which lies in front of the
// frame: the joiner read an unwritten value (tests/custom_wait_test.cpp,
// "a value co_returned after a custom wait reaches the joiner"). Out of
// line, the record is written through a pointer the coroutine passes
// cannot follow. The promise helpers stay out of line in both cases.
#if defined(__SANITIZE_ADDRESS__) || defined(__clang__)
#define CANOPY_PROMISE_HELPER [[gnu::noinline]]
#else
#define CANOPY_PROMISE_HELPER
#endif

inline constexpr std::size_t frame_alignment = __STDCPP_DEFAULT_NEW_ALIGNMENT__;

template <class T>
inline constexpr std::size_t record_size = (sizeof(frame_record<T>) + frame_alignment - 1) &
                                           ~(frame_alignment - 1);

template <class T>
class frame_record final : public join_state<T> {
 public:
  explicit frame_record(std::uint32_t block_size) noexcept : block_size_(block_size) {}

  // The record in front of `frame` (GCC and Clang: a coroutine handle's
  // address is what the promise's operator new returned).
  static frame_record& of_frame(void* frame) noexcept {
    return *std::launder(
        reinterpret_cast<frame_record*>(static_cast<std::byte*>(frame) - record_size<T>));
  }
  void* frame() noexcept { return reinterpret_cast<std::byte*>(this) + record_size<T>; }

  [[nodiscard]] bool failed() const noexcept { return static_cast<bool>(this->error_); }
  std::exception_ptr take_error() noexcept { return std::move(this->error_); }

  // An inline-awaited task's result, after its frame freed itself: the
  // value, or rethrow; the block is freed either way. (A joined task's
  // result is read through join_state::take, after completion.)
  T take_result_and_release() {
    struct release_on_exit {
      frame_record& record;
      ~release_on_exit() { record.release_block(); }
    } release{*this};
    if (this->error_) {
      std::rethrow_exception(this->error_);
    }
    if constexpr (!std::is_void_v<T>) {
      return std::move(*this->value_);
    }
  }

  // Promise operator delete: the frame's destructors have run.
  void frame_destroyed() noexcept {
    if (!keep_block) {
      release_block();
    } else if (frame_holds_ref) {
      this->release_ref();
    }
  }

  // The owner of a kept block, once it is done with the record.
  void release_block() noexcept {
    const std::uint32_t size = block_size_;
    void* const block = this;
    this->~frame_record();
    free_block(block, size);
  }

  // These two flags and the block size fill the join state's tail padding
  // (the record of a task<void> is 64 bytes; record_size below).
  bool keep_block = false;
  bool frame_holds_ref = false;

 private:
  void destroy_self() noexcept override { release_block(); }

  std::uint32_t block_size_;  // frames are far below 4 GiB (operator new checks)
};

// The checkers' atomics are larger than the words they model.
#if !defined(CANOPY_MODEL_CHECK) && !defined(CANOPY_RELACY)
static_assert(record_size<void> == 64, "a task<void>'s completion record is 64 bytes");
#endif

// The parts of a promise that know T: the block layout and the record.
template <class T>
class promise_of : public promise_base {
 public:
  // Frames come from the per-thread block pool (executor/block_pool.hpp),
  // with the record in front.
  static void* operator new(std::size_t size) {
    const std::size_t total = record_size<T> + size;
    if (total > UINT32_MAX) [[unlikely]] {
      throw std::bad_alloc();
    }
    void* const block = allocate_block(total);
    return (::new (block) frame_record<T>(static_cast<std::uint32_t>(total)))->frame();
  }
  static void operator delete(void* frame, std::size_t /*size*/) noexcept {
    frame_record<T>::of_frame(frame).frame_destroyed();
  }

  frame_record<T>& record() noexcept {
    return frame_record<T>::of_frame(
        std::coroutine_handle<task_promise<T>>::from_promise(static_cast<task_promise<T>&>(*this))
            .address());
  }

  CANOPY_PROMISE_HELPER void unhandled_exception() noexcept {
    record().set_error(std::current_exception());
  }

  // The body ended (its result is in the record): the frame frees itself
  // as the coroutine runs off its end, in the same resumption, instead of
  // suspending and being destroyed by a second entry into the coroutine,
  // which every task would pay at its end. The block stays for whoever reads the result. An inline-awaited task then
  // names its awaiter as the next coroutine to resume (the body does that
  // at once, so the stack does not grow); a spawned root tells the body it
  // completed.
  std::suspend_never final_suspend() noexcept {
    record().keep_block = true;
    if (continuation_) {
      context_->resume_point = continuation_;
      context_->resume_awaiter = true;
    } else {
      context_->signal = run_outcome::completed;
    }
    return {};
  }
};

template <class T>
class task_promise final : public promise_of<T> {
 public:
  task<T> get_return_object() noexcept;

  template <class U = T>
  requires std::is_convertible_v<U&&, T> CANOPY_PROMISE_HELPER void return_value(
      U&& value) noexcept(std::is_nothrow_constructible_v<T, U&&>) {
    this->record().set_value(std::forward<U>(value));
  }
};

template <>
class task_promise<void> final : public promise_of<void> {
 public:
  task<void> get_return_object() noexcept;
  void return_void() noexcept {}
};

// After an inline-awaited task ran to its end (its frame is gone, its block
// kept): the value, or rethrow; the block is freed either way.
template <class T>
CANOPY_PROMISE_HELPER T take_inline_result(std::coroutine_handle<task_promise<T>> done) {
  return frame_record<T>::of_frame(done.address()).take_result_and_release();
}

// Destroys a task's frame through a call the optimiser cannot see into.
// Clang elides the heap allocation of a coroutine whose frame it can prove
// dies inside the caller (an inline-awaited task): the frame then lives in
// the caller's frame, and operator new — which puts the completion record
// in front of the frame — never runs. A destroy it cannot see keeps the
// frame on the heap. (GCC does not elide; the call costs it nothing.)
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
  ~task() { reset(); }

  [[nodiscard]] bool valid() const noexcept { return static_cast<bool>(handle_); }

  // Give up ownership of the frame (the spawner takes it).
  [[nodiscard]] std::coroutine_handle<promise_type> release() noexcept {
    return std::exchange(handle_, {});
  }

  // co_await task: run it inline in the awaiting task (symmetric transfer),
  // then return its value or rethrow its exception. The task ran to its end
  // and freed its frame; the awaiter takes the result out of the block,
  // frees it, and leaves the task empty. (If the awaiting task is destroyed
  // while the awaited one is suspended, ~task destroys the frame.)
  struct awaiter {
    using canopy_awaiter = void;
    task& awaited;

    bool await_ready() const noexcept { return false; }
    template <class Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> parent) noexcept {
      const std::coroutine_handle<promise_type> child = awaited.handle_;
      child.promise().set_continuation(parent);
      child.promise().set_context(parent.promise().context());
      return child;
    }
    T await_resume() { return detail::take_inline_result<T>(std::exchange(awaited.handle_, {})); }
  };
  awaiter operator co_await() && noexcept { return awaiter{*this}; }
  awaiter operator co_await() & noexcept { return awaiter{*this}; }

 private:
  void reset() noexcept {
    if (handle_) {
      detail::destroy_frame_opaque(std::exchange(handle_, {}).address());
    }
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

}  // namespace detail

}  // namespace canopy
