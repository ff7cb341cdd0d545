// http_connection_loop — the one HTTP/1.1 connection loop (reading,
// parsing, answering, pipelining, keep-alive, timeouts, streamed answers,
// the drain), over a link that moves the bytes: the plain TCP one
// (http_server.cpp) and the TLS one (io/tls/https_serve.cpp). Internal
// (canopy::io::http::detail).
//
// A Link is made from the connection's stream (which stays in the loop's
// frame) and its options, and gives:
//   stream_type                    the stream the connection owns;
//   static constexpr bool lingers  whether a close with input left unread
//                                  first drains it (linger(): both links,
//                                  since such a close resets the answer
//                                  away, TLS's close_notify or not);
//   int fd()                       the socket (the idle watch shuts its
//                                  reading side; a cut-short streamed
//                                  answer resets it);
//   co_await start(watch, stop) -> bool   before the first request (the
//                                  TLS handshake); false: close quietly
//                                  (the stream closes with the loop's
//                                  frame). A start that waits for the
//                                  client's first bytes marks `watch` idle
//                                  meanwhile, as the loop's reads do, so
//                                  the drain's close_if_idle ends it;
//   co_await write(bytes, error): every byte, or an error; the stream's
//                                  write_all_within, bounded by the
//                                  write timeout (std::errc::timed_out:
//                                  the client stopped reading);
//   co_await read(room, deadline, error) -> std::size_t: the stream's
//                                  read_some_until (std::errc::timed_out
//                                  at the deadline, nothing taken);
//   has_unread_input(), co_await linger()   (only where lingers);
//   after_idle_shut()              the read waiting between requests ended
//                                  after the drain's stop (close_if_idle
//                                  shut the reading side): TLS makes its
//                                  stream usable again for close_notify;
//   co_await end(reset, write_shut): the connection's end, after the idle
//                                  watch is gone: reset drops what was not
//                                  sent; write_shut: linger() shut the
//                                  sending side already.
// Both links hand the loop their stream's public bounded forms themselves,
// so a read or a write costs what the stream's call costs and no wrapper
// task (a plain TCP read is an awaitable in the loop's frame: no task).
#pragma once

#include <algorithm>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <system_error>
#include <utility>

#include "../../atomics/atomics.hpp"
#include "http_connection.hpp"
#include "http_response.hpp"
#include "http_server.hpp"

