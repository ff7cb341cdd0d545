// lazy_child — a joined coroutine task's body before it first runs as a
// task of its own, and the join state blocks such tasks are spawned and
// taken over with (coroutine/spawn.hpp spawns them; coroutine/join_await.hpp
// takes them over unstarted).
#pragma once

#include <utility>

#include "../executor/join_state.hpp"
#include "../executor/scheduler.hpp"
#include "../executor/task_slot.hpp"
#include "coroutine_body.hpp"

namespace canopy::detail {

// A joined task's body until it first runs as a task of its own: only the
// root's frame address (one pointer, stored by scheduler::spawn_child).
// Most children of a fork never get a full body: their awaiter takes them
// over unstarted (coroutine/join_await.hpp), which needs only the frame.
// A child that runs as a task (stolen, found by its worker, awaited from
// elsewhere) builds its coroutine_body in place first and from then on is
// that body (its slot's vtable says so); one dropped at shutdown builds it
// only to destroy it (its slot's vtable stays null). Its
// join state is the one the root's promise delivers to, named by the
// spawner before the slot was published.
template <class T>
struct lazy_child {
  using body = coroutine_body<T>;

  static void* frame_of(const void* storage) noexcept {
    return *static_cast<void* const*>(storage);
  }

  static void build(void* storage) noexcept {
    void* const frame = frame_of(storage);
    const auto root = body::handle_type::from_address(frame);
    auto* made = ::new (storage) body{task_context(root), root, root.promise().joined_state()};
    root.promise().set_context(&made->context);
  }
  static detail::run_outcome run_entry(void* storage) {
    build(storage);
    slot_of_storage(storage).vtable = &body::table;
    return body::run_entry(storage);
  }
  // The body is built to be destroyed, and the slot's vtable is left as the
  // caller left it: shutdown takes the vtable (null) before it destroys a
  // task, which is how its walk over the slots, and a cancel from inside
  // another task's destruction, know this one is gone. Published again
  // here, it made a child that a nested cancel destroyed first look live
  // to the walk, which destroyed it a second time.
  static void destroy_entry(void* storage, detail::task_end end) noexcept {
    build(storage);
    body::destroy_entry(storage, end);
  }
  // spawn_body's constructor callback, for the placements spawn_child
  // does not take.
  static void construct(void* storage, void* frame) { ::new (storage) void*(frame); }
  static constexpr detail::task_vtable table{&run_entry, &destroy_entry};
};

// The join state of a coroutine task spawned with a handle: in the block
// the spawning worker (`spawner`, when a task spawns it) kept from its last
// take-over if it has the size (a fork's spawn follows its last join), else
// from the pool.
template <class T>
detail::pooled_join_state<T>* make_join_state(detail::worker_context* spawner) {
  if (spawner != nullptr && spawner->kept_join_state_size == sizeof(detail::pooled_join_state<T>)) {
    spawner->kept_join_state_size = 0;
    return detail::pooled_join_state<T>::make_in(std::exchange(spawner->kept_join_state, nullptr));
  }
  return new detail::pooled_join_state<T>();
}

// The state of a coroutine task taken over unstarted, every reference of
// which the caller holds: it never held a value, an exception or a
// continuation, so nothing its destructors would release, and its block
// goes without them: kept by the calling worker for its next coroutine
// spawn if it keeps none, else back to the pool.
template <class T>
void discard_unstarted(detail::join_state<T>* state) noexcept {
  // Every coroutine task's state is a pooled_join_state (spawn_coroutine).
  void* const block = static_cast<detail::pooled_join_state<T>*>(state);
  detail::worker_context& worker = *detail::current_worker();
  if (worker.kept_join_state == nullptr) {
    worker.kept_join_state = block;
    worker.kept_join_state_size = sizeof(detail::pooled_join_state<T>);
  } else {
    free_block(block, sizeof(detail::pooled_join_state<T>));
  }
}

}  // namespace canopy::detail
