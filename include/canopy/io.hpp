// <canopy/io.hpp> — readiness I/O and timers on a Canopy executor, for
// coroutine tasks and plain callbacks.
//
//   canopy::executor pool(canopy::io::with_reactor(config));   // timers included
//   auto listener = canopy::io::tcp_listener::bind(canopy::io::reactor::of(pool),
//                                                  canopy::io::endpoint::loopback_v4(0));
//   canopy::io::tcp_stream peer = co_await listener.accept();   // inside a task
//   co_await canopy::sleep_for(5ms);
//
// Every operation has two forms: one taking a std::error_code& that never
// throws for I/O errors (errno values of system_category: ECONNRESET, EPIPE,
// ECONNREFUSED, ...), and one that throws std::system_error with the same
// code; EAGAIN and EINTR never surface; EOF is a read of 0 bytes; SIGPIPE is
// never raised (docs/io.md, "Error convention"). The task forms are
// canopy::task<T>, co_awaited inside a task; the fibers' forms are in
// <canopy/io/fiber.hpp>. Threads: one operation per direction at a time on
// a stream (a second one, while another task's waits, fails at once with
// errc::connection_already_in_progress); close() from any thread, not
// while another thread is inside a call on the object; waiting operations
// then end with errc::operation_canceled. A read waiting on a TCP or Unix
// stream may be ended from another task: shutdown(SHUT_RD) makes it return
// 0, close() makes it end with errc::operation_canceled (or race it
// against canopy::stopped(token), <canopy/race.hpp>). The HTTP/1.1 server
// is in <canopy/io/http.hpp>. UDP, Unix-domain streams and signals have
// public headers of their own, included here: <canopy/io/udp.hpp>,
// <canopy/io/unix.hpp>, <canopy/io/signal.hpp> (signals have a rule about
// blocking them in every thread: read its contract); name resolution
// (co_await canopy::io::resolve(host, service)) in <canopy/io/resolve.hpp>;
// buffered reads (lines, exact counts, frames) in <canopy/io/buffered.hpp>.
// Link canopy.
//
// Reference (namespace canopy::io unless canopy:: is written):
//   with_reactor(config = {}, reactor_options = {}) -> executor_config whose
//       driver is a fresh reactor; reactor_options: backend (automatic =
//       epoll, epoll, io_uring; CANOPY_IO_BACKEND overrides it; io_uring
//       where it cannot run, or in a Canopy built without it, throws
//       std::system_error saying which),
//       ring_entries (io_uring's queue; 0: std::invalid_argument), timers
//       (true: sleep_for and with_timeout work at once; false leaves them
//       out, a reactor_timers(pool) adds them later).
//       reactor::of(pool) (the executor's; std::logic_error without one),
//       reactor::current() (the running task's; outside a task
//       std::logic_error), .backend().
//   endpoint: loopback_v4(port), loopback_v6(port), any_v4(port),
//       any_v6(port) (every local address; a v6 listener on :: also takes
//       IPv4 unless net.ipv6.bindv6only says otherwise), parse(address,
//       port[, error]) (numeric only, else errc::invalid_argument; names:
//       resolve), .port(), .family(), .to_string().
//   tcp_listener::bind(reactor, endpoint[, error], backlog = 1024,
//       reuse_port = false) (SO_REUSEADDR, SO_REUSEPORT if asked);
//       co_await accept([error]) -> tcp_stream (TCP_NODELAY on;
//       ECONNABORTED retried, EMFILE/ENFILE reported); try_accept(error)
//       (errc::resource_unavailable_try_again when none is queued);
//       local_endpoint(), close(), is_open(), native_handle().
//   tcp_stream::connect([reactor,] endpoint[, error]) -> task<tcp_stream>
//       (without a reactor: the running task's);
//       co_await read_some(buffer[, error]) -> std::size_t: at least one
//       byte, 0 at EOF (an empty buffer: 0 at once, no wait); cancel-safe (a read that loses a race, or is
//       cancelled while it waits, loses no bytes: the next read returns
//       them; docs/io.md, "Reads that lose a race", for a cancel that
//       lands after the read completed);
//       co_await write_all(bytes[, error]): every byte, or an error (a
//       prefix may have gone; nothing to send: at once, no wait, and
//       errc::bad_file_descriptor on a stream not open, as any write,
//       write_all_within too); write_all(span of buffers[, error]): the
//       same, gathered (sendmsg; empty buffers skipped; the buffers and the
//       span stay valid until it ends); bounded without a child task:
//       co_await read_some_until(buffer, steady deadline, error) (0 with
//       errc::timed_out at the deadline, no byte taken, the stream still
//       usable; an awaitable for the calling task, not a task),
//       co_await write_all_within(bytes, stall_limit, error)
//       (errc::timed_out once the socket took nothing for stall_limit; the
//       stream then unusable: close it); max(): no limit; unix_stream has
//       both too; try_read_some, try_write_some
//       (never wait: errc::resource_unavailable_try_again); shutdown(how)
//       -> std::error_code; set_no_delay(on); close() (idempotent);
//       local_endpoint(), remote_endpoint(), native_handle(). Move-only;
//       the destructor closes.
//   canopy::sleep_for(d), canopy::sleep_until(t): inside a task. Outside a
//       task, or on an executor without timers: std::logic_error saying
//       what to create.
//   canopy::with_timeout(d, x) -> timeout_result<T>: x a task<T> (or a join
//       handle, anything a task co_awaits) runs as a child raced against
//       the deadline; at the deadline the child is cancelled and
//       with_timeout returns once its frame is gone (the child may borrow
//       from the caller's frame). A value the child returned before the
//       cancel landed is kept, never dropped; x's exception within the time
//       is rethrown; otherwise errc::timed_out. x a wait source (an lvalue
//       that outlives the await; a temporary is a compile error saying so):
//       both armed, the first ready wins, no allocation.
//       canopy::with_deadline(t, wait source): the same with a time point.
//   timeout_result<T>: has_value(), operator bool, *r, r->, value()
//       (std::system_error(errc::timed_out) after a timeout), error()
//       (errc::timed_out or none).
//   registration(reactor, fd, interest) (RAII; owns the reactor slot, not
//       the descriptor: destroy it before closing fd); co_await
//       readable(reg) / writable(reg) -> std::error_code (edge-triggered
//       and sticky: consume until EAGAIN); one-shot readable(fd) /
//       writable(fd) (errc::file_exists if fd is registered already). A
//       wait returns {}, the descriptor's SO_ERROR, or
//       errc::operation_canceled when the registration went away.
//   callback_registration(pool, fd, interest, callback(std::uint32_t
//       events)): the callback runs as a task on each readiness edge, never
//       twice at once; close() (and the destructor) waits for a running
//       callback (not from inside it), after which it never runs again; the
//       descriptor stays the caller's. The callback must not throw (that
//       goes to on_detached_exception and stops the registration).
//   timer_thread(pool): timers for an executor without a reactor; its
//       destructor shuts the executor down first (declare it after the
//       executor), as reactor_timers' does.
//   TLS and HTTPS (not included here: <canopy/io/tls.hpp>, link canopy-tls;
//       docs/tls.md): tls_context, tls_stream<tcp_stream> (handshake,
//       read_some, write_all, shutdown), http::serve(listener, tls_context, ...).
#pragma once

#include "canopy.hpp"
#include "detail/io/io.hpp"
#include "io/buffered.hpp"
#include "io/resolve.hpp"
#include "io/signal.hpp"
#include "io/udp.hpp"
#include "io/unix.hpp"
