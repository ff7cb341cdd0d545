#include "signal.hpp"

#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "../coroutine/spawn.hpp"
#include "readiness.hpp"
#include "socket_ops.hpp"

namespace canopy::io {

namespace {

// The set of `signals`, or errc::invalid_argument with `what` naming the
// first bad one.
bool build_set(std::initializer_list<int> signals, sigset_t& set, std::error_code& error,
               std::string* what) noexcept {
  error.clear();
  sigemptyset(&set);
  if (signals.size() == 0) {
    error = std::make_error_code(std::errc::invalid_argument);
    if (what != nullptr) {
      *what = "canopy::io::signal_set: no signal given";
    }
    return false;
  }
  for (const int number : signals) {
    const bool uncatchable = number == SIGKILL || number == SIGSTOP;
    if (number < 1 || number > SIGRTMAX || uncatchable) {
      error = std::make_error_code(std::errc::invalid_argument);
      if (what != nullptr) {
        *what = "canopy::io::signal_set: signal " + std::to_string(number) +
                (uncatchable ? " (SIGKILL or SIGSTOP) cannot be caught"
                             : " is out of range (1.." + std::to_string(SIGRTMAX) + ")");
      }
      return false;
    }
    sigaddset(&set, number);
  }
  return true;
}

void throw_bad_input(std::initializer_list<int> signals) {
  sigset_t set;
  std::error_code error;
  std::string what;
  if (!build_set(signals, set, error, &what)) {
    throw std::system_error(error, what);
  }
}

auto signal_attempt(int fd) noexcept {
  return [fd]() noexcept { return detail::read_signal(fd); };
}

task<void> wait_then_call(signal_set& set, std::function<void(int, std::error_code)> on_signal) {
  std::error_code error;
  const int number = co_await set.wait(error);
  on_signal(number, error);
}

}  // namespace

ssize_t detail::read_signal(int fd) noexcept {
  signalfd_siginfo info{};
  const ssize_t got = ::read(fd, &info, sizeof info);
  return got < 0 ? -1 : static_cast<ssize_t>(info.ssi_signo);
}

void block_signals(std::initializer_list<int> signals, std::error_code& error) noexcept {
  sigset_t set;
  if (!build_set(signals, set, error, nullptr)) {
    return;
  }
  if (const int failed = ::pthread_sigmask(SIG_BLOCK, &set, nullptr); failed != 0) {
    error = std::error_code(failed, std::system_category());
  }
}

void block_signals(std::initializer_list<int> signals) {
  throw_bad_input(signals);
  std::error_code error;
  block_signals(signals, error);
  detail::throw_if(error, "canopy::io::block_signals");
}

signal_set::signal_set(reactor& owner, std::initializer_list<int> signals,
                       std::error_code& error) noexcept {
  sigset_t set;
  if (!build_set(signals, set, error, nullptr)) {
    return;
  }
  if (const int failed = ::pthread_sigmask(SIG_BLOCK, &set, nullptr); failed != 0) {
    error = std::error_code(failed, std::system_category());
    return;
  }
  const int fd = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) {
    error = std::error_code(errno, std::system_category());
    return;
  }
  // Assumed ready: a signal pending from before is read by the first wait.
  fd_ = detail::owned_socket(owner, fd, interest::readable, error);  // closes fd on failure
}

signal_set::signal_set(reactor& owner, std::initializer_list<int> signals) {
  throw_bad_input(signals);
  std::error_code error;
  *this = signal_set(owner, signals, error);
  detail::throw_if(error, "canopy::io::signal_set");
}

void signal_set::open_unbound(std::initializer_list<int> signals) {
  throw_bad_input(signals);
  sigset_t set;
  std::error_code error;
  build_set(signals, set, error, nullptr);
  if (const int failed = ::pthread_sigmask(SIG_BLOCK, &set, nullptr); failed != 0) {
    throw std::system_error(failed, std::system_category(), "canopy::io::signal_set");
  }
  auto state = std::make_unique<detail::unbound_signal_state>();  // before the descriptor
  unbound_fd_ = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (unbound_fd_ < 0) {
    throw std::system_error(errno, std::system_category(), "canopy::io::signal_set");
  }
  unbound_ = std::move(state);
}

signal_set::signal_set(signal_set&& other) noexcept
    : fd_(std::move(other.fd_)),
      unbound_fd_(std::exchange(other.unbound_fd_, -1)),
      unbound_(std::move(other.unbound_)) {}

signal_set& signal_set::operator=(signal_set&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::move(other.fd_);
    unbound_fd_ = std::exchange(other.unbound_fd_, -1);
    unbound_ = std::move(other.unbound_);
  }
  return *this;
}

