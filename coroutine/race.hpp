// co_await canopy::race(a, b, ...): the first of several tasks to end wins
// (tokio's select!). The contract is at the top of <canopy/race.hpp>.
//
// Mechanism (await_all's wait_link and the body's cancel forwarding,
// nothing new): each contender runs as a spawned child (run_contender) that
// writes what it ended with (a value or an exception) into its slot in
// race's frame. race then waits through one wait_link (first_end_awaiter)
// whose continuation is registered with every child's join state. The
// first child to complete is the winner: its completion asks every other
// child to cancel (join_state::cancel_and_wake: a suspended one is
// destroyed, its wait released; a running one at its next suspension). The link fires only
// when the last child has completed, so race's frame, the slots and
// whatever the contenders borrow from the caller outlive every contender.
// A racing task cancelled (or dropped at shutdown) while it waits hands the
// cancel on through the link's disarm hook and ends only once the link
// fired (coroutine/coroutine_body.hpp, awaited_end_reached): its children end first.
// A cancelled one whose contenders left a value resumes with the result
// instead of being destroyed (the link's completion_kept hook).
#pragma once

#include <array>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "../atomics/atomics.hpp"
#include "../executor/errors.hpp"
#include "../executor/join_state.hpp"
#include "../wait/task_handle.hpp"
#include "../wait/wait_link.hpp"
#include "spawn.hpp"
#include "task.hpp"

namespace canopy {

// What a contender of type task<T> gives in a race_result: T, or
// std::monostate for task<void>.
namespace detail {
template <class T>
using race_value_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;
}  // namespace detail

template <class... Ts>
class race_result;

namespace detail {

// What one contender ended with. Written by its child task before that
// task completes; read by race after the link fired.
template <class T>
struct race_slot {
  std::optional<detail::race_value_t<T>> value;
  std::exception_ptr error;
};

template <class T>
task<void> run_contender(task<T> work, race_slot<T>* out) {
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(work);
      out->value.emplace();
    } else {
      out->value.emplace(co_await std::move(work));
    }
  } catch (...) {
    out->error = std::current_exception();
  }
}

// Waits, in one suspension, until every one of the first `count` children
// has completed; the first to complete is the winner (await_resume), and
// its completion cancels the others.
template <std::size_t N>
class first_end_awaiter {
 public:
  using canopy_awaiter = void;
  static constexpr std::size_t no_winner = N;

  // `any_value(values)`: whether a contender has left a value in race's
  // slots (read once the link fired).
  first_end_awaiter(std::array<join_handle<void>, N>& handles, std::size_t count,
                    bool (*any_value)(const void*) noexcept, const void* values) noexcept
      : handles_(&handles), count_(count), any_value_(any_value), values_(values) {
    for (std::size_t index = 0; index < N; ++index) {
      entries_[index] = entry{this, index};
    }
  }
  // g++ may move an awaiter before it suspends; nothing in it is live yet.
  first_end_awaiter(first_end_awaiter&& other) noexcept
      : first_end_awaiter(*other.handles_, other.count_, other.any_value_, other.values_) {}
  first_end_awaiter& operator=(first_end_awaiter&&) = delete;
  ~first_end_awaiter() = default;

