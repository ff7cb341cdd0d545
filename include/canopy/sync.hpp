// <canopy/sync.hpp> — waiting between tasks: canopy::mutex, canopy::semaphore
// and canopy::async_event, each waited on without holding a worker thread.
//
//   canopy::mutex room;
//   {
//     canopy::mutex::guard held = co_await room.lock();   // FIFO-fair
//     ...                                                  // unlocks at scope end
//   }
//   canopy::semaphore slots(4);                            // 4 permits
//   co_await slots.acquire();  ...  slots.release();
//   canopy::async_event started;
//   co_await started;  /* elsewhere: */ started.set();
//
// Who may call what, from where:
//   * co_await m.lock() / sem.acquire(n) / event: inside a canopy::task. In a
//     fiber: canopy::this_fiber::await(m.lock()), await(sem.acquire(n)),
//     await(event) (with <canopy/fiber.hpp>), blocking only the fiber.
//   * try_lock, unlock, guard::unlock, try_acquire, release, event.set() and
//     reset(): from any thread, in a task or not; they never wait.
//   * The mutex, semaphore or event must outlive every task waiting on it.
//   * To give up a wait when a std::stop_token is stopped, race it:
//     co_await canopy::race(m.lock(), canopy::stopped(token)) or
//     race(sem.acquire(), ...) (<canopy/race.hpp>): a lock or permit granted
//     as the stop wins is in the result (has_value<0>()), never leaked.
// Semantics:
//   * mutex: one holder; waiters get the lock in the order they asked. The
//     guard unlocks when destroyed; guard::release() gives up ownership for a
//     later mutex::unlock(). A mutex is not recursive (a holder that locks
//     again waits for itself).
//   * semaphore(permits, max_permits = semaphore::unbounded): acquire(n)
//     waits until n permits are free and takes them, FIFO (a large request
//     at the head is not overtaken by smaller ones); try_acquire(n) takes
//     them only if no one waits and n are free. release(n) hands permits to
//     the waiters first.
//   * async_event: manual reset; set() wakes every waiter.
//   * Cancelling a waiting task (handle.cancel()) removes it from the queue
//     and loses nothing: permits (or the lock) already handed to it go to
//     the next waiter.
// Errors (std::logic_error, with a message): guard::unlock() on a guard that
// holds nothing; mutex::unlock() of a mutex that is not locked;
// release(n) with n > max_permits, or that would raise the free permits
// above max_permits while no one waits (more released than acquired; with
// waiters queued an extra release cannot be told from a real one).
// std::invalid_argument: acquire(n) with n > max_permits; a semaphore with
// permits > max_permits or max_permits == 0.
#pragma once

#include "detail/task_sync/sync.hpp"
#include "task.hpp"
