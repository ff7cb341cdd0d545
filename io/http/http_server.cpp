#include "http_server.hpp"

#include <sys/socket.h>

#include <charconv>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

#include "../../coroutine/custom_wait.hpp"
#include "../../coroutine/spawn.hpp"
#include "../../executor/deadline.hpp"
#include "../../sync/atomics.hpp"
#include "../readiness.hpp"
#include "../registration.hpp"
#include "../socket_ops.hpp"
#include "../stream_op.hpp"
#include "../timer/timer_wait.hpp"
#include "http_connection.hpp"

namespace canopy::io::http {

detail::shared_counters detail::connection_totals;

using io::detail::io_result;

namespace {

// The pieces shared with the HTTPS connection (http_connection.hpp).
using detail::add;
using detail::close_if_idle;
using detail::complete_response;
using detail::expects_continue;
using detail::idle_watch;
using detail::input_buffer;
auto& totals = detail::connection_totals;

using detail::flush_outcome;

// Writes `out`: sends what the socket takes, and waits for writability
// while it takes nothing, for at most `stall_limit` each time. A client
// that reads nothing for that long ends its connection (`stalled`); one
// that reads slowly but keeps reading is served: the limit restarts after
// every send that made progress. Each round is the readiness helper
// (io/readiness.hpp): a writable socket costs no timer, and a wait is a
// with_timeout on it (no task frame, no allocation).
task<flush_outcome> flush(tcp_stream& stream, std::string& out,
                          std::chrono::milliseconds stall_limit) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(out.data()),
                                         out.size());
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    // One round: what the socket takes now, or after the next edge.
    auto round =
        io::detail::send_some_op(stream.reg(), stream.native_handle(), bytes.subspan(sent));
    if (!round.ready() && !co_await canopy::with_timeout(stall_limit, round)) {
      co_return flush_outcome::stalled;
    }
    const io_result done = round.result();
    if (done.error) {
      co_return flush_outcome::failed;  // closed meanwhile, or the socket is in error
    }
    sent += done.count;
  }
  out.clear();
  co_return flush_outcome::sent;
}

// A streamed answer's sends (http_response.hpp): the connection's flush.
struct stream_target {
  tcp_stream* stream;
  std::chrono::milliseconds stall_limit;
};
task<flush_outcome> send_streamed(void* target, std::string& out) {
  auto* to = static_cast<stream_target*>(target);
  return flush(*to->stream, out, to->stall_limit);
}

// After an error answer: stop sending, then read and drop what the client
// still sends (bounded in bytes and time) before closing, so that the close
// does not reset the connection while the answer is still unread (a close
// with unread input sends RST, which can discard the answer at the client).
task<void> linger_close(tcp_stream& stream) {
  stream.shutdown(SHUT_WR);
  const auto deadline = timer_queue::clock::now() + std::chrono::milliseconds(500);
  std::byte sink[4096];
  std::size_t dropped = 0;
  while (dropped < 65536) {
    auto drop = io::detail::receive_op(stream.reg(), stream.native_handle(), sink);
    if (!drop.ready() && !co_await canopy::with_deadline(deadline, drop)) {
      break;  // the deadline
    }
    const io_result got = drop.result();
    if (got.error || got.count == 0) {
      break;  // an error, or EOF
    }
    dropped += got.count;
  }
}

