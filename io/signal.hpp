// signal_set — waiting for POSIX signals on the reactor, through signalfd.
//
//   canopy::io::signal_set stop{SIGINT, SIGTERM};     // in main, before the executor
//   canopy::executor pool(canopy::io::with_reactor());
//   // inside a task:
//   int which = co_await stop.wait();                  // SIGINT or SIGTERM
//   int mine = co_await canopy::io::signal_set{SIGINT, SIGTERM}.wait();  // a set of its own
//   // in a fiber (io/fiber/fiber_io.hpp): int which = canopy::this_fiber::wait(stop);
//   stop.async_wait(pool, [](int which, std::error_code error) { ... });  // a callback
//
// The blocking rule. A signal reaches a signalfd only while it is blocked
// in every thread of the process; a thread that has it unblocked takes it
// with the signal's disposition instead (for SIGINT and SIGTERM the default
// ends the process). A thread inherits its creator's mask, so: call
// block_signals() (or construct the signal_set) in main before creating the
// executor and any other thread. signal_set's constructor blocks its
// signals in the calling thread only; it cannot reach threads that already
// exist. The signals stay blocked after the set is destroyed (restoring a
// mask in one thread of many would be a lie about the others).
//
// Binding. signal_set{SIGINT, SIGTERM} needs no reactor, so it may be
// constructed anywhere, in main before any thread exists too: it checks
// the signals, blocks them in the calling thread and opens the signalfd.
// Each wait then registers the descriptor with the reactor of the task or
// fiber that waits (async_wait: the one of `pool`) for the length of that
// wait only, so such a set may outlive the executor (declared in main
// before it). signal_set(reactor, {...}) registers once, for its lifetime,
// and must be closed or destroyed before that reactor goes away, as a
// socket. try_wait() needs no reactor.
//
// Several sets may watch the same signal: each pending signal is read by
// one of them (whichever reads first). A signal that arrives while nobody
// waits stays pending in the kernel and ends the next wait at once; the
// kernel keeps one pending instance of each standard signal.
//
// Errors. Bad input throws std::system_error with errc::invalid_argument,
// or reports it through the std::error_code& forms: a signal number out of
// range (not 1..SIGRTMAX), SIGKILL or SIGSTOP (cannot be caught), an empty
// set. wait() ends with errc::operation_canceled when the set is closed
// meanwhile. EAGAIN and EINTR never surface.
//
// Threads: one wait at a time on a set (from a task, a fiber, or the
// callback form; a second one while another waits ends at once with
// errc::connection_already_in_progress); close() from any thread, not while another thread still
// uses the object. Closing a set made without a reactor while one of its
// waits waits is for the waiting thread only: from elsewhere, cancel the
// waiting task instead (its wait ends and the set stays usable).
// async_wait's set must outlive the callback's run.
#pragma once

#include <sys/types.h>

#include <concepts>
#include <csignal>
#include <functional>
#include <initializer_list>
#include <system_error>

#include "../coroutine/task.hpp"
#include "../executor/executor.hpp"
#include "owned_socket.hpp"
#include "reactor.hpp"

namespace canopy::io {

// Block `signals` in the calling thread (pthread_sigmask); threads created
// afterwards inherit the mask. Errors: as signal_set's bad input.
void block_signals(std::initializer_list<int> signals, std::error_code& error) noexcept;
void block_signals(std::initializer_list<int> signals);

class signal_set {
 public:
  signal_set() noexcept = default;
  // With no reactor (see Binding above): any thread, inside a task or not. Bad input throws
  // std::system_error before anything else. The signals are separate arguments, not an
  // std::initializer_list: an initializer_list temporary in a co_await expression (co_await
  // signal_set{SIGINT}.wait()) is rejected by g++ 12 ("array used as initializer").
  template <std::convertible_to<int>... Signals>
  requires(sizeof...(Signals) > 0) explicit signal_set(Signals... signals) {
    open_unbound({static_cast<int>(signals)...});
  }
  signal_set(reactor& owner, std::initializer_list<int> signals);
  signal_set(reactor& owner, std::initializer_list<int> signals, std::error_code& error) noexcept;
  signal_set(signal_set&& other) noexcept;
  signal_set& operator=(signal_set&& other) noexcept;
  signal_set(const signal_set&) = delete;
  signal_set& operator=(const signal_set&) = delete;
  ~signal_set() { close(); }

  // The next signal of the set (its number); 0 with the error_code form on error.
  task<int> wait(std::error_code& error);
  task<int> wait();
  // Without waiting: a pending signal, or errc::resource_unavailable_try_again
  // (errc::operation_canceled on a closed set, as a wait).
  int try_wait(std::error_code& error) noexcept;
  // The callback form: runs `on_signal(number, error)` once, as a task on
  // `pool`, when a signal of the set arrives (or with operation_canceled
  // after close()). Throws spawn_error if `pool` is shutting down,
  // std::invalid_argument for an empty callback.
  void async_wait(executor& pool, std::function<void(int, std::error_code)> on_signal);

  // Stop watching (idempotent): a waiting wait() ends with operation_canceled,
  // and so does every wait (and try_wait) on the closed set.
  void close() noexcept;
  [[nodiscard]] bool is_open() const noexcept { return fd_.is_open() || unbound_fd_ >= 0; }
  [[nodiscard]] int native_handle() const noexcept {
    return unbound_fd_ >= 0 ? unbound_fd_ : fd_.fd();
  }
  // The registration with the set's reactor; an empty one for a set made
  // without a reactor (each of its waits registers on its own).
  [[nodiscard]] const registration& reg() const noexcept { return fd_.reg(); }

 private:
  void open_unbound(std::initializer_list<int> signals);

  detail::owned_socket fd_;  // the signalfd of a set made with a reactor
  int unbound_fd_ = -1;      // the signalfd of a set made without one
};

namespace detail {
// One read of a signalfd: the signal's number, or -1 with errno (the
// attempt the task, fiber and callback forms share).
ssize_t read_signal(int fd) noexcept;
// A wait on a set made without a reactor whose registration failed: its
// descriptor registered already means another wait on the set is in
// progress (one at a time), which is errc::connection_already_in_progress,
// as a second wait on a set with a reactor (or on a stream) gets, not
// file_exists.
void second_unbound_wait(std::error_code& error) noexcept;
}  // namespace detail

}  // namespace canopy::io