  [[nodiscard]] bool await_ready() const noexcept { return count_ == 0; }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    task_context& context = context_of(self);
    // One more than the children: the share this task holds until it
    // registered them all, so that the count cannot reach zero (and fire)
    // before every registration is done.
    // relaxed: published to the children by set_continuation's release.
    remaining_.store(static_cast<std::uint32_t>(count_) + 1, atomics::relaxed);
    link_.arm_for_current_task();
    link_.disarm = &cancel_all;
    link_.source = this;
    link_.completion_kept = &value_kept;
    context.suspend_on(self, wait_kind::link, &link_);
    std::uint32_t settled = 1;  // our own share
    for (std::size_t index = 0; index < count_; ++index) {
      if (!state(index)->set_continuation(detail::continuation{&child_done, &entries_[index]})) {
        ended(index);  // completed before we registered: nothing will call back
        ++settled;
      }
    }
    // acq_rel: the children's completions decrement the same word; whoever
    // takes it to zero saw every other decrement (and the slot each child
    // wrote before completing). If it is us, no child is left to fire the
    // link, and we go on without suspending.
    if (remaining_.fetch_sub(settled, atomics::acq_rel) == settled) {
      context.clear_wait();
      return false;
    }
    return true;
  }

  // The winner's index (no_winner only if nothing was raced).
  [[nodiscard]] std::size_t await_resume() const noexcept {
    // relaxed: set before the winner's decrement of remaining_, which the
    // link's firing (or our own last decrement) follows in one chain of
    // acq_rel RMWs; has_fired()'s acquire made it visible.
    return winner_.load(atomics::relaxed);
  }

 private:
  struct entry {
    first_end_awaiter* self;
    std::size_t index;
  };

  detail::join_state_base* state(std::size_t index) const noexcept {
    return (*handles_)[index].state();
  }

  // Child `index` completed: the first one wins and cancels the others.
  // Runs before that child's decrement, so race's frame (and every handle
  // in it) is alive.
  void ended(std::size_t index) noexcept {
    std::size_t none = no_winner;
    // relaxed: the CAS only decides who is first; see await_resume.
    if (winner_.compare_exchange_strong(none, index, atomics::relaxed)) {
      cancel_except(index);
    }
  }

  void cancel_except(std::size_t keep) noexcept {
    for (std::size_t index = 0; index < count_; ++index) {
      if (index != keep) {
        // A child already completed ignores it (its outcome stays).
        static_cast<void>(state(index)->cancel_and_wake());
      }
    }
  }

  // A child's completion (join_state::complete runs it once).
  static void child_done(void* context) noexcept {
    const auto* const which = static_cast<const entry*>(context);
    first_end_awaiter* const self = which->self;
    self->ended(which->index);
    // acq_rel: see await_suspend. Only the last one touches the awaiter
    // afterwards (the task cannot resume, or be freed, before it fires).
    if (self->remaining_.fetch_sub(1, atomics::acq_rel) == 1) {
      wait_link::fire(&self->link_);
    }
  }

  // The racing task is cancelled or destroyed while it waits: the
  // registrations cannot be taken back, so every child is asked to stop;
  // the last one's completion fires the link, and only then does the
  // task's frame go (awaited_end_reached, or wait_link::abandon).
  static bool cancel_all(wait_link& link) noexcept {
    static_cast<first_end_awaiter*>(link.source)->cancel_except(no_winner);
    return false;
  }

  // The racing task cancelled after every contender ended: a value one of
  // them returned before its cancel landed (a channel's value, taken) is
  // race's result, not dropped with the frame; the task resumes with it.
  static bool value_kept(const wait_link& link) noexcept {
    const auto* const self = static_cast<const first_end_awaiter*>(link.source);
    return self->any_value_(self->values_);
  }

  std::array<join_handle<void>, N>* handles_;
  std::size_t count_;
  bool (*any_value_)(const void*) noexcept;
  const void* values_;
  std::array<entry, N> entries_{};
  atomics::atomic<std::size_t> winner_{no_winner};
  atomics::atomic<std::uint32_t> remaining_{0};
  wait_link link_;
};

template <class... Ts>
race_result<Ts...> make_race_result(std::size_t winner, std::tuple<race_slot<Ts>...>& slots);

// first_end_awaiter's any_value for race's slots.
template <class... Ts>
bool race_any_value(const void* values) noexcept {
  return std::apply([](const auto&... slot) { return (slot.value.has_value() || ...); },
                    *static_cast<const std::tuple<race_slot<Ts>...>*>(values));
}

}  // namespace detail

// The outcome of race(task<Ts>...): which contender won (index(), in
// argument order), and the value of every contender that returned one
// before it was cancelled: always the winner's, and sometimes that of a
// contender that returned at about the same time on another worker (its
// value is kept, never dropped: it may hold what it took, as a read's
// bytes). A task<void> contender's value is std::monostate.
template <class... Ts>
class race_result {
  using first_t = std::tuple_element_t<0, std::tuple<Ts..., void>>;
  static constexpr bool same_types = (std::is_same_v<Ts, first_t> && ...);

 public:
  [[nodiscard]] std::size_t index() const noexcept { return index_; }

  // Whether contender I returned a value (true for I == index()).
  template <std::size_t I>
  [[nodiscard]] bool has_value() const noexcept {
    return std::get<I>(values_).has_value();
  }

  // Contender I's value; std::logic_error if it returned none.
  template <std::size_t I>
  [[nodiscard]] auto& get() & {
    return checked<I>(*this);
  }
  template <std::size_t I>
  [[nodiscard]] const auto& get() const& {
    return checked<I>(*this);
  }
  template <std::size_t I>
  [[nodiscard]] auto&& get() && {
    return std::move(checked<I>(*this));
  }

  // When every contender has the same type: the winner's value.
  [[nodiscard]] auto& value() & requires same_types { return winner_value(*this); }
  [[nodiscard]] auto&& value() && requires same_types { return std::move(winner_value(*this)); }

 private:
  template <class... Us>
  friend race_result<Us...> detail::make_race_result(std::size_t,
                                                     std::tuple<detail::race_slot<Us>...>&);

  race_result() = default;

  template <std::size_t I, class Self>
  static auto& checked(Self& self) {
    auto& slot = std::get<I>(self.values_);
    if (!slot) {
      throw std::logic_error("canopy::race_result::get: this contender returned no value");
    }
    return *slot;
  }
  template <class Self>
  static auto& winner_value(Self& self) {
    detail::race_value_t<first_t>* found = nullptr;
    std::apply(
        [&](auto&... slots) {
          std::size_t index = 0;
          ((index++ == self.index_ ? static_cast<void>(found = &*slots) : static_cast<void>(0)),
           ...);
        },
        self.values_);
    return *found;
  }

  std::size_t index_ = 0;
  std::tuple<std::optional<detail::race_value_t<Ts>>...> values_;
};