namespace canopy::io::http::detail {

// An awaitable already done with `value` (a link step that does not wait).
template <class T>
struct ready_value {
  using canopy_awaiter = void;  // never suspends: no wake to arrange
  T value;
  [[nodiscard]] bool await_ready() const noexcept { return true; }
  void await_suspend(std::coroutine_handle<>) const noexcept {}
  T await_resume() noexcept { return std::move(value); }
};
struct ready_void {
  using canopy_awaiter = void;
  [[nodiscard]] bool await_ready() const noexcept { return true; }
  void await_suspend(std::coroutine_handle<>) const noexcept {}
  void await_resume() const noexcept {}
};

// What a write's error means for the connection.
inline flush_outcome outcome_of(const std::error_code& error) noexcept {
  if (!error) {
    return flush_outcome::sent;
  }
  return error == std::errc::timed_out ? flush_outcome::stalled : flush_outcome::failed;
}

inline std::span<const std::byte> bytes_of(const std::string& out) noexcept {
  return {reinterpret_cast<const std::byte*>(out.data()), out.size()};
}

// `timeout` from now, saturating: milliseconds::max() (no limit), and any
// timeout past the clock's range, is time_point::max().
inline std::chrono::steady_clock::time_point deadline_after(
    std::chrono::milliseconds timeout) noexcept {
  using clock = std::chrono::steady_clock;
  const clock::time_point now = clock::now();
  if (timeout >=
      std::chrono::duration_cast<std::chrono::milliseconds>(clock::time_point::max() - now)) {
    return clock::time_point::max();
  }
  return now + timeout;
}

// A streamed answer's sends (http_response.hpp): the link's write.
template <class Link>
task<flush_outcome> send_through(void* link, std::string& out) {
  std::error_code error;
  co_await static_cast<Link*>(link)->write(bytes_of(out), error);
  const flush_outcome outcome = outcome_of(error);
  if (outcome == flush_outcome::sent) {
    out.clear();
  }
  co_return outcome;
}

template <class Link>
task<void> run_connection(typename Link::stream_type stream, server_options options,
                          handler respond, std::stop_token stop) {
  check_serving(options, respond);
  add(connection_totals.connections, 1);
  Link link(stream, options);
  // A stop (serve()'s drain) closes a connection idle between requests, or
  // since its accept, at once: close_if_idle shuts its reading side while
  // the watch says idle (before the first request, also during start()).
  idle_watch watch{.fd = link.fd()};
  std::optional<std::stop_callback<close_if_idle>> idle_closer;
  if (stop.stop_possible()) {
    idle_closer.emplace(stop, close_if_idle{&watch});
  }
  if (!co_await link.start(watch, stop)) {
    // The stream closes with this frame, after the idle closer (a local)
    // is gone: a close_if_idle never shuts a descriptor reused since.
    co_return;
  }
  // The head and the largest body, and room to read a chunked body's last
  // chunk and trailers into (its framing is dropped as it is decoded, but
  // needs room to arrive in). Saturating: a limit of SIZE_MAX (no limit)
  // must not wrap the sum around to a few KiB, a buffer that fills before
  // the body is in (its read then has no room and ends the connection).
  const auto saturating_add = [](std::size_t a, std::size_t b) noexcept {
    return a > std::numeric_limits<std::size_t>::max() - b ? std::numeric_limits<std::size_t>::max()
                                                           : a + b;
  };
  const std::size_t buffer_limit = saturating_add(
      saturating_add(options.limits.max_head_bytes, options.limits.max_body_bytes), 4096);
  input_buffer input(std::min<std::size_t>(4096, buffer_limit));
  std::string output;
  request req;
  request_reader reader(options.limits);
  // The requests answered, added to counters() once a batch of answers is
  // ready (one shared add a write, not one a request, and none for a
  // connection that only waits), so that counters() is current while
  // connections stay open; the rest however the connection ends (also
  // when shutdown destroys it).
  struct tally_on_exit {
    std::uint64_t served = 0;
    tally_on_exit() = default;
    tally_on_exit(const tally_on_exit&) = delete;
    tally_on_exit& operator=(const tally_on_exit&) = delete;
    ~tally_on_exit() { flush(); }
    void flush() noexcept {
      if (served != 0) {
        add(connection_totals.requests, served);
        served = 0;
      }
    }
  } tally;
  auto deadline = deadline_after(options.request_timeout);
  bool closing = false;
  bool reset = false;       // close with RST: an answer the client stopped reading is dropped
  bool write_shut = false;  // linger() shut the sending side already
  bool continued = false;   // `100 Continue` sent for the request now arriving
  bool refused = false;     // an error answer to a request whose rest may still arrive
  std::exception_ptr handler_failure;          // rethrown once the answers before it went out
  flush_outcome broken = flush_outcome::sent;  // a streamed answer's send that failed
  body_sink sink{.send = &send_through<Link>,
                 .connection = &link,
                 .out = &output,
                 .fd = link.fd(),
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
        add(connection_totals.bad_requests, 1);
        const int status = status_of(outcome.error);
        append_response(output, status, reason_of(status), "text/plain", describe(outcome.error),
                        true);
        closing = true;
        refused = true;
        break;
      }
      const std::size_t start = output.size();
      // A coroutine handler's task runs here, inline; `req` views `input`,
      // which nothing touches until it is answered (also while a streamed
      // answer goes out: the requests pipelined behind it wait in `input`).
      std::exception_ptr failure;
      task<response> pending;
      try {
        pending = respond(req, output, &sink);
      } catch (...) {
        failure = std::current_exception();
      }
      bool streamed = false;
      if (pending.valid()) {
        response answer;
        try {
          answer = co_await std::move(pending);
        } catch (...) {
          failure = std::current_exception();
        }
        streamed = sink.streamed;
        if (!streamed && !failure) {
          append_response(output, answer, !req.keep_alive);
        }
      }
      if (failure) {
        // The handler threw: its request gets no answer and the connection
        // ends. The answers of the requests pipelined before it are
        // complete, and still go out first (a cancel does not come here).
        // Where there are none, or its streamed head went out already (the
        // answer must not look complete), the close is at once, as it was.
        // A streamed head that never went out (HEAD, a 204 head: the writes
        // were refused) is dropped with the rest of its answer.
        if (sink.head_sent) {
          std::rethrow_exception(failure);
        }
        output.resize(start);
        if (output.empty()) {
          std::rethrow_exception(failure);
        }
        handler_failure = failure;
        closing = true;
        break;
      }
      const bool draining = stop.stop_requested();
      ++tally.served;
      answered = true;
      continued = false;
      input.consume(outcome.consumed);
      closing = !req.keep_alive || draining;
      if (!streamed) {
        // An answer that says `Connection: close` (response::close, or the
        // handler's own field) ends the connection after it.
        closing = complete_response(req, output, start, draining) || closing;
      } else {
        // Its head went out already (the writer added what the server adds
        // to a head); a close it announced, or a drain since, ends the
        // connection after its last chunk.
        sink.streamed = false;
        sink.head_sent = false;
        closing = closing || sink.close;
        if (sink.outcome != flush_outcome::sent) {
          broken = sink.outcome;
          break;
        }
      }
    }
    tally.flush();
    if (broken != flush_outcome::sent) {
      if (broken == flush_outcome::stalled) {
        add(connection_totals.write_timeouts, 1);
        reset = true;
      }
      break;  // a streamed answer's send failed: nothing more goes out
    }
    if (!output.empty()) {
      std::error_code sent;
      co_await link.write(bytes_of(output), sent);
      const flush_outcome flushed = outcome_of(sent);
      if (flushed == flush_outcome::sent) {
        output.clear();
      }
      if (flushed == flush_outcome::stalled) {
        add(connection_totals.write_timeouts, 1);
        reset = true;
      }
      if (flushed != flush_outcome::sent) {
        break;
      }
    }
    if (closing) {
      if constexpr (Link::lingers) {
        // Linger (drain what the client still sends) only where a close
        // would reset: input this server did not consume, read or still in
        // the socket, or a refused request whose body may still be on its
        // way (the socket can look empty between two of the client's
        // sends, or while a completion-based receive holds what arrived).
        if (refused || !input.pending().empty() || link.has_unread_input()) {
          co_await link.linger();
          write_shut = true;
        }
      }
      break;
    }
    if (answered) {
      deadline = deadline_after(options.request_timeout);
    }

