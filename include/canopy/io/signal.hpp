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
// canopy::io::this_fiber::wait(set) in a fiber (<canopy/io/fiber.hpp>),
// set.async_wait(pool, callback) for plain code. Errors: a signal number
// out of range, SIGKILL, SIGSTOP or an empty set throw std::system_error
// (errc::invalid_argument, the message names the signal) or report it
// through the std::error_code& forms; an empty async_wait callback throws
// std::invalid_argument; a wait on a closed set ends with
// errc::operation_canceled. The full contract is at the top of
// detail/io/signal.hpp. Link canopy.
#pragma once

#include "../detail/io/signal.hpp"
#include "../io.hpp"