// Whether bytes the server has not read wait in the socket (a non-blocking
// peek). A close with unread input resets the connection; without any,
// the answer and the FIN go out as they are and no lingering is needed.
bool has_unread_input(const tcp_stream& stream) noexcept {
  char probe = 0;
  return ::recv(stream.native_handle(), &probe, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

}  // namespace

// Bad options are refused before anything is served: a timeout of zero or
// less would close every connection at once, quietly, and an empty handler
// would fail at the first request.
void detail::check_serving(const server_options& options, const handler& respond) {
  const auto check_positive = [](std::chrono::milliseconds timeout, const char* field) {
    if (timeout <= std::chrono::milliseconds::zero()) {
      throw std::invalid_argument(std::string("canopy::io::http::server_options::") + field +
                                  " must be positive (milliseconds::max() for no limit), got " +
                                  std::to_string(timeout.count()) + " ms");
    }
  };
  check_positive(options.request_timeout, "request_timeout");
  check_positive(options.write_timeout, "write_timeout");
  check_positive(options.drain_timeout, "drain_timeout");
  if (!respond) {
    throw std::invalid_argument(
        "canopy::io::http: the handler is empty (a null function "
        "pointer, an empty std::function or a default handler)");
  }
}

void append_response(std::string& out, int status, std::string_view reason,
                     std::string_view content_type, std::string_view body, bool close) {
  char number[24];
  out.append("HTTP/1.1 ");
  auto [status_end, status_error] = std::to_chars(number, number + sizeof number, status);
  (void)status_error;
  out.append(number, status_end);
  out.push_back(' ');
  out.append(reason);
  out.append("\r\nContent-Length: ");
  auto [length_end, length_error] = std::to_chars(number, number + sizeof number, body.size());
  (void)length_error;
  out.append(number, length_end);
  if (!content_type.empty()) {
    out.append("\r\nContent-Type: ");
    out.append(content_type);
  }
  if (close) {
    out.append("\r\nConnection: close");
  }
  out.append("\r\n\r\n");
  out.append(body);
}

task<void> serve_connection(tcp_stream stream, server_options options, handler respond,
                            std::stop_token stop) {
  detail::check_serving(options, respond);
  add(totals.connections, 1);
  // The head and the largest body, and room to read a chunked body's last
  // chunk and trailers into (its framing is dropped as it is decoded, but
  // needs room to arrive in).
  const std::size_t buffer_limit =
      options.limits.max_head_bytes + options.limits.max_body_bytes + 4096;
  input_buffer input(std::min<std::size_t>(4096, buffer_limit));
  std::string output;
  request req;
  request_reader reader(options.limits);
  // Counted however the connection ends (also when shutdown destroys it).
  struct tally_on_exit {
    std::uint64_t served = 0;
    tally_on_exit() = default;
    tally_on_exit(const tally_on_exit&) = delete;
    tally_on_exit& operator=(const tally_on_exit&) = delete;
    ~tally_on_exit() { add(totals.requests, served); }
  } tally;
  auto deadline = canopy::detail::steady_deadline_after(options.request_timeout);
  bool closing = false;
  bool reset = false;       // close with RST: an answer the client stopped reading is dropped
  bool write_shut = false;  // linger_close shut the sending side already
  bool continued = false;   // `100 Continue` sent for the request now arriving
  flush_outcome broken = flush_outcome::sent;  // a streamed answer's send that failed
  idle_watch watch{.fd = stream.native_handle()};
  std::optional<std::stop_callback<close_if_idle>> idle_closer;
  if (stop.stop_possible()) {
    idle_closer.emplace(stop, close_if_idle{&watch});
  }
  stream_target target{&stream, options.write_timeout};
  detail::body_sink sink{.send = &send_streamed,
                         .connection = &target,
                         .out = &output,
                         .fd = stream.native_handle(),
                         .stop = &stop};
  for (;;) {
    // Answer every complete request that arrived, in order.
    bool answered = false;
    while (!closing) {
      const parse_outcome outcome = reader.read(input.pending_bytes(), req);
      if (outcome.status == parse_status::incomplete) {
        input.keep(outcome.keep);
        if (!continued && expects_continue(input.pending())) {
          output.append("HTTP/1.1 100 Continue\r\n\r\n");
          continued = true;
        }
        break;
      }
      if (outcome.status == parse_status::invalid) {
        add(totals.bad_requests, 1);
        const int status = status_of(outcome.error);
        append_response(output, status, reason_of(status), "text/plain", describe(outcome.error),
                        true);
        closing = true;
        break;
      }
      const std::size_t start = output.size();
      // A coroutine handler's task runs here, inline; `req` views `input`,
      // which nothing touches until it is answered (also while a streamed
      // answer goes out: the requests pipelined behind it wait in `input`).
      task<response> pending = respond(req, output, &sink);
      bool streamed = false;
      if (pending.valid()) {
        const response answer = co_await std::move(pending);
        streamed = sink.streamed;
        if (!streamed) {
          append_response(output, answer, !req.keep_alive);
        }
      }
      const bool draining = stop.stop_requested();
      ++tally.served;
      answered = true;
      continued = false;
      input.consume(outcome.consumed);
      closing = !req.keep_alive || draining;
      if (!streamed) {
        complete_response(req, output, start, draining);
      } else {
        // Its head went out already (the writer added what the server adds
        // to a head); a close it announced, or a drain since, ends the
        // connection after its last chunk.
        sink.streamed = false;
        closing = closing || sink.close;
        if (sink.outcome != flush_outcome::sent) {
          broken = sink.outcome;
          break;
        }
      }
    }
    if (broken != flush_outcome::sent) {
      if (broken == flush_outcome::stalled) {
        add(totals.write_timeouts, 1);
        reset = true;
      }
      break;  // a streamed answer's send failed: nothing more goes out
    }
    if (!output.empty()) {
      const flush_outcome flushed = co_await flush(stream, output, options.write_timeout);
      if (flushed == flush_outcome::stalled) {
        add(totals.write_timeouts, 1);
        reset = true;
      }
      if (flushed != flush_outcome::sent) {
        break;
      }
    }
    if (closing) {
      // Linger (drain what the client still sends) only where a close would
      // reset: input this server did not consume, read or still in the socket.
      if (!input.pending().empty() || has_unread_input(stream)) {
        co_await linger_close(stream);
        write_shut = true;
      }
      break;
    }
    if (answered) {
      deadline = canopy::detail::steady_deadline_after(options.request_timeout);
    }

    // Read what comes next; wait for it (until the deadline) if nothing has.
    // A short read cleared read readiness (the receive queue was empty), so
    // while the registration says "not ready" the next request has not
    // arrived: the helper waits for its edge without spending a recv on
    // EAGAIN; a ready socket is read without arming the timer.
    const bool idle = input.pending().empty();
    if (idle && idle_closer) {
      watch.idle.store(true, sync::relaxed);
      sync::fence_seq_cst();  // pairs with close_if_idle's fence
      if (stop.stop_requested()) {
        break;  // draining: an idle connection closes
      }
    }
    const std::span<std::byte> room = input.space(buffer_limit);
    auto next = io::detail::receive_op(stream.reg(), stream.native_handle(), room);
    bool arrived = next.ready();
    if (!arrived) {
      const auto waited = co_await canopy::with_deadline(deadline, next);
      arrived = static_cast<bool>(waited);
    }
    if (idle && idle_closer) {
      // A stop from here on finds the connection busy; it sees the stop
      // itself after its answer.
      watch.idle.store(false, sync::relaxed);
    }
    if (!arrived) {
      if (input.pending().empty()) {
        // Idle between requests (or since the accept): close quietly, as
        // nginx does; a 408 nobody asked for would be read by the
        // client as the answer to the next request it sends.
        add(totals.idle_closes, 1);
        break;
      }
      add(totals.timeouts, 1);  // part of a request came, the rest did not
      append_response(output, 408, reason_of(408), "text/plain", "request timeout", true);
      const flush_outcome flushed = co_await flush(stream, output, options.write_timeout);
      if (flushed == flush_outcome::sent) {
        co_await linger_close(stream);
        write_shut = true;
      } else if (flushed == flush_outcome::stalled) {
        add(totals.write_timeouts, 1);
        reset = true;
      }
      break;
    }
    const io_result got = next.result();
    if (got.error || got.count == 0) {
      break;  // reset, closed meanwhile, or EOF
    }
    input.filled(got.count);
  }
  if (reset) {
    // Drop the unsent answer now rather than leave it queued in the kernel
    // for a client that does not read.
    const linger abort_on_close{1, 0};
    ::setsockopt(stream.native_handle(), SOL_SOCKET, SO_LINGER, &abort_on_close,
                 sizeof abort_on_close);
  } else if (!write_shut) {
    stream.shutdown(SHUT_WR);
  }
  idle_closer.reset();  // waits for a close_if_idle running on another thread
  stream.close();
}

server_counters counters() noexcept {
  return {totals.connections.load(sync::relaxed),  totals.requests.load(sync::relaxed),
          totals.bad_requests.load(sync::relaxed), totals.timeouts.load(sync::relaxed),
          totals.idle_closes.load(sync::relaxed),  totals.write_timeouts.load(sync::relaxed)};
}

}  // namespace canopy::io::http
