// group_state — a task_group's shared state and the one place a child's end
// is reported to it (child_end), split from task_group.hpp (which has the
// design at its top; include/canopy/task_group.hpp has the user's contract).
#pragma once

#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "../coroutine/coroutine.hpp"
#include "../executor/executor.hpp"
#include "../wait/wait_link.hpp"

namespace canopy {

struct task_group_options {
  // The first child that fails (throws) cancels the others, as cancel().
  bool cancel_on_failure = false;
};

namespace detail {

template <class T>
using group_value_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <class T>
struct group_state {
  struct outcome {
    std::optional<group_value_t<T>> value;
    std::exception_ptr error;
  };

  explicit group_state(task_group_options opts) : options(opts) {}

  // Everything below under `mutex`.
  std::mutex mutex;
  task_group_options options;
  std::stop_source stop;
  // One per child, reused: the wrapper's handle, stored by launch() once
  // the spawn returned (the child may end before that: `ended`).
  struct slot {
    join_handle<void> handle;
    bool ended = false;
  };
  std::vector<slot> slots;
  std::vector<std::size_t> free_slots;
  std::size_t running = 0;
  std::size_t cancelled = 0;
  // Ended with a kept value or an exception, not taken yet. A child spawned
  // with spawn_detached puts only an exception here: its value is dropped
  // as it ends, so a group that lives as long as a server keeps nothing for
  // the children that succeeded.
  std::deque<outcome> finished;
  waker waiter;  // the task waiting on all_ended(), if any
  // The owner suspended in next / wait_all / close (group_wait.hpp's
  // group_link_wait), if any: fired once, by the child_end that makes its
  // wait over (any_finished: an outcome is kept, or none runs; else none
  // runs), and taken back by the owner's cancel only while no child_end
  // took it. A cancelled owner waits for every child (any_finished false).
  wait_link* link = nullptr;
  bool link_any_finished = false;

  // Under `mutex`: the wait of `link` is over; taken out to be fired.
  [[nodiscard]] wait_link* take_link_if_over() noexcept {
    if (link != nullptr && (running == 0 || (link_any_finished && !finished.empty()))) {
      return std::exchange(link, nullptr);
    }
    return nullptr;
  }

  // Ask every running child to stop, in two steps: under `mutex`, request
  // the token and take a reference on each running child's join state;
  // then, with `mutex` released, cancel_taken() cancels those tasks (each
  // is destroyed at its next suspension, or at once if suspended). Not
  // under the mutex: at the executor's shutdown a cancel destroys the task
  // at once, and its end (child_end) takes the mutex.
  [[nodiscard]] std::vector<detail::join_state_base*> stop_locked() {
    stop.request_stop();
    std::vector<detail::join_state_base*> taken;
    taken.reserve(running);
    for (slot& each : slots) {
      if (each.handle.valid()) {
        each.handle.state()->add_ref();  // the handle's own is held: safe to add
        taken.push_back(each.handle.state());
      }
    }
    return taken;
  }
  static void cancel_taken(const std::vector<detail::join_state_base*>& taken) noexcept {
    for (detail::join_state_base* each : taken) {
      each->cancel_and_wake();
      each->release_ref();
    }
  }
};

// Reports the child's end to the group (see the top of the file).
template <class T>
class child_end {
 public:
  // `keep_value`: false for spawn_detached (the value is dropped at the end).
  child_end(std::shared_ptr<group_state<T>> state, std::size_t slot, bool keep_value) noexcept
      : state_(std::move(state)), slot_(slot), keep_value_(keep_value) {}
  // Moved into the wrapper's frame; the moved-from one reports nothing.
  child_end(child_end&& other) noexcept = default;
  child_end& operator=(child_end&&) = delete;

  template <class... V>
  void succeed(V&&... value) {
    outcome_.value.emplace(std::forward<V>(value)...);
  }
  void fail(std::exception_ptr error) noexcept { outcome_.error = std::move(error); }
  // A fiber child reports into `box` from its own stack (fiber_reporter):
  // what it ended with, even when its task was cancelled meanwhile (its
  // handle then says task_cancelled), is the child's outcome.
  void report_from(std::shared_ptr<typename group_state<T>::outcome> box) noexcept {
    box_ = std::move(box);
  }

  ~child_end() {
    if (state_ == nullptr) {
      return;
    }
    // The wrapper ends only after the fiber ended (a cancelled coroutine
    // waits for the task it awaits: coroutine/coroutine_body.hpp), and the fiber's
    // writes to the box happen before its join state completes (release;
    // the wrapper saw it ready with acquire). Only a shutdown may destroy
    // the wrapper first; its box is then not read again.
    if (box_ != nullptr && !outcome_.error && !outcome_.value) {
      outcome_ = std::move(*box_);
    }
    const bool returned = outcome_.value.has_value();
    if (!keep_value_ && !outcome_.error) {
      outcome_.value.reset();  // not wanted: dropped here, outside the mutex
    }
    group_state<T>& state = *state_;
    std::vector<detail::join_state_base*> cancelling;
    std::unique_lock lock(state.mutex);
    // This task is ending: its handle only needs letting go (detaching a
    // task that ends with no exception discards nothing). If launch() has
    // not stored it yet, launch() lets go of it and frees the slot.
    auto& slot = state.slots[slot_];
    if (slot.handle.valid()) {
      slot.handle.detach();
      state.free_slots.push_back(slot_);
    } else {
      slot.ended = true;
    }
    --state.running;
    if (outcome_.error || outcome_.value) {
      const bool failed = outcome_.error != nullptr;
      state.finished.push_back(std::move(outcome_));
      if (failed && state.options.cancel_on_failure && !state.stop.stop_requested()) {
        cancelling = state.stop_locked();
      }
    } else if (!returned) {
      ++state.cancelled;
    }
    state.waiter.wake();
    wait_link* const over = state.take_link_if_over();
    lock.unlock();
    group_state<T>::cancel_taken(cancelling);
    // Fired outside the mutex: at shutdown the fire may destroy the owner's
    // frame (an abandoned link), whose group's destructor takes the mutex.
    if (over != nullptr) {
      wait_link::fire(over);
    }
  }

 private:
  std::shared_ptr<group_state<T>> state_;
  std::size_t slot_;
  bool keep_value_;
  typename group_state<T>::outcome outcome_;
  std::shared_ptr<typename group_state<T>::outcome> box_;
};

}  // namespace detail

}  // namespace canopy
