// http_server — HTTP/1.1 connections on canopy::io TCP streams, one
// coroutine task per connection.
//
//   canopy::io::http::server_options options;            // limits, timeout
//   co_await canopy::io::http::serve_connection(std::move(stream), options, handler);
//   co_await canopy::io::http::serve(listener, options, handler);  // accept loop
//
// Behaviour, per connection:
//   * keep-alive: requests are read until the client closes, asks for
//     `Connection: close` (answered, then the connection is closed),
//     speaks HTTP/1.0 without keep-alive, or the handler's answer says
//     `Connection: close` (closed after it); an HTTP/1.0 request kept alive
//     gets `Connection: keep-alive` added to its answer (unless the
//     handler wrote a Connection field), so the client knows to reuse it;
//   * HEAD: the server sends only the head of the handler's response (the
//     body is dropped), so a handler answers HEAD as it answers GET and
//     the Content-Length is the GET answer's;
//   * request bodies: Content-Length, or `Transfer-Encoding: chunked`
//     (decoded in place as it arrives: the handler sees req.body as for
//     Content-Length; extensions ignored, trailers discarded); both within
//     limits.max_body_bytes;
//   * pipelining: every complete request in what arrived is answered, in
//     order, and the answers go out in one write (also after a chunked
//     body);
//   * a streamed answer (a handler taking a response_writer,
//     http_response.hpp): its head goes out with the answers before it, with
//     `Transfer-Encoding: chunked` (HTTP/1.0: none, the body ends at the
//     close), each write once the socket takes it, the last chunk when the
//     handler returns; the requests pipelined behind it wait until then. An
//     exception or cancel after its head closes the connection without the
//     last chunk;
//   * `Expect: 100-continue` (HTTP/1.1): once the head has arrived and
//     passed the limits, the interim `100 Continue` goes out, so the
//     client sends its body at once instead of after its own timeout; a
//     head over the limits gets the 431 instead, a Content-Length over
//     limits.max_body_bytes the 413 (the body is never asked for);
//   * a malformed request (also a bare LF line ending, or a byte of 0x80
//     and above in the target: http_parser.hpp; a malformed chunk;
//     Transfer-Encoding with Content-Length or in HTTP/1.0; a request
//     with two Host fields or an invalid one, while one without Host is
//     served, HTTP/1.1 too): `400 Bad Request` with `Connection: close`,
//     then the connection is closed; a body over limits.max_body_bytes (a
//     Content-Length over it, decided from the head; a chunked body once
//     its decoded size would pass it):
//     `413 Content Too Large`, the same way; a head over the limits
//     (max_head_bytes, max_headers; also a chunked body's trailers): `431
//     Request Header Fields Too Large`, the same way; a transfer coding
//     other than chunked alone (gzip, `gzip, chunked`, ...): `501 Not
//     Implemented`, the same way; a request line whose version has a
//     major number other than 1 (`HTTP/2.0`, `HTTP/0.9`): `505 HTTP
//     Version Not Supported`, the same way;
//   * a request that starts but does not arrive in full within
//     request_timeout of the previous answer (or of the accept): `408
//     Request Timeout` and close — so a client that sends its headers too
//     slowly holds a connection for at most that long;
//   * a connection idle that long (no byte of a next request, or none at
//     all since the accept) is closed quietly: no 408 the client did not
//     ask for, which it would take as the answer to its next request;
//   * a write that makes no progress for write_timeout (the client reads
//     nothing) closes the connection with a reset, dropping the unsent
//     answer; a slow client that keeps reading is served;
//   * I/O errors (reset, EPIPE) end the connection quietly.
// The handler (http_handler.hpp; its forms in <canopy/io/http.hpp>) is
// called on the worker running the connection, one request at a time per
// connection; a coroutine handler's task is awaited there, inline.
//
// The timeouts need a timer queue on the executor (io/timer/timer_binding.hpp).
// Bad options: a request_timeout, write_timeout or drain_timeout of zero or
// less, a limits.max_headers over request::header_capacity (64: the parsed
// fields live in a fixed array), or an empty handler, make serve() and
// serve_connection() throw
// std::invalid_argument naming the field (at their first co_await, or
// from the spawned handle's get()); milliseconds::max() means no limit.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>
#include <string_view>