void signal_set::close() noexcept {
  fd_.close();
  if (unbound_) {
    // A wait in progress (on whichever reactor) loses its registration
    // first: it ends with operation_canceled, and the descriptor is not
    // closed while a reactor still watches it. Under the lock the wait's
    // end takes too, so the registration is removed once.
    const std::lock_guard<std::mutex> hold(unbound_->lock);
    if (unbound_->owner != nullptr) {
      std::exchange(unbound_->owner, nullptr)->remove(unbound_->id);
    }
    if (unbound_fd_ >= 0) {
      ::close(std::exchange(unbound_fd_, -1));
    }
  }
}

detail::unbound_signal_wait::unbound_signal_wait(signal_set& set, reactor& owner,
                                                 std::error_code& error) noexcept
    : state_(set.unbound_.get()) {
  if (state_ == nullptr) {  // not a set made without a reactor, or moved from
    error = std::make_error_code(std::errc::operation_canceled);
    return;
  }
  const std::lock_guard<std::mutex> hold(state_->lock);
  if (set.unbound_fd_ < 0) {  // closed before this wait: the same end as a close during it
    error = std::make_error_code(std::errc::operation_canceled);
    return;
  }
  if (state_->owner != nullptr) {  // one wait at a time, as on a set with a reactor
    error = std::make_error_code(std::errc::connection_already_in_progress);
    return;
  }
  reg_ = registration(owner, set.unbound_fd_, interest::readable, error);
  if (error) {
    return;
  }
  fd_ = set.unbound_fd_;
  state_->owner = reg_.owner();
  state_->id = reg_.id();
}

detail::unbound_signal_wait::~unbound_signal_wait() {
  if (state_ == nullptr) {
    return;
  }
  const std::lock_guard<std::mutex> hold(state_->lock);
  // Ours unless a close() removed it (a later wait may have registered since).
  if (reg_.valid() && state_->owner == reg_.owner() && state_->id.slot == reg_.id().slot &&
      state_->id.generation == reg_.id().generation) {
    state_->owner = nullptr;
  }
  reg_.reset();  // a no-op after close() removed it (the id is stale)
}

task<int> signal_set::wait(std::error_code& error) {
  if (unbound_) {
    // Registered for this wait only (see Binding in signal.hpp); removed
    // when the frame ends, or by a close() meanwhile, before the
    // descriptor is closed.
    const detail::unbound_signal_wait here(*this, reactor::current(), error);
    if (error) {
      co_return 0;
    }
    const detail::io_result got = co_await canopy::wait_on(
        detail::readiness_op(here.reg(), direction::read, signal_attempt(here.fd())));
    error = got.error;
    co_return error ? 0 : static_cast<int>(got.count);
  }
  if (!is_open()) {  // closed before this wait: the same end as a close during it
    error = std::make_error_code(std::errc::operation_canceled);
    co_return 0;
  }
  const detail::io_result got = co_await canopy::wait_on(
      detail::readiness_op(fd_.reg(), direction::read, signal_attempt(fd_.fd())));
  error = got.error;
  co_return error ? 0 : static_cast<int>(got.count);
}

task<int> signal_set::wait() {
  std::error_code error;
  const int number = co_await wait(error);
  detail::throw_if(error, "canopy::io::signal_set::wait");
  co_return number;
}

int signal_set::try_wait(std::error_code& error) noexcept {
  if (!is_open()) {
    error = std::make_error_code(std::errc::operation_canceled);
    return 0;
  }
  if (unbound_fd_ >= 0) {  // nothing to wait for: the descriptor alone answers
    error.clear();
    const ssize_t number = detail::read_signal(unbound_fd_);
    if (number < 0) {
      error = errno == EAGAIN ? std::make_error_code(std::errc::resource_unavailable_try_again)
                              : std::error_code(errno, std::system_category());
      return 0;
    }
    return static_cast<int>(number);
  }
  const detail::io_result got =
      detail::try_io(fd_.reg(), direction::read, signal_attempt(fd_.fd()));
  error = got.error;
  return error ? 0 : static_cast<int>(got.count);
}

void signal_set::async_wait(executor& pool, std::function<void(int, std::error_code)> on_signal) {
  if (!on_signal) {  // else bad_function_call when the signal comes, far from the mistake
    throw std::invalid_argument("canopy::io::signal_set::async_wait: an empty callback");
  }
  pool.spawn_detached(wait_then_call(*this, std::move(on_signal)));
}

}  // namespace canopy::io
