// <canopy/channel.hpp> — channels between tasks: canopy::channel<T>, a
// bounded multi-producer multi-consumer queue, and canopy::oneshot<T>, one
// value from one sender to one receiver.
//
//   canopy::channel<std::string> lines(64);              // capacity >= 1
//   co_await lines.send("hello");                        // waits while full
//   while (std::optional<std::string> line = co_await lines.recv()) { ... }
//   lines.close();                                       // receivers drain, then end
//
//   auto [tx, rx] = canopy::oneshot<int>();
//   tx.send(42);                                         // never waits
//   std::optional<int> answer = co_await rx.recv();
//
// Who may call what, from where:
//   * co_await ch.send(v) / ch.recv() / rx.recv(): inside a canopy::task. A
//     waiting task holds no worker thread. In a fiber the same expression
//     goes to canopy::this_fiber::await(ch.send(v)) (with <canopy/fiber.hpp>),
//     which blocks only the fiber.
//   * try_send, try_recv, close, is_closed, size, oneshot_sender::send: from
//     any thread, in a task or not; they never wait.
//   * The channel must outlive every task waiting on it. T's move
//     constructor must not throw.
// Semantics:
//   * FIFO: values leave in the order they entered; waiting senders and
//     waiting receivers are served in the order they started waiting.
//   * send -> send_result<T>: true on success; after close() (or a close
//     while waiting) false with error() == channel_errc::closed and the value
//     handed back in value(). try_send also fails with channel_errc::full.
//   * recv -> std::optional<T>: a value; after close(), the values still in
//     the channel, then std::nullopt (end of channel). try_recv ->
//     recv_result<T>: `if (r)` a value, read with *r, r-> or r.value();
//     else r.error() is channel_errc::empty or channel_errc::closed.
//   * close(): idempotent, from anywhere; wakes every waiting sender (value
//     handed back) and every waiting receiver (end of channel).
//   * Cancelling a waiting task (handle.cancel()) removes it from the queue:
//     a waiting sender's value is dropped with the task, unless the value
//     had already entered the channel (then it is delivered); a receiver
//     that had been woken for a value and is cancelled before taking it
//     passes the value on to the next receiver. Nothing in the channel is
//     lost.
//   * To give up a wait when a std::stop_token is stopped, race it:
//     co_await canopy::race(ch.recv(), canopy::stopped(token))
//     (<canopy/race.hpp>); a value that arrives as the stop wins is kept in
//     the result, never lost.
//   * A capacity of 0 throws std::invalid_argument (no rendezvous channel).
//   * No allocation per message: the ring is allocated once; a waiting
//     task's queue node lives in its own frame or fiber stack. A oneshot
//     allocates once, for both ends.
// Errors: std::invalid_argument (capacity 0); send_result::value() after a
// successful send and a moved-from oneshot receiver: std::logic_error;
// recv_result's value(), * or -> with no value: std::system_error.
#pragma once

#include "detail/task_sync/channel.hpp"
#include "task.hpp"
