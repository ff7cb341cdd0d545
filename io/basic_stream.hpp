// basic_stream — the one stream socket tcp_stream (io/tcp.hpp) and
// unix_stream (io/unix.hpp) are made of: the reads, the writes (one
// buffer, gathered, bounded), the attempts without waiting, shutdown and
// close, and connect, written once over a protocol that names the
// address, how a connection is made, and which operations its sockets run
// (completion requests on the io_uring backend for TCP, readiness waits on
// both backends for Unix-domain streams). Internal (canopy::io::detail),
// installed because the public headers derive from it; the members are
// defined in the library (io/basic_stream.cpp) for the two protocols only.
//
// The members' contract is the public one of both streams: the error
// convention and the threads' rules are stated in io/tcp.hpp (docs/io.md),
// each member's own below.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <system_error>

#include "../coroutine/task.hpp"
#include "owned_socket.hpp"
#include "reactor.hpp"
#include "registration.hpp"
#include "stream_receive.hpp"

namespace canopy::io::detail {

// Protocol (the two in io/tcp.hpp and io/unix.hpp) names:
//   stream             the public class derived from basic_stream<Protocol>
//   endpoint_type      its peer address
//   completion_requests  whether its operations are completion requests
//                      where its registration has them
//                      (registration::completions()), else readiness waits
//                      on both backends; such a registration is deferred
//                      (reactor::add)
//   receive_kind       its stream_receive
//   open_connect(owner, peer, pending, error) -> stream: open, start the
//                      connect and register (`pending`: wait for the
//                      connect's write edge, then call connected(fd))
//   connected(fd)      what a connected or accepted socket gets
//   read_what, write_what, connect_what: the throwing forms' messages
template <class Protocol>
class basic_stream {
 public:
  using stream_type = typename Protocol::stream;
  using endpoint_type = typename Protocol::endpoint_type;

  // Connect to `peer` on `owner` (or on the current task's reactor).
  static task<stream_type> connect(reactor& owner, endpoint_type peer, std::error_code& error);
  static task<stream_type> connect(reactor& owner, endpoint_type peer);
  static task<stream_type> connect(endpoint_type peer, std::error_code& error);
  static task<stream_type> connect(endpoint_type peer);

  // Every read, write and accept (task and fiber forms) may first yield to
  // the worker's other tasks: once a task has made 128 socket operations
  // in one run (io/coop_budget.hpp), so a peer that floods it cannot hold
  // the worker. The yield comes before the socket is touched.
  // At least one byte, or 0 at EOF (or on error with the error_code form).
  // An empty buffer: 0 at once, without waiting (nothing read, not EOF);
  // read_some_until and the fiber forms alike.
  // Cancel-safe: a read that loses a race (with_timeout, with_deadline, a
  // cancel through its task's or fiber's handle) loses no bytes; the next
  // read of any form returns them first (docs/io.md, "Reads that lose a
  // race"). What the buffer holds after such a read is unspecified.
  task<std::size_t> read_some(std::span<std::byte> buffer, std::error_code& error);
  task<std::size_t> read_some(std::span<std::byte> buffer);
  // Every byte, or an error (then some prefix may have been sent).
  // Nothing to send (an empty buffer; gathered: no buffers, or only empty
  // ones): ends at once without waiting for room, with no error on an open
  // stream and errc::bad_file_descriptor on one not open, as a write of
  // bytes there; write_all_within and the fiber forms alike.
  task<void> write_all(std::span<const std::byte> data, std::error_code& error);
  task<void> write_all(std::span<const std::byte> data);
  // Gathered: every byte of every buffer, in order, without copying them
  // into one (a header and a body in one call): sendmsg with an iovec array
  // on both backends (IORING_OP_SENDMSG on io_uring where the stream's
  // operations are completion requests), MSG_NOSIGNAL; over 64 buffers
  // (IOV_MAX is the kernel's limit) take more calls. Empty buffers are
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
  // read that ended by the time the deadline is seen wins, and so do bytes
  // the socket holds then: it is asked once more). It returns an
  // awaitable, not a task: co_await it at once, inside the canopy::task
  // that called it (it holds the receive and the timer in that task's
  // frame, so a read costs no allocation); `buffer` and `error` stay valid
  // until it ends. Cancelling the task while it waits loses no byte.
  // write_all_within: as write_all, but std::errc::timed_out once the
  // socket took nothing for `stall_limit` (every send that makes progress
  // starts it again: a slow reader is served, one that stopped is not; at
  // the limit one more send is tried without waiting, io/stream_bounded.hpp);
  // some prefix of `data` may have gone, so the stream is then unusable
  // for this byte stream: close it. time_point::max() and
  // milliseconds::max(): no limit (no timer); a deadline passed (or a
  // limit of zero or less) only takes what is there without waiting. A
  // bound needs the reactor's timers, as with_timeout does.
  [[nodiscard]] bounded_read read_some_until(std::span<std::byte> buffer,
                                             std::chrono::steady_clock::time_point deadline,
                                             std::error_code& error);
  task<void> write_all_within(std::span<const std::byte> data,
                              std::chrono::milliseconds stall_limit, std::error_code& error);

  // Without waiting: one recv/send; errc::resource_unavailable_try_again
  // when it would block. For callback-style code (io/callback.hpp). A read
  // returns bytes an earlier read kept (read_some above) without a recv;
  // readiness (readable(), a callback's edge) does not count those, so
  // after a read lost a race, read before waiting for the next edge. A
  // read into an empty buffer returns 0 with no error (bad_file_descriptor
  // on a stream not open), as read_some's does.
  std::size_t try_read_some(std::span<std::byte> buffer, std::error_code& error) noexcept;
  std::size_t try_write_some(std::span<const std::byte> data, std::error_code& error) noexcept;

  // shutdown(2): SHUT_RD, SHUT_WR or SHUT_RDWR.
  std::error_code shutdown(int how) noexcept;
  // Remove the registration and close the descriptor (idempotent). Waiting
  // operations end with errc::operation_canceled.
  void close() noexcept { socket_.close(); }

  [[nodiscard]] bool is_open() const noexcept { return socket_.is_open(); }
  [[nodiscard]] int native_handle() const noexcept { return socket_.fd(); }
  [[nodiscard]] const registration& reg() const noexcept { return socket_.reg(); }

 protected:
  basic_stream() noexcept = default;
  // Adopt a connected (or connecting), non-blocking socket; it is closed if
  // its registration fails. `assume_ready`: see reactor::add.
  basic_stream(reactor& owner, int fd, std::error_code& error, bool assume_ready) noexcept
      : socket_(owner, fd, interest::both, error, assume_ready, Protocol::completion_requests) {}
  basic_stream(basic_stream&&) noexcept = default;
  basic_stream& operator=(basic_stream&&) noexcept = default;
  ~basic_stream() = default;

  owned_socket socket_;
};

}  // namespace canopy::io::detail
