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
// the fiber forms live in canopy::this_fiber (io/fiber/fiber_io.hpp) and block
// the fiber.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <system_error>

#include "../coroutine/task.hpp"
#include "basic_stream.hpp"
#include "endpoint.hpp"
#include "owned_socket.hpp"
#include "reactor.hpp"
#include "registration.hpp"
#include "stream_receive.hpp"

namespace canopy::io {

class tcp_stream;

namespace detail {
// TCP for basic_stream (io/basic_stream.hpp): its operations are completion
// requests on the io_uring backend, and its connect waits for the socket's
// write edge.
struct tcp_protocol {
  using stream = tcp_stream;
  using endpoint_type = endpoint;
  static constexpr bool completion_requests = true;
  static constexpr stream_receive::kind receive_kind = stream_receive::kind::tcp;
  static constexpr const char* read_what = "canopy::io::tcp_stream::read_some";
  static constexpr const char* write_what = "canopy::io::tcp_stream::write_all";
  static constexpr const char* connect_what = "canopy::io::tcp_stream::connect to ";
  static tcp_stream open_connect(reactor& owner, const endpoint& peer, bool& pending,
                                 std::error_code& error) noexcept;
  // TCP_NODELAY, best effort.
  static void connected(int fd) noexcept;
};
}  // namespace detail

// A connected TCP stream: the members of detail::basic_stream (connect,
// read_some, write_all, the bounded and non-waiting forms, shutdown,
// close; io/basic_stream.hpp states their contract) and the TCP ones below.
class tcp_stream : public detail::basic_stream<detail::tcp_protocol> {
 public:
  tcp_stream() noexcept = default;
  // Adopt a connected (or connecting), non-blocking socket; it is closed if
  // its registration fails (errors: see registration). `assume_ready`: see
  // reactor::add (false for a socket whose connect(2) is in progress).
  tcp_stream(reactor& owner, int fd, std::error_code& error, bool assume_ready = true) noexcept
      : basic_stream(owner, fd, error, assume_ready) {}
  tcp_stream(tcp_stream&& other) noexcept = default;
  tcp_stream& operator=(tcp_stream&& other) noexcept = default;
  tcp_stream(const tcp_stream&) = delete;
  tcp_stream& operator=(const tcp_stream&) = delete;
  ~tcp_stream() = default;

  [[nodiscard]] endpoint local_endpoint() const noexcept { return socket_.local_endpoint(); }
  [[nodiscard]] endpoint remote_endpoint() const noexcept { return socket_.remote_endpoint(); }
  // TCP_NODELAY (on by default for accepted and connected streams).
  std::error_code set_no_delay(bool on) noexcept;
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
  // ECONNABORTED and EINTR are retried; EMFILE/ENFILE are reported. An
  // accept that loses a race (with_timeout, race, a cancel of its task)
  // drops no connection: one it took meanwhile is the next accept's (or
  // try_accept's), and is closed with the listener.
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
