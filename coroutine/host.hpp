// resume_on_host(): continue a task on its executor's host thread — the
// thread that runs the executor from its own loop (executor::run_once,
// run_for, run_until_idle, run; docs/embedding.md).
//
//   canopy::task<void> handle(request r) {       // spawned from the loop thread
//     reply out = compute(r);                    // on a worker
//     co_await canopy::resume_on_host();         // back on the loop thread
//     r.connection.write(out);                   // loop-thread-only state is safe here
//   }
//
// The run ends with run_outcome::to_host: the task goes to the host
// channel's queue (executor/host/host_channel.hpp), the notify descriptor becomes
// readable if the host sleeps, and the host's next run function resumes it.
// After its next suspension the task is an ordinary task again: a wake
// schedules it on any worker (await resume_on_host() again to come back).
// Only inside a canopy::task. If no thread ever runs the executor as its
// host, the task runs at shutdown() (drain policy) or is dropped there.
//
// Cancel: a task queued for the host is runnable on the host thread only,
// so a cancel() that finds it there (or lands while it runs on its way
// there) takes effect when a host next runs: the host destroys it, on the
// loop thread, without resuming it, and only then does its handle report
// task_cancelled. Until then get() and wait_*() wait for that run, except
// with no owned workers, where they run the executor's tasks themselves
// (unless a host is running it). A loop that stops calling run_* with
// such tasks queued leaves them, cancelled or not, to shutdown(). Not
// taken off the host's queue for a worker to destroy: the task asked for
// the loop thread, where its destructors may touch the loop's state.
#pragma once

#include "../executor/task_slot.hpp"
#include "yield.hpp"

namespace canopy {

[[nodiscard]] inline detail::bare_suspend<detail::run_outcome::to_host> resume_on_host() noexcept {
  return {};
}

}  // namespace canopy
