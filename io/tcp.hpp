// tcp — non-blocking TCP listener and stream on the reactor, IPv4 and IPv6.
//
//   auto listener = canopy::io::tcp_listener::bind(reactor, canopy::io::endpoint::loopback_v4(0));
//   canopy::io::tcp_stream peer = co_await listener.accept();
//   std::size_t got = co_await peer.read_some(buffer);    // 0: the peer closed (EOF)
//   co_await peer.write_all(std::span(buffer).first(got));
//   std::array<std::span<const std::byte>, 2> parts{header, body};
//   co_await peer.write_all(parts);                        // gathered: one sendmsg
//
// Error convention (docs/io.md): every operation has two forms. The one
// taking a `std::error_code&` never throws for I/O errors and reports them
// there (system_category errno values: ECONNRESET, EPIPE, ECONNREFUSED, ...;
// errc::operation_canceled if the object was closed during the wait). The
// one without throws std::system_error carrying the same code. EOF is not an
// error: read_some() returns 0. EAGAIN and EINTR never surface: the
// operation waits for readiness or retries. SIGPIPE is never raised
// (MSG_NOSIGNAL): a write to a reset connection gives EPIPE or ECONNRESET.
//
// Threads: one operation per direction at a time on a stream (one reader
// and one writer may run concurrently in different tasks; a second one in
// a direction where another task's operation waits fails at once with
// errc::connection_already_in_progress); close() from any
// thread, but not while another thread still uses the object. Destroying a
// stream or listener closes its descriptor, after removing its registration.
// A read suspended in its wait does not count as using the stream: another
// task (or thread) may end it with shutdown(SHUT_RD) (or SHUT_RDWR), after
// which the waiting read returns 0 (EOF), or with close(), after which it
// ends with errc::operation_canceled (the throwing form throws it); either
// way on both I/O backends, task and fiber forms alike. (To stop a read
// without touching the socket, race it: <canopy/race.hpp>.)
// The task forms are canopy::task<T> (co_await them inside a canopy::task);
// the fiber forms live in canopy::io::this_fiber (io/fiber_io.hpp) and block
// the fiber.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <system_error>

#include "../coroutine/task.hpp"
#include "endpoint.hpp"
#include "owned_socket.hpp"
#include "reactor.hpp"
#include "registration.hpp"
#include "stream_receive.hpp"

namespace canopy::io {

class tcp_stream {
 public:
  tcp_stream() noexcept = default;
  // Adopt a connected (or connecting), non-blocking socket; it is closed if
  // its registration fails (errors: see registration). `assume_ready`: see
  // reactor::add (false for a socket whose connect(2) is in progress).
  tcp_stream(reactor& owner, int fd, std::error_code& error, bool assume_ready = true) noexcept;
  tcp_stream(tcp_stream&& other) noexcept = default;
  tcp_stream& operator=(tcp_stream&& other) noexcept = default;
  tcp_stream(const tcp_stream&) = delete;
  tcp_stream& operator=(const tcp_stream&) = delete;
  ~tcp_stream() = default;

  // Connect to `peer` on `owner` (or on the current task's reactor).
  static task<tcp_stream> connect(reactor& owner, endpoint peer, std::error_code& error);
  static task<tcp_stream> connect(reactor& owner, endpoint peer);
  static task<tcp_stream> connect(endpoint peer, std::error_code& error);
  static task<tcp_stream> connect(endpoint peer);

  // At least one byte, or 0 at EOF (or on error with the error_code form).
  // Cancel-safe: a read that loses a race (with_timeout, with_deadline, a
  // cancel through its task's or fiber's handle) loses no bytes; the next
  // read of any form returns them first (docs/io.md, "Reads that lose a
  // race"). What the buffer holds after such a read is unspecified.
  task<std::size_t> read_some(std::span<std::byte> buffer, std::error_code& error);
  task<std::size_t> read_some(std::span<std::byte> buffer);
  // Every byte, or an error (then some prefix may have been sent).
  task<void> write_all(std::span<const std::byte> data, std::error_code& error);
  task<void> write_all(std::span<const std::byte> data);
  // Gathered: every byte of every buffer, in order, without copying them
  // into one (a header and a body in one call): sendmsg with an iovec array
  // on both backends (IORING_OP_SENDMSG on io_uring), MSG_NOSIGNAL; over
  // 64 buffers (IOV_MAX is the kernel's limit) take more calls. Empty buffers are
  // skipped (none, or only empty ones: nothing is sent). A partial send
  // goes on where it stopped (in the middle of a buffer too) once the
  // socket takes more. Errors, threads and close() as the one-buffer form
  // (one writer at a time: the two forms share the write direction). The
  // buffers and the span of them must stay valid until the write ends.
  task<void> write_all(std::span<const std::span<const std::byte>> buffers, std::error_code& error);
  task<void> write_all(std::span<const std::span<const std::byte>> buffers);