namespace detail {

// The result race returns: the winner's exception rethrown, else every
// value the contenders returned. A winner that ended neither way was
// destroyed unfinished (only at the executor's shutdown): task_cancelled.
template <class... Ts>
race_result<Ts...> make_race_result(std::size_t winner, std::tuple<race_slot<Ts>...>& slots) {
  race_result<Ts...> result;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    // A winner that ended cancelled, with neither a value nor an
    // exception, won nothing: the racing task's own cancel reached every
    // contender, and the first to end was one it stopped. A contender that
    // still returned a value (one it took from a channel) is the result
    // then, so that value is not dropped.
    bool winner_cancelled = false;
    static_cast<void>(((I == winner && (winner_cancelled = !std::get<I>(slots).value &&
                                                          !std::get<I>(slots).error,
                                        true)) ||
                       ...));
    if (winner_cancelled) {
      static_cast<void>(((std::get<I>(slots).value && (winner = I, true)) || ...));
    }
  }
  (std::index_sequence_for<Ts...>{});
  result.index_ = winner;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    const auto check_winner = [&](auto& slot, std::size_t index) {
      if (index != winner) {
        return;
      }
      if (slot.error) {
        std::rethrow_exception(std::exchange(slot.error, nullptr));
      }
      if (!slot.value) {
        throw task_cancelled();
      }
    };
    (check_winner(std::get<I>(slots), I), ...);
    // emplace, not assignment: a value type need only be move-constructible
    // (as a channel's is), and result's optionals are all empty here.
    const auto take = [](auto& into, auto& slot) {
      if (slot.value) {
        into.emplace(std::move(*slot.value));
      }
    };
    (take(std::get<I>(result.values_), std::get<I>(slots)), ...);
  }
  (std::index_sequence_for<Ts...>{});
  return result;
}

// The awaiter that co_await of an rvalue `A` uses: what its member
// operator co_await returns (a channel's recv(), a mutex's lock()), or `A`.
template <class A>
struct awaiter_of {
  using type = A;
};
template <class A>
requires requires(A&& awaitable) { std::move(awaitable).operator co_await(); }
struct awaiter_of<A> {
  using type = decltype(std::declval<A&&>().operator co_await());
};

// What co_await of an rvalue `A` gives, a reference decayed to a value
// (race keeps results in its own slots).
template <class A>
using awaited_result_t = decltype(std::declval<typename awaiter_of<A>::type&>().await_resume());
template <class A>
using awaited_value_t = std::conditional_t<std::is_void_v<awaited_result_t<A>>, void,
                                           std::decay_t<awaited_result_t<A>>>;

// An awaiter as a contender: a task that owns it (moved into the frame)
// and awaits it when it runs; it is lazy, as every task, so nothing waits
// before race spawns it. A cancel destroys the suspended frame, which
// releases the awaiter's wait as a cancelled task's wait is released.
template <class A>
task<awaited_value_t<A>> await_in_task(A awaitable) {
  co_return co_await std::move(awaitable);
}

template <class C>
auto as_contender(C&& contender) {
  if constexpr (is_task<std::remove_cvref_t<C>>::value) {
    return std::remove_cvref_t<C>(std::forward<C>(contender));
  } else {
    return await_in_task<std::remove_cvref_t<C>>(std::forward<C>(contender));
  }
}

}  // namespace detail

// See <canopy/race.hpp>.
template <class... Ts>
requires(sizeof...(Ts) > 0) task<race_result<Ts...>> race(task<Ts>... contenders) {
  constexpr std::size_t count = sizeof...(Ts);
  if (!(contenders.valid() && ...)) {  // before any contender runs
    throw std::invalid_argument("canopy::race: an empty canopy::task");
  }
  std::tuple<detail::race_slot<Ts>...> slots;
  std::array<join_handle<void>, count> handles;
  std::size_t spawned = 0;
  std::exception_ptr spawn_failure;
  try {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((handles[I] =
            canopy::spawn(detail::run_contender(std::move(contenders), &std::get<I>(slots))),
        ++spawned),
       ...);
    }
    (std::index_sequence_for<Ts...>{});
  } catch (...) {
    // The contenders already running end before the failure goes on.
    spawn_failure = std::current_exception();
    for (std::size_t index = 0; index < spawned; ++index) {
      handles[index].cancel();
    }
  }
  const std::size_t winner = co_await detail::first_end_awaiter<count>(
      handles, spawned, &detail::race_any_value<Ts...>, &slots);
  if (spawn_failure) {
    std::rethrow_exception(spawn_failure);
  }
  co_return detail::make_race_result<Ts...>(winner, slots);
}

// See <canopy/race.hpp>: contenders that are Canopy awaiters (a channel's
// recv(), a mutex's lock(), a semaphore's acquire(), sleep_for) as well as
// tasks. Each awaiter runs inside a task of its own.
template <class... Cs>
requires(sizeof...(Cs) > 0 &&
         !(detail::is_task<std::remove_cvref_t<Cs>>::value && ...)) auto race(Cs&&... contenders) {
  return race(detail::as_contender(std::forward<Cs>(contenders))...);
}

}  // namespace canopy
