// reactor — the reactor behind canopy::io, and the executor's idle driver:
// the worker holding the poller role parks here (in epoll_wait, or in
// io_uring_enter on the io_uring backend) instead of on its futex
// (executor/idle_driver.hpp).
//
// Backends (reactor_options::backend, CANOPY_IO_BACKEND): epoll (readiness,
// edge-triggered) or io_uring. On io_uring the TCP stream and listener
// operations (read_some, write_all, accept, connect) are completion requests
// on one shared ring (io/uring/completion_ring.hpp, io/uring/completion_op.hpp);
// every other wait (UDP, Unix-domain sockets, signals, callbacks, readable())
// stays on readiness, through the epoll descriptor, which the ring watches.
// docs/io.md, "The io_uring backend", has the rules.
//
// Layout: the reactor holds the registrations (both backends use them),
// chooses the backend when it is constructed, and owns that one backend
// for its life: detail::epoll_backend (io/epoll_backend.hpp) or
// detail::uring_backend (io/uring/uring_backend.hpp, which owns an
// epoll_backend of its own for the readiness waits). The idle_driver
// members hand the poller's wait and dispatch to it.
//
// io/ sits above executor/, wait/, coroutine/ and fiber/; nothing below includes it.
// An executor gets a reactor through its config:
//
//   auto reactor = std::make_shared<canopy::io::reactor>();
//   canopy::executor_config config;
//   config.driver = reactor;                 // or canopy::io::with_reactor(config)
//   canopy::executor pool(config);
//
// Registrations. A descriptor is registered once (EPOLLET with the interest
// set, plus EPOLLRDHUP); each registration lives in a slot with a generation
// (io/registration_slab.hpp), and the epoll cookie carries (slot,
// generation), so an event for a registration that was removed — its slot
// reused, its descriptor number reused — is recognised as stale and
// dropped. Readiness is kept per direction (read, write) with a tick that
// counts events; an operation that got EAGAIN clears its direction only if
// no event arrived since it looked (clear_ready(tick)), so an edge that
// lands between the syscall and the clear is never lost. Error and hang-up
// (EPOLLERR, EPOLLHUP) make both directions ready with the error flag set;
// the next syscall reports the actual error.
//
// Waiting: a waiter stores its task's waker in the registration
// (ready_or_arm); the poller's dispatch takes the stored wakers of every
// direction an event made ready and wakes them after unlocking. A stale
// waker (its task finished) is a no-op (the task slot's own generation).
//
// Threads: every member may be called from any thread. remove() may race
// with a dispatch of the same registration: each registration's state is
// guarded by its own mutex, slots are never freed while the reactor lives,
// and after remove() returns no waker stored in it is woken again.
// The reactor must outlive every registration (executor_config::driver
// holds it by shared_ptr, and the executor destroys its tasks, which own
// their registrations, before it releases the config).
#pragma once

#include <sys/epoll.h>  // take_events() answers in EPOLL* bits

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <system_error>
#include <vector>

#include "../executor/config.hpp"
#include "../executor/executor.hpp"
#include "../executor/idle_driver.hpp"
#include "../atomics/atomics.hpp"
#include "../wait/waker.hpp"
#include "reactor_types.hpp"
#include "registration_slab.hpp"

namespace canopy::io {

namespace detail {
class epoll_backend;
class timer_queue;
class uring_backend;
}  // namespace detail

class reactor final : public ext::idle_driver {
 public:
  // Throws std::system_error if epoll or the eventfd cannot be created, or
  // if io_uring was asked for (options or CANOPY_IO_BACKEND) and cannot run
  // here (the message names io_uring and the kernel's reason) or this
  // library was built without it (-Dio_uring=disabled, or no liburing-dev:
  // errc::function_not_supported, the message says so);
  // std::invalid_argument if CANOPY_IO_BACKEND holds another value.
  reactor();
  explicit reactor(reactor_options options);
  ~reactor() override;

  // The backend in use: epoll or io_uring, never automatic.
  [[nodiscard]] io_backend backend() const noexcept { return backend_; }

  // The reactor of the executor running the calling task. Throws
  // std::logic_error outside a task, or if its executor has no reactor.
  static reactor& current();
  // The reactor of `pool` (its executor_config::driver). Throws
  // std::logic_error if it has none.
  static reactor& of(executor& pool);
  static reactor* of(canopy::detail::scheduler& core) noexcept;

  // ---- registrations (any thread) ----
  using registration_id = detail::registration_id;
  // Register `fd` with `what`. Errors: errc::bad_file_descriptor (invalid or
  // closed fd), errc::file_exists (already registered with this reactor),
  // errc::operation_not_permitted (a regular file or other descriptor epoll
  // cannot watch), errc::too_many_files_open (registration slots exhausted).
  // `assume_ready`: start with both directions ready (the first operation's
  // EAGAIN corrects it), else not ready (the ADD's own edge reports them).
  // `deferred` (the io_uring backend's TCP sockets, whose operations are
  // completion requests): the descriptor is added to epoll only when a
  // readiness wait first needs it.
  registration_id add(int fd, interest what, std::error_code& error, bool assume_ready = true,
                      bool deferred = false) noexcept;
  // Remove a registration: epoll_ctl(DEL), wake its waiters (they see
  // wait_status::closed). Idempotent; a stale id is a no-op. After it
  // returns, nothing stored in the registration is woken again.
  void remove(registration_id id) noexcept;

