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
// Reference (namespace canopy):
//   fiber(fn, stack_size = 64 KiB) -> a fiber description (fn stored by
//     value; the stack, rounded up to pages, is taken when it first runs).
//     A null function pointer or empty std::function: std::invalid_argument
//     (here); stack_size 0 or above 1 GiB: std::invalid_argument at the
//     spawn. Every spawn verb takes it: pool.spawn / try_spawn /
//     spawn_detached from any thread, canopy::spawn / try_spawn /
//     spawn_detached inside a running task (the executor's errors:
//     <canopy/executor.hpp>); spawn returns a join_handle<R>. No stack when
//     it first runs: get() rethrows std::bad_alloc. A detached fiber's
//     exception goes to on_detached_exception.
//   this_fiber:: calls, only inside a fiber (elsewhere std::logic_error
//   naming the call); each switches out (the worker is free meanwhile) and
//   returns when the fiber resumes, maybe on another worker (keep no
//   thread_local's address across them):
//     yield()                  run again after other ready work;
//     await(handle) -> T       a join_handle: its value, or
//                              its exception (task_cancelled if destroyed);
//                              an empty handle: std::logic_error;
//     await(event)             an async_event;
//     await(task) -> T         a canopy::task<T>: spawned, then awaited;
//     await(awaitable)         anything a canopy::task can co_await (a
//                              channel's send/recv, a mutex's lock, race,
//                              a sleep), awaited by a small spawned task;
//     wait_on(source) -> R     a wait source (<canopy/task.hpp>);
//     wait_for_wake()          until any wake (current_waker());
//     resume_on_host()         continue on the executor's host thread (a
//                              cancel takes effect when a host next runs,
//                              as for canopy::resume_on_host);
//     run_blocking(fn) -> R    as canopy::run_blocking (<canopy/blocking.hpp>);
//     stack_size(), stack_guarded()  the stack it runs on.
//   fiber_unwind: what a suspension point throws in a fiber being
//     cancelled or dropped at shutdown, to run the destructors on its
//     stack. Do not swallow it (catch (...) must rethrow): a fiber that
//     does is never resumed again, every later suspension point throws it
//     at once, and its result is discarded (task_cancelled). Do not wait in
//     a destructor (during the unwind that throws from it: std::terminate).
//     A cancelled fiber counts as ended once its stack has unwound; one
//     cancelled while it awaits a task's handle cancels that task and
//     unwinds once it ended.
//   stack_pool::stats() -> stack_pool_stats: the stacks' pool, from any
//     thread: chunks (mappings made), stacks (carved, free or in use),
//     guarded_stacks (of which have a PROT_NONE guard page below them),
//     in_use (out of the shared pool), guard_limit (guarded stacks allowed;
//     0 until the pool first carved or set_guard_limit was called).
//   stack_pool::set_guard_limit(n): how many stacks may have a guard page
//     in total, for chunks carved afterwards (guarded ones keep theirs). A
//     guarded stack's overflow faults at once; past the limit (by default
//     half of what vm.max_map_count leaves) a stack has only a canary,
//     checked when its fiber switches out: give fibers that recurse deeply
//     or keep large locals a guarded stack.
//   stack_pool::default_stack_size: fiber()'s default stack (64 KiB).
// Link canopy-fiber (pkg-config canopy-fiber, CMake canopy::fiber, meson
// dependency('canopy-fiber')), which brings Boost.Context.
#pragma once

#include "canopy.hpp"
#include "detail/fiber/fiber.hpp"
// The fiber forms of <canopy/channel.hpp> and <canopy/sync.hpp>:
// this_fiber::await(ch.send(v)), await(ch.recv()), await(m.lock()), await(sem.acquire(n)).
#include "detail/task_sync/fiber_forms.hpp"
// The fiber form of <canopy/blocking.hpp>: this_fiber::run_blocking(fn).
#include "detail/blocking/blocking_fiber.hpp"
