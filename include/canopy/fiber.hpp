// <canopy/fiber.hpp> — stackful fibers on Boost.Context: ordinary code that
// blocks only its fiber.
//
//   auto handle = pool.spawn(canopy::fiber([] {
//     int child = canopy::this_fiber::await(canopy::spawn(canopy::fiber([] { return 41; })));
//     canopy::this_fiber::yield();
//     return child + 1;
//   }));
//   int value = handle.get();   // 42
//
// What is here: canopy::fiber(fn, stack_size = default), a description of a
// fiber that every spawn verb takes — pool.spawn / try_spawn /
// spawn_detached from any thread, canopy::spawn / try_spawn /
// spawn_detached inside a running task — and inside a fiber
// canopy::this_fiber::await (a join handle, a task, an async_event, another
// awaitable), yield, wait_on (a wait source), wait_for_wake,
// resume_on_host. Outside a fiber
// the this_fiber calls throw std::logic_error; a cancelled fiber unwinds
// from its suspension point (canopy::fiber_unwind: do not swallow it). The
// full contract is at the top of detail/fiber/fiber_task.hpp and
// detail/fiber/this_fiber.hpp. Link canopy-fiber (pkg-config canopy-fiber,
// CMake canopy::fiber, meson dependency('canopy-fiber')), which brings
// Boost.Context.
#pragma once

#include "canopy.hpp"
#include "detail/fiber/fiber.hpp"
// The fiber forms of <canopy/channel.hpp> and <canopy/sync.hpp>:
// this_fiber::await(ch.send(v)), await(ch.recv()), await(m.lock()), await(sem.acquire(n)).
#include "detail/task_sync/fiber_forms.hpp"
// The fiber form of <canopy/blocking.hpp>: this_fiber::run_blocking(fn).
#include "detail/blocking/blocking_fiber.hpp"