  // If `which` is ready (or in error), returns ready with *tick set;
  // otherwise stores `waiter` (replacing a previous one) and returns armed.
  detail::wait_status ready_or_arm(registration_id id, direction which, const waker& waiter,
                                   std::uint64_t& tick) noexcept;
  // The operation got EAGAIN after seeing `tick`: clear `which` unless an
  // event arrived since.
  // Also forgets a hang-up or error flag for `which`: EAGAIN shows it is stale.
  void clear_ready(registration_id id, direction which, std::uint64_t tick) noexcept;
  // A read returned fewer bytes than asked (the receive queue is empty): as
  // clear_ready for reads, but after a hang-up or error reads stay ready
  // (the next one returns EOF or the error at once).
  void clear_after_short_read(registration_id id, std::uint64_t tick) noexcept;
  // Whether `which` is ready (or in error), without arming; closed for a
  // removed registration.
  detail::wait_status peek(registration_id id, direction which) noexcept;
  // As peek, and the events counter read under the same lock.
  detail::wait_status peek(registration_id id, direction which, std::uint64_t& tick) noexcept;
  // The registration's event counter (0 for a stale id).
  std::uint64_t tick(registration_id id) noexcept;
  // Forget the stored waiter for `which` (a wait that ended without an edge).
  void disarm(registration_id id, direction which) noexcept;
  // Whether the last event reported EPOLLERR or EPOLLHUP.
  [[nodiscard]] bool has_error(registration_id id) noexcept;

  // A waker woken on every edge of the registration, never consumed
  // (callback registrations), and the events accumulated since the last
  // take_events(). Returns false for a stale id.
  bool set_persistent_waker(registration_id id, const waker& waiter) noexcept;
  // Accumulated EPOLL* bits since the last call (0: none), and whether the
  // registration is still live.
  std::uint32_t take_events(registration_id id, bool& live) noexcept;
  // True if events are pending for take_events(), or the id is stale.
  bool has_pending_events(registration_id id) noexcept;

  // ---- completion requests (io_uring backend; io/uring/completion_op.hpp) ----
  // The requests themselves go to the uring_backend (uring() below).
  // Copy bytes kept from an abandoned receive into `buffer`: how many (0:
  // none kept, or a stale id). For reads that do not go through
  // a completion request (tcp_stream::try_read_some); any thread.
  std::size_t take_kept(registration_id id, std::span<std::byte> buffer) noexcept;
  // The oldest connection an abandoned accept request kept, or -1 (none,
  // or a stale id). For accepts that do not go through a completion
  // request (tcp_listener::try_accept); any thread.
  int take_kept_accepted(registration_id id) noexcept;
  // The io_uring backend, null on epoll: completion_op (a registration's
  // operations, whose backend never changes: registration::completions())
  // calls it directly.
  [[nodiscard]] detail::uring_backend* uring() const noexcept { return uring_.get(); }

  // ---- timers ----
  // The deadline source the poller consults (io/ timers). Set once, before
  // timers are used; null to detach. The source must outlive the reactor's
  // use of it (detach before destroying it).
  void set_deadline_source(ext::deadline_source* source) noexcept;
  // The timer queue this reactor brought (reactor_options::timers), while it
  // drives an executor; null otherwise.
  [[nodiscard]] detail::timer_queue* own_timers() noexcept {
    return timers_bound_ ? timers_.get() : nullptr;
  }

  // ---- idle_driver ----
  bool wait() noexcept override;
  void notify() noexcept override;
  std::size_t dispatch() noexcept override;
  void submit() noexcept override;
  void workers_stopped() noexcept override;
  // Attach / detach the reactor's own timers (io/timer/reactor_timers.cpp).
  // bind throws std::logic_error if this reactor already drives a running
  // executor.
  void bind(canopy::detail::scheduler& core) override;
  void unbind(canopy::detail::scheduler& core) noexcept override;
  // "epoll" or "io_uring" (the trace's io_backend).
  [[nodiscard]] const char* name() const noexcept override { return to_string(backend_); }

  [[nodiscard]] reactor_stats stats() const noexcept;
  // Whether epoll_pwait2 (nanosecond timeouts) is in use, else epoll_wait
  // with the timeout rounded up to whole milliseconds.
  [[nodiscard]] bool precise_timeouts() const noexcept;

 private:
  std::size_t expire_deadlines() noexcept;

  io_backend backend_ = io_backend::epoll;
  // The registrations (io/registration_slab.hpp), both backends'.
  detail::registration_slab slab_;
  // The backend: one of the two, the other null. readiness_ is the epoll
  // half every registration's readiness waits use: epoll_ itself, or the
  // io_uring backend's own.
  std::unique_ptr<detail::epoll_backend> epoll_;
  std::unique_ptr<detail::uring_backend> uring_;
  detail::epoll_backend* readiness_ = nullptr;

  // The executor this reactor drives (bind/unbind), and its own timers.
  canopy::detail::atomics::atomic<canopy::detail::scheduler*> bound_core_{nullptr};
  std::unique_ptr<detail::timer_queue> timers_;
  bool timers_bound_ = false;

  // Poller-only: the last wait saw its deadline pass.
  bool deadline_due_ = false;

  canopy::detail::atomics::atomic<std::uint64_t> deadline_fires_{0};  // relaxed counter
};

// `config` with a fresh reactor as its driver.
executor_config with_reactor(executor_config config = {}, reactor_options options = {});

}  // namespace canopy::io