#include "../../coroutine/task.hpp"
#include "../tcp.hpp"
#include "http_handler.hpp"
#include "http_parser.hpp"

namespace canopy::io::http {

struct server_options {
  request_limits limits;
  // From an answer (or the accept) until the next request is complete:
  // 408 if part of it came, a quiet close if none did.
  std::chrono::milliseconds request_timeout{10'000};
  // The longest a write may wait without sending a byte (the client's
  // receive window stays shut) before the connection is reset.
  std::chrono::milliseconds write_timeout{30'000};
  // serve(): how long, after its stop, connections get to finish the
  // requests under way before the rest are cancelled (closed).
  std::chrono::milliseconds drain_timeout{5'000};
};

// "HTTP/1.1 <status> <reason>" with Content-Length, Content-Type and, if
// `close`, Connection: close. As for a response (http_response.hpp): a
// status outside 200-599 goes out as 500 (with its standard reason, not
// `reason`), and 204 and 304 without Content-Length or body.
void append_response(std::string& out, int status, std::string_view reason,
                     std::string_view content_type, std::string_view body, bool close);

// Serves one connection until it ends. A stop of `stop` ends it gently:
// the request under way is answered with `Connection: close` (requests
// pipelined behind it are not), a connection idle between requests closes
// at once, one with part of a request waits for the rest as usual.
task<void> serve_connection(tcp_stream stream, server_options options, handler respond,
                            std::stop_token stop = {});

// Accepts connections until `stop` is requested (never, for a token
// without a source), each served by a child task; then drains: stops
// accepting, asks every connection to stop as serve_connection says, waits
// up to options.drain_timeout for them to end, cancels those still
// running (their sockets close) and returns once every connection task has
// ended: std::error_code{} after a stop. Returns the same way, with the
// error, when accept fails for a reason other than a transient one
// (ECONNABORTED, EMFILE, ENFILE and ENOBUFS are waited out). A connection
// task's exception (a handler's) goes to the executor's
// on_detached_exception handler. Cancelling serve's task cancels every
// connection task at once.
task<std::error_code> serve(tcp_listener& listener, server_options options, handler respond,
                            std::stop_token stop = {});

namespace detail {
// std::invalid_argument for a timeout of zero or less, a max_headers over
// request::header_capacity, or an empty handler.
void check_serving(const server_options& options, const handler& respond);
// serve()'s accept loop and drain, as serve() says, with each accepted
// connection served by the task `connection` makes (HTTPS adds its
// handshake there: io/tls/https.hpp).
using connection_maker = std::function<task<void>(tcp_stream, std::stop_token)>;
task<std::error_code> serve_with(tcp_listener& listener, server_options options,
                                 connection_maker connection, std::stop_token stop);
// The lingering close after an error answer (http_server.cpp), for the
// plain link and the TLS one: shuts the sending side, then reads and drops
// what the client still sends (bounded in bytes and time).
task<void> linger_close(tcp_stream& stream);
// Whether bytes not yet read wait in the socket (a non-blocking peek).
[[nodiscard]] bool has_unread_input(const tcp_stream& stream) noexcept;
}  // namespace detail

// Counters over every connection served in this process (relaxed).
struct server_counters {
  std::uint64_t connections = 0;
  std::uint64_t requests = 0;
  std::uint64_t bad_requests = 0;
  std::uint64_t timeouts = 0;        // 408: a request started and did not finish in time
  std::uint64_t idle_closes = 0;     // closed quietly after request_timeout with no request
  std::uint64_t write_timeouts = 0;  // reset after write_timeout without progress
};
[[nodiscard]] server_counters counters() noexcept;

}  // namespace canopy::io::http