    // Read what comes next; wait for it (until the deadline) if nothing has.
    // Over plain TCP a short read cleared read readiness (the receive queue
    // was empty), so while the registration says "not ready" the next
    // request has not arrived: the stream's read waits for its edge without
    // spending a recv on EAGAIN; a ready socket is read without arming the
    // timer.
    const bool idle = holds_no_request(input.pending());
    if (idle && idle_closer) {
      watch.idle.store(true, canopy::detail::atomics::relaxed);
      canopy::detail::atomics::fence_seq_cst();  // pairs with close_if_idle's fence
      if (stop.stop_requested()) {
        break;  // draining: an idle connection closes
      }
    }
    const std::span<std::byte> room = input.space(buffer_limit);
    std::error_code read_error;
    const std::size_t got = co_await link.read(room, deadline, read_error);
    const bool arrived = read_error != std::errc::timed_out;
    if (idle && idle_closer) {
      // A stop from here on finds the connection busy; it sees the stop
      // itself after its answer.
      watch.idle.store(false, canopy::detail::atomics::relaxed);
    }
    if (!arrived) {
      if (holds_no_request(input.pending())) {
        // Idle between requests (or since the accept): close quietly, as
        // nginx does; a 408 nobody asked for would be read by the
        // client as the answer to the next request it sends.
        add(connection_totals.idle_closes, 1);
        break;
      }
      add(connection_totals.timeouts, 1);  // part of a request came, the rest did not
      append_response(output, 408, reason_of(408), "text/plain", "request timeout", true);
      std::error_code sent;
      co_await link.write(bytes_of(output), sent);
      const flush_outcome flushed = outcome_of(sent);
      if (flushed == flush_outcome::sent) {
        if constexpr (Link::lingers) {
          co_await link.linger();
          write_shut = true;
        }
      } else if (flushed == flush_outcome::stalled) {
        add(connection_totals.write_timeouts, 1);
        reset = true;
      }
      break;
    }
    if (read_error || got == 0) {
      if (idle && idle_closer && stop.stop_requested()) {
        // Most likely the drain's close_if_idle shut the reading side under
        // this wait: not the client's end, so the link may still end
        // cleanly (TLS: close_notify). A client's own close at the same
        // moment is told apart from it by nothing, and harmlessly so.
        link.after_idle_shut();
      }
      break;  // reset, closed meanwhile, EOF (TLS: truncation, an error, close_notify)
    }
    input.filled(got);
  }
  idle_closer.reset();  // waits for a close_if_idle running on another thread
  co_await link.end(reset, write_shut);
  if (handler_failure) {
    std::rethrow_exception(handler_failure);
  }
}

}  // namespace canopy::io::http::detail