  // Bounded forms, raced against the time without a child task (a
  // with_timeout over read_some or write_all runs the operation as one):
  // the socket's own wait is what is bounded, and a socket that is ready
  // arms no timer. Who may call, threads, close() and the errors as
  // read_some and write_all (they share the directions' one-at-a-time
  // rule), plus std::errc::timed_out; `error` is always set (cleared on
  // success). The task forms only (no fiber forms).
  // read_some_until: as read_some, but at `deadline` with nothing read it
  // returns 0 with std::errc::timed_out, having taken no byte: the stream
  // stays usable, and the bytes that arrive later are the next read's (a
  // read that ended by the time the deadline is seen wins). It returns an
  // awaitable, not a task: co_await it at once, inside the canopy::task
  // that called it (it holds the receive and the timer in that task's
  // frame, so a read costs no allocation); `buffer` and `error` stay valid
  // until it ends. Cancelling the task while it waits loses no byte.
  // write_all_within: as write_all, but std::errc::timed_out once the
  // socket took nothing for `stall_limit` (every send that makes progress
  // starts it again: a slow reader is served, one that stopped is not);
  // some prefix of `data` may have gone, so the stream is then unusable
  // for this byte stream: close it. time_point::max() and
  // milliseconds::max(): no limit (no timer); a deadline passed (or a
  // limit of zero or less) only takes what is there without waiting. A
  // bound needs the reactor's timers, as with_timeout does.
  [[nodiscard]] detail::bounded_read read_some_until(std::span<std::byte> buffer,
                                                     std::chrono::steady_clock::time_point deadline,
                                                     std::error_code& error);
  task<void> write_all_within(std::span<const std::byte> data,
                              std::chrono::milliseconds stall_limit, std::error_code& error);

  // Without waiting: one recv/send; errc::resource_unavailable_try_again
  // when it would block. For callback-style code (io/callback.hpp). A read
  // returns bytes an earlier read kept (read_some above) without a recv;
  // readiness (readable(), a callback's edge) does not count those, so
  // after a read lost a race, read before waiting for the next edge.
  std::size_t try_read_some(std::span<std::byte> buffer, std::error_code& error) noexcept;
  std::size_t try_write_some(std::span<const std::byte> data, std::error_code& error) noexcept;

  // shutdown(2): SHUT_RD, SHUT_WR or SHUT_RDWR.
  std::error_code shutdown(int how) noexcept;
  // Remove the registration and close the descriptor (idempotent). Waiting
  // operations end with errc::operation_canceled.
  void close() noexcept { socket_.close(); }

  [[nodiscard]] bool is_open() const noexcept { return socket_.is_open(); }
  [[nodiscard]] int native_handle() const noexcept { return socket_.fd(); }
  [[nodiscard]] endpoint local_endpoint() const noexcept { return socket_.local_endpoint(); }
  [[nodiscard]] endpoint remote_endpoint() const noexcept { return socket_.remote_endpoint(); }
  // TCP_NODELAY (on by default for accepted and connected streams).
  std::error_code set_no_delay(bool on) noexcept;
  [[nodiscard]] const registration& reg() const noexcept { return socket_.reg(); }

 private:
  detail::owned_socket socket_;
};

class tcp_listener {
 public:
  tcp_listener() noexcept = default;
  tcp_listener(tcp_listener&& other) noexcept = default;
  tcp_listener& operator=(tcp_listener&& other) noexcept = default;
  tcp_listener(const tcp_listener&) = delete;
  tcp_listener& operator=(const tcp_listener&) = delete;
  ~tcp_listener() = default;

  // socket + SO_REUSEADDR (+ SO_REUSEPORT if `reuse_port`) + bind + listen.
  static tcp_listener bind(reactor& owner, const endpoint& local, std::error_code& error,
                           int backlog = 1024, bool reuse_port = false) noexcept;
  static tcp_listener bind(reactor& owner, const endpoint& local, int backlog = 1024,
                           bool reuse_port = false);

  // The next connection (non-blocking, close-on-exec, TCP_NODELAY).
  // ECONNABORTED and EINTR are retried; EMFILE/ENFILE are reported.
  task<tcp_stream> accept(std::error_code& error);
  task<tcp_stream> accept();
  // Without waiting; errc::resource_unavailable_try_again when none is queued.
  tcp_stream try_accept(std::error_code& error) noexcept;

  void close() noexcept { socket_.close(); }
  [[nodiscard]] bool is_open() const noexcept { return socket_.is_open(); }
  [[nodiscard]] int native_handle() const noexcept { return socket_.fd(); }
  [[nodiscard]] endpoint local_endpoint() const noexcept { return socket_.local_endpoint(); }
  [[nodiscard]] const registration& reg() const noexcept { return socket_.reg(); }

 private:
  detail::owned_socket socket_;
};

}  // namespace canopy::io
