// <canopy/io/signal.hpp> — awaiting POSIX signals through signalfd on a
// Canopy executor's reactor: canopy::io::signal_set and
// canopy::io::block_signals.
//
//   canopy::task<int> on_stop(canopy::io::signal_set& stop) { co_return co_await stop.wait(); }
//   int main() {
//     canopy::io::signal_set stop{SIGINT, SIGTERM};   // first: before any thread
//     canopy::executor pool(canopy::io::with_reactor());
//     int which = canopy::block_on(pool, on_stop(stop));   // SIGINT or SIGTERM
//   }
//   // or, once the signals are blocked (block_signals, or a set as above) in main, in a task:
//   int which = co_await canopy::io::signal_set{SIGINT, SIGTERM}.wait();
//
// The contract that matters: a signal reaches the set only while it is
// blocked in every thread of the process; a thread with it unblocked takes
// it with its normal disposition (SIGINT, SIGTERM: the process ends).
// Threads inherit the mask of their creator, so block the signals in main
// before creating the executor or any other thread (block_signals, or a
// signal_set constructed there); a signal_set only blocks them in the
// thread that constructs it. signal_set{...} needs no reactor (main is
// fine, and it may outlive the executor): each wait registers it with the
// waiting task's reactor for that wait; signal_set(reactor, {...})
// registers once and must go before that reactor does. Forms: co_await set.wait() in a task,
// canopy::this_fiber::wait(set) in a fiber (<canopy/io/fiber.hpp>),
// set.async_wait(pool, callback) for plain code. Errors: a signal number
// out of range, SIGKILL, SIGSTOP or an empty set throw std::system_error
// (errc::invalid_argument, the message names the signal) or report it
// through the std::error_code& forms; an empty async_wait callback throws
// std::invalid_argument; a wait on a closed set ends with
// errc::operation_canceled.
//
// Reference (namespace canopy::io):
//   block_signals({sig, ...}[, error]): blocks them in the calling thread
//     (pthread_sigmask); threads created afterwards inherit the mask.
//     Errors as signal_set's bad input.
//   signal_set(sig, ...): no reactor; any thread, in a task or not (main
//     before any thread exists too). Checks the signals, blocks them in the
//     calling thread, opens the signalfd; each wait registers it with the
//     waiting task's (or async_wait's pool's) reactor for that wait only.
//   signal_set(reactor, {sig, ...}[, error]): registered once, for its
//     lifetime; close or destroy it before that reactor goes away.
//   co_await wait([error]) -> int: the next signal of the set (0 with the
//     error form on error), inside a task; this_fiber::wait(set[, error])
//     in a fiber.
//   try_wait(error) -> int: a pending signal, or
//     errc::resource_unavailable_try_again; needs no reactor.
//   async_wait(pool, callback(int, std::error_code)): runs the callback
//     once, as a task on `pool`, when a signal arrives (or with
//     operation_canceled after close()). pool shutting down: spawn_error.
//     The set must outlive the callback's run.
//   close() (idempotent; the destructor closes), is_open(), native_handle().
//     Move-only. The signals stay blocked after the set is gone.
// Semantics: one wait at a time on a set (a second one while another
// waits: errc::connection_already_in_progress); several sets may watch one
// signal (each pending signal is read by one of them); a signal that comes
// while nobody waits stays pending and ends the next wait at once (the
// kernel keeps one pending instance of each standard signal). close() from
// any thread, not while another thread is inside a call on the set other
// than a waiting wait, which then ends with errc::operation_canceled (a
// set made with or without a reactor; async_wait's callback then runs
// with it). Cancelling the waiting task also ends its wait, and the set
// stays usable. EAGAIN and EINTR never surface. Link canopy.
#pragma once

#include "../detail/io/signal.hpp"
#include "../io.hpp"
