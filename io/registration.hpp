// registration — a descriptor registered with a reactor (RAII), and the
// readiness waits on it for tasks (the fibers' are in io/fiber/fiber_io.hpp).
//
//   canopy::io::registration reg(reactor, fd, canopy::io::interest::readable);
//   std::error_code error = co_await canopy::io::readable(reg);   // a task
//   error = canopy::this_fiber::readable(reg);                 // a fiber (fiber/fiber_io.hpp)
//   error = co_await canopy::io::readable(fd);                    // one-shot
//
// A registration owns its reactor slot, not the descriptor: destroy (or
// reset()) the registration before closing the descriptor. Destroying it
// while a task waits on it wakes that task, whose wait then returns
// errc::operation_canceled.
//
// Readiness is edge-triggered and sticky: after an edge a direction stays
// ready until an operation reports EAGAIN and calls clear_ready() with the
// tick it read before that operation (io/reactor.hpp). readable(reg)
// returns at once while the direction is ready; a caller that loops on
// readable() without consuming the data until EAGAIN does not block.
//
// The one-shot readable(fd) / writable(fd) register `fd` with the current
// task's reactor for the duration of the wait (two epoll_ctl calls): for
// descriptors you do not keep registered. It fails with errc::file_exists
// if `fd` is already registered with that reactor.
//
// Errors are std::error_code values (docs/io.md, "Error convention"): a
// wait returns {} when the direction is ready, the descriptor's pending
// error (SO_ERROR) when epoll reported EPOLLERR, errc::operation_canceled
// when the registration was removed meanwhile.
#pragma once

#include <cstdint>
#include <system_error>

#include "../coroutine/custom_wait.hpp"
#include "../coroutine/task.hpp"
#include "reactor.hpp"

namespace canopy::io {

class registration {
 public:
  registration() noexcept = default;
  // Register `fd`; on failure *this stays empty and `error` says why.
  // `assume_ready`: see reactor::add.
  // `deferred`: see reactor::add (the TCP sockets, whose operations are
  // completion requests on the io_uring backend).
  registration(reactor& owner, int fd, interest what, std::error_code& error,
               bool assume_ready = true, bool deferred = false) noexcept;
  // Throwing form: std::system_error whose message names the descriptor.
  registration(reactor& owner, int fd, interest what);
  registration(registration&& other) noexcept;
  registration& operator=(registration&& other) noexcept;
  registration(const registration&) = delete;
  registration& operator=(const registration&) = delete;
  ~registration() { reset(); }

  // Remove from the reactor (idempotent). The descriptor stays open.
  void reset() noexcept;

  [[nodiscard]] bool valid() const noexcept { return owner_ != nullptr; }
  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] reactor* owner() const noexcept { return owner_; }
  [[nodiscard]] reactor::registration_id id() const noexcept { return id_; }
  // Whether its stream operations are completion requests (its reactor runs
  // io_uring): fixed when it registers, as a reactor never changes backend.
  [[nodiscard]] bool completions() const noexcept { return completions_; }

  // The events counter, read before an operation; passed to clear_ready()
  // when that operation got EAGAIN.
  [[nodiscard]] std::uint64_t tick(direction which) const noexcept;
  void clear_ready(direction which, std::uint64_t tick) const noexcept;
  // A read returned fewer bytes than asked (reactor::clear_after_short_read).
  void clear_after_short_read(std::uint64_t tick) const noexcept;
  // Whether `which` is ready (or in error, or the registration is gone),
  // with the events counter read at the same time.
  [[nodiscard]] bool ready(direction which, std::uint64_t& tick) const noexcept;

 private:
  reactor* owner_ = nullptr;
  reactor::registration_id id_{};
  int fd_ = -1;
  bool completions_ = false;
};

// The wait source (wait/wait_source.hpp) for "direction `which` of
// `reg` is ready": co_await canopy::wait_on(readiness_wait{reg, which}).
class readiness_wait {
 public:
  readiness_wait(const registration& reg, direction which) noexcept
      : owner_(reg.owner()), id_(reg.id()), fd_(reg.fd()), which_(which) {}

  bool ready() noexcept;
  bool arm(const waker& waiter) noexcept;
  void disarm() noexcept;
  std::error_code result() noexcept;

 private:
  reactor* owner_;
  reactor::registration_id id_;
  int fd_;
  direction which_;
  detail::wait_status status_ = detail::wait_status::armed;
};

inline auto readable(const registration& reg) noexcept {
  return canopy::wait_on(readiness_wait{reg, direction::read});
}
inline auto writable(const registration& reg) noexcept {
  return canopy::wait_on(readiness_wait{reg, direction::write});
}
// One-shot waits on an unregistered descriptor, on the current task's reactor.
task<std::error_code> readable(int fd);
task<std::error_code> writable(int fd);

// The pending error of a socket (SO_ERROR), or {} if none or not a socket.
std::error_code socket_error(int fd) noexcept;

}  // namespace canopy::io
