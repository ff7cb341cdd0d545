// join_n, the runtime-count form of co_await canopy::join
// (coroutine/fork_join_await.hpp has the contract, at its top, and the
// fixed-count form; coroutine/fork_region.hpp the protocol both share).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <new>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "../executor/block_pool.hpp"
#include "../executor/errors.hpp"
#include "fork_join_await.hpp"
#include "fork_region.hpp"

namespace canopy {

namespace detail {

// join_n's result slots: one block from the block pool, as a frame is.
template <class T>
class fork_slots {
 public:
  explicit fork_slots(std::size_t count)
      : slots_(count == 0 ? nullptr : static_cast<fork_result<T>*>(allocate_block(bytes(count)))),
        count_(count) {
    for (std::size_t index = 0; index < count_; ++index) {
      ::new (static_cast<void*>(slots_ + index)) fork_result<T>();
    }
  }
  fork_slots(const fork_slots&) = delete;
  fork_slots& operator=(const fork_slots&) = delete;
  fork_slots(fork_slots&&) = delete;
  fork_slots& operator=(fork_slots&&) = delete;
  ~fork_slots() {
    if (slots_ == nullptr) {
      return;
    }
    for (std::size_t index = 0; index < count_; ++index) {
      slots_[index].~fork_result<T>();
    }
    free_block(slots_, bytes(count_));
  }

  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  fork_result<T>& operator[](std::size_t index) noexcept { return slots_[index]; }

 private:
  static std::size_t bytes(std::size_t count) noexcept { return count * sizeof(fork_result<T>); }

  fork_result<T>* slots_;
  std::size_t count_;
};

// `Out`: an output iterator the results go to, or void for a std::vector.
template <class T, class Make, class Out>
class fork_join_n_awaiter : public fork_join_base {
 public:
  using child_type = std::invoke_result_t<Make&, std::size_t>;
  struct no_output {};
  using output_type = std::conditional_t<std::is_void_v<Out>, no_output, Out>;

  fork_join_n_awaiter(std::size_t count, Make&& make, output_type&& out)
      : fork_join_base(typed_start<&start>{}, checked_count(count)),
        make_(std::move(make)),
        out_(std::move(out)),
        slots_(count),
        calls_(call_outlives_launch<child_type> ? count : 0) {}
  fork_join_n_awaiter(const fork_join_n_awaiter&) = delete;
  fork_join_n_awaiter& operator=(const fork_join_n_awaiter&) = delete;
  fork_join_n_awaiter(fork_join_n_awaiter&&) = delete;
  fork_join_n_awaiter& operator=(fork_join_n_awaiter&&) = delete;
  ~fork_join_n_awaiter() = default;

  template <class Promise>
  [[gnu::always_inline]] bool await_suspend(std::coroutine_handle<Promise> self) noexcept {
    return suspend_with<&start>(self);
  }
  auto await_resume() {
    for (std::size_t index = 0; index < slots_.size(); ++index) {
      if (slots_[index].error) {
        std::rethrow_exception(slots_[index].error);
      }
    }
    if constexpr (std::is_void_v<T>) {
      return;
    } else if constexpr (!std::is_void_v<Out>) {
      for (std::size_t index = 0; index < slots_.size(); ++index) {
        *out_ = slots_[index].take();
        ++out_;
      }
    } else {
      std::vector<T> values;
      values.reserve(slots_.size());
      for (std::size_t index = 0; index < slots_.size(); ++index) {
        values.push_back(slots_[index].take());
      }
      return values;
    }
  }

 private:
  static std::uint32_t checked_count(std::size_t count) {
    if (count >= (std::size_t{1} << 30)) {
      throw std::length_error("canopy::join_n: more than 2^30 children");
    }
    return static_cast<std::uint32_t>(count);
  }

  // Inline in the joining frame's code (and a thief's run), as join's is:
  // a call here would cost every child its prologue and saved registers.
  [[gnu::always_inline]] static child_run start(fork_record& record,
                                                std::uint32_t index) noexcept {
    auto& self = static_cast<fork_join_n_awaiter&>(record);
    fork_result<T>& slot = self.slots_[index];
    if (record.cancelled()) {
      slot.error = std::make_exception_ptr(task_cancelled());
      return child_run::ended;
    }
    try {
      if constexpr (call_outlives_launch<child_type>) {
        child_type& child = self.calls_[index].emplace(std::invoke(self.make_, std::size_t{index}));
        return self.template run_made<T>(child, slot);
      } else {
        child_type child = std::invoke(self.make_, std::size_t{index});
        return self.template run_made<T>(child, slot);
      }
    } catch (...) {
      slot.error = std::current_exception();
      return child_run::ended;
    }
  }

  // Child `child` (make(i) returned it) launched into `slot` and run here.
  template <class U, class C>
  [[gnu::always_inline]] child_run run_made(C& child, fork_result<U>& slot) noexcept {
    const bool offered = prepare_launch<&start>(slot.link);
    if (!run_fork_child<U>(child, slot, context_)) {
      return child_run::suspended;
    }
    return offered ? child_run::ended_offered : child_run::ended;
  }

  Make make_;
  [[no_unique_address]] output_type out_;
  fork_slots<T> slots_;
  // The calls make(i) returned, kept until the join ends when their
  // children's frames point into them (call_outlives_launch); else empty.
  // Each launch writes its own element.
  std::vector<std::optional<child_type>> calls_;
};

// What join_n(...) returns, likewise.
template <class T, class Make, class Out>
class [[nodiscard]] fork_join_n_call {
 public:
  using output_type = typename fork_join_n_awaiter<T, Make, Out>::output_type;
  fork_join_n_call(std::size_t count, Make make, output_type out)
      : count_(count), make_(std::move(make)), out_(std::move(out)) {}
  fork_join_n_awaiter<T, Make, Out> operator co_await() && {
    return fork_join_n_awaiter<T, Make, Out>(count_, std::move(make_), std::move(out_));
  }

 private:
  std::size_t count_;
  Make make_;
  [[no_unique_address]] output_type out_;
};

}  // namespace detail

// co_await canopy::join_n(count, make) -> std::vector<T> (void for
// task<void>): see the top of this file.
template <class Make>
requires std::invocable<Make&, std::size_t> &&
    detail::fork_child<std::invoke_result_t<Make&, std::size_t>>
[[nodiscard]] auto join_n(std::size_t count, Make make) {
  using value = detail::fork_value_t<std::invoke_result_t<Make&, std::size_t>>;
  return detail::fork_join_n_call<value, Make, void>(count, std::move(make), {});
}

// co_await canopy::join_n(count, make, out): the results, in index order,
// to the output iterator `out` instead (nothing for task<void>).
template <class Make, class Out>
requires std::invocable<Make&, std::size_t> &&
    detail::fork_child<std::invoke_result_t<Make&, std::size_t>>
[[nodiscard]] auto join_n(std::size_t count, Make make, Out out) {
  using value = detail::fork_value_t<std::invoke_result_t<Make&, std::size_t>>;
  return detail::fork_join_n_call<value, Make, Out>(count, std::move(make), std::move(out));
}

}  // namespace canopy
