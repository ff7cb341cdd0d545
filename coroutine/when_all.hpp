// when_all — run several tasks concurrently and wait for all of them.
//
//   auto [a, b] = co_await canopy::when_all(left(), right());   // tuple
//   std::vector<int> all = co_await canopy::when_all(std::move(tasks));
//
// Each task is spawned on the current executor (so they run in parallel),
// then all are awaited at once (await_all), even after one failed: when_all
// never returns while one of its tasks still runs. A task awaiting when_all
// that is cancelled cancels every task, and its frame goes only after the
// last of them ended, so the tasks may borrow the awaiting task's locals. If a spawn fails (at
// capacity: spawn_error(errc::at_capacity); after shutdown began: errc::shut_down), the tasks not
// yet spawned are destroyed unstarted, those already spawned are awaited, and then the spawn error
// is rethrown. Otherwise, if any task threw, the first exception (in argument order) is rethrown
// after all have ended. A void task contributes std::monostate to the tuple. Only inside a running
// task (it spawns with canopy::spawn).
#pragma once

#include <array>
#include <cstddef>
#include <exception>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "await_all.hpp"
#include "join_await.hpp"
#include "spawn.hpp"
#include "task.hpp"

namespace canopy {

namespace detail {

template <class T>
using non_void_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

// Awaits one handle; stores the value, or the first exception seen.
template <class T>
struct settle_awaiter : join_awaiter<T> {
  std::optional<non_void_t<T>>* out;
  std::exception_ptr* first_error;

  settle_awaiter(join_handle<T>& handle, std::optional<non_void_t<T>>& slot,
                 std::exception_ptr& first)
      : join_awaiter<T>(handle), out(&slot), first_error(&first) {}

  void await_resume() noexcept {
    try {
      if constexpr (std::is_void_v<T>) {
        join_awaiter<T>::await_resume();
        out->emplace();
      } else {
        out->emplace(join_awaiter<T>::await_resume());
      }
    } catch (...) {
      if (!*first_error) {
        *first_error = std::current_exception();
      }
    }
  }
};

// Awaits every handle that was spawned (the others are empty), so that no
// task outlives when_all, even when a spawn failed.
template <class T>
task<void> settle(join_handle<T>& handle, std::optional<non_void_t<T>>& slot,
                  std::exception_ptr& first_error) {
  if (handle.valid()) {
    co_await settle_awaiter<T>(handle, slot, first_error);
  }
}

template <class... Ts, std::size_t... Is>
task<std::tuple<non_void_t<Ts>...>> when_all_impl(std::index_sequence<Is...> /*indices*/,
                                                  task<Ts>... tasks) {
  std::tuple<join_handle<Ts>...> handles;
  const cancel_unjoined_on_exit cancel_on_exit(handles);
  std::exception_ptr spawn_failure;
  try {
    ((std::get<Is>(handles) = canopy::spawn(std::move(std::get<Is>(std::tie(tasks...))))), ...);
  } catch (...) {
    spawn_failure = std::current_exception();  // rethrown once the spawned ones ended
  }
  // One wait for every task spawned: a cancel of this task cancels them
  // all and frees this frame only after the last one ended (await_all).
  std::array<join_state_base*, sizeof...(Ts)> states{};
  std::size_t spawned = 0;
  ((std::get<Is>(handles).valid() ? static_cast<void>(states[spawned++] = std::get<Is>(handles).state())
                                  : static_cast<void>(0)),
   ...);
  std::span<join_state_base*> started(states.data(), spawned);
  co_await canopy::await_all(started);
  std::tuple<std::optional<non_void_t<Ts>>...> results;
  std::exception_ptr first_error;
  (co_await settle(std::get<Is>(handles), std::get<Is>(results), first_error), ...);
  if (spawn_failure) {
    std::rethrow_exception(spawn_failure);
  }
  if (first_error) {
    std::rethrow_exception(first_error);
  }
  co_return std::tuple<non_void_t<Ts>...>(std::move(*std::get<Is>(results))...);
}

}  // namespace detail

template <class... Ts>
task<std::tuple<detail::non_void_t<Ts>...>> when_all(task<Ts>... tasks) {
  return detail::when_all_impl(std::index_sequence_for<Ts...>{}, std::move(tasks)...);
}

template <class T>
task<std::vector<detail::non_void_t<T>>> when_all(std::vector<task<T>> tasks) {
  std::vector<join_handle<T>> handles;
  const detail::cancel_unjoined_on_exit cancel_on_exit(handles);
  handles.reserve(tasks.size());
  std::exception_ptr spawn_failure;
  try {
    for (auto& work : tasks) {
      handles.push_back(canopy::spawn(std::move(work)));
    }
  } catch (...) {
    spawn_failure = std::current_exception();  // rethrown once the spawned ones ended
  }
  // One wait for them all, as above: a cancel frees this frame only after
  // the last task ended.
  co_await canopy::await_all(handles);
  std::vector<std::optional<detail::non_void_t<T>>> results(handles.size());
  std::exception_ptr first_error;
  for (std::size_t index = 0; index < handles.size(); ++index) {
    co_await detail::settle_awaiter<T>(handles[index], results[index], first_error);
  }
  if (spawn_failure) {
    std::rethrow_exception(spawn_failure);
  }
  if (first_error) {
    std::rethrow_exception(first_error);
  }
  std::vector<detail::non_void_t<T>> values;
  values.reserve(results.size());
  for (auto& result : results) {
    values.push_back(std::move(*result));
  }
  co_return values;
}

}  // namespace canopy
