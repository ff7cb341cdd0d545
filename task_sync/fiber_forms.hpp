// The fiber forms of the task_sync waits: the same expression a coroutine
// task co_awaits, passed to canopy::this_fiber::await, blocks only the
// calling fiber (its worker runs other tasks meanwhile):
//
//   canopy::send_result<int> sent = canopy::this_fiber::await(ch.send(7));
//   std::optional<int> got = canopy::this_fiber::await(ch.recv());
//   canopy::mutex::guard held = canopy::this_fiber::await(m.lock());
//   canopy::this_fiber::await(sem.acquire(2));
//
// Each is this_fiber::wait_on on the operation's wait source, so nothing
// is spawned or allocated. Outside a fiber: std::logic_error. A cancelled
// fiber unwinds from the wait (fiber_unwind) after leaving the queue; a
// permit, the lock or a promised value it had been handed passes on.
#pragma once

#include <optional>

#include "../fiber/this_fiber.hpp"
#include "channel.hpp"
#include "sync.hpp"

namespace canopy::this_fiber {

template <class T>
send_result<T> await(canopy::detail::send_op<T>&& op) {
  return wait_on(op);
}

template <class T>
std::optional<T> await(canopy::detail::recv_op<T>&& op) {
  return wait_on(op);
}

inline canopy::mutex::guard await(canopy::mutex::lock_op&& op) { return wait_on(op); }

inline void await(canopy::semaphore::acquire_op&& op) { wait_on(op); }

}  // namespace canopy::this_fiber
