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
// errc::connection_already_in_progress); close() from any thread, not while
// another thread is inside a call on the set other than a waiting wait:
// that wait (task, fiber or async_wait's) ends with operation_canceled, on
// a set made with a reactor or without one (whose waits register it: close
// removes the registration of the wait in progress first, under a lock
// the wait's end takes too). async_wait's set must outlive the callback's
// run.
#pragma once

#include <sys/types.h>

#include <concepts>
#include <csignal>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <system_error>

#include "../coroutine/task.hpp"
#include "../executor/executor.hpp"
#include "owned_socket.hpp"
#include "reactor.hpp"

namespace canopy::io {

class signal_set;

namespace detail {
class unbound_signal_wait;
// What a set made without a reactor shares with its wait in progress: the
// wait's registration, so that close() removes it (waking the wait with
// operation_canceled) before it closes the descriptor, from any thread.
struct unbound_signal_state {
  std::mutex lock;
  reactor* owner = nullptr;  // the registration of the wait in progress, if any
  reactor::registration_id id{};
};
}  // namespace detail

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
  friend class detail::unbound_signal_wait;
  void open_unbound(std::initializer_list<int> signals);

  detail::owned_socket fd_;  // the signalfd of a set made with a reactor
  int unbound_fd_ = -1;      // the signalfd of a set made without one
  std::unique_ptr<detail::unbound_signal_state> unbound_;  // made without one: its wait
};

namespace detail {
// One read of a signalfd: the signal's number, or -1 with errno (the
// attempt the task, fiber and callback forms share).
ssize_t read_signal(int fd) noexcept;
// One wait's registration of a set made without a reactor (the task and
// fiber forms of wait()), noted in the set's state while it lasts.
class unbound_signal_wait {
 public:
  // Registers the set's descriptor with `owner`. Fails (`error` set, reg()
  // empty) with operation_canceled on a closed set, and with
  // connection_already_in_progress while another wait of the set waits.
  unbound_signal_wait(signal_set& set, reactor& owner, std::error_code& error) noexcept;
  ~unbound_signal_wait();
  unbound_signal_wait(const unbound_signal_wait&) = delete;
  unbound_signal_wait& operator=(const unbound_signal_wait&) = delete;

  [[nodiscard]] const registration& reg() const noexcept { return reg_; }
  [[nodiscard]] int fd() const noexcept { return fd_; }

 private:
  unbound_signal_state* state_;
  registration reg_;
  int fd_ = -1;
};
}  // namespace detail

}  // namespace canopy::io
