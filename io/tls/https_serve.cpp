// HTTPS: the HTTP/1.1 connection over a tls_stream (https.hpp). The parsing,
// the answers and the counters are the plain connection's
// (io/http/http_connection.hpp); the I/O goes through the TLS stream, each
// wait bounded by with_timeout on its task.
#include <sys/socket.h>

#include <chrono>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <utility>

#include "../../coroutine/spawn.hpp"
#include "../http/http_connection.hpp"
#include "../timer/timer_wait.hpp"
#include "https.hpp"

namespace canopy::io::http {

namespace {

using detail::add;
using clock = std::chrono::steady_clock;
auto& totals = detail::connection_totals;

constexpr auto unbounded = std::chrono::milliseconds::max();

// `work` within `limit` (unbounded: no timer); false on the timeout, after
// which the stream is unusable if it was mid-record (tls_stream's cancel rule).
template <class T>
task<bool> within(std::chrono::milliseconds limit, task<T> work) {
  if (limit == unbounded) {
    co_await std::move(work);
    co_return true;
  }
  if (limit <= std::chrono::milliseconds::zero()) {
    co_return false;
  }
  const auto done = co_await canopy::with_timeout(limit, std::move(work));
  co_return static_cast<bool>(done);
}

std::chrono::milliseconds left_until(std::optional<clock::time_point> deadline) {
  if (!deadline) {
    return unbounded;
  }
  return std::chrono::ceil<std::chrono::milliseconds>(*deadline - clock::now());
}

std::optional<clock::time_point> deadline_after(std::chrono::milliseconds timeout) {
  if (timeout == unbounded) {
    return std::nullopt;
  }
  return clock::now() + timeout;
}

}  // namespace

task<void> serve_connection(tls_stream<tcp_stream> stream, server_options options, handler respond,
                            std::stop_token stop) {
  detail::check_serving(options, respond);
  add(totals.connections, 1);
  std::error_code error;
  if (!co_await within(options.request_timeout, stream.handshake(error)) || error) {
    stream.close();
    co_return;
  }
  const std::size_t buffer_limit =
      options.limits.max_head_bytes + options.limits.max_body_bytes + 4096;
  detail::input_buffer input(std::min<std::size_t>(4096, buffer_limit));
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
  auto deadline = deadline_after(options.request_timeout);
  bool closing = false;
  bool continued = false;
  detail::idle_watch watch{.fd = stream.next_layer().native_handle()};
  std::optional<std::stop_callback<detail::close_if_idle>> idle_closer;
  if (stop.stop_possible()) {
    idle_closer.emplace(stop, detail::close_if_idle{&watch});
  }
  for (;;) {
    bool answered = false;
    while (!closing) {
      const parse_outcome outcome = reader.read(input.pending_bytes(), req);
      if (outcome.status == parse_status::incomplete) {
        input.keep(outcome.keep);
        if (!continued && detail::expects_continue(input.pending())) {
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
      task<response> pending = respond(req, output);
      if (pending.valid()) {
        const response answer = co_await std::move(pending);
        append_response(output, answer, !req.keep_alive);
      }
      const bool draining = stop.stop_requested();
      detail::complete_response(req, output, start, draining);
      ++tally.served;
      answered = true;
      continued = false;
      input.consume(outcome.consumed);
      closing = !req.keep_alive || draining;
    }
    if (!output.empty()) {
      const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(output.data()),
                                             output.size());
      if (!co_await within(options.write_timeout, stream.write_all(bytes, error))) {
        add(totals.write_timeouts, 1);
        break;
      }
      if (error) {
        break;
      }
      output.clear();
    }
    if (closing) {
      break;
    }
    if (answered) {
      deadline = deadline_after(options.request_timeout);
    }
    const bool idle = input.pending().empty();
    if (idle && idle_closer) {
      watch.idle.store(true, sync::relaxed);
      sync::fence_seq_cst();  // pairs with close_if_idle's fence
      if (stop.stop_requested()) {
        break;
      }
    }
    const std::span<std::byte> room = input.space(buffer_limit);
    std::size_t got = 0;
    const bool arrived =
        co_await within(left_until(deadline),
                        [](tls_stream<tcp_stream>& from, std::span<std::byte> into,
                           std::error_code& failed, std::size_t& count) -> task<void> {
                          count = co_await from.read_some(into, failed);
                        }(stream, room, error, got));
    if (idle && idle_closer) {
      watch.idle.store(false, sync::relaxed);
    }
    if (!arrived) {
      if (input.pending().empty()) {
        add(totals.idle_closes, 1);
        break;
      }
      add(totals.timeouts, 1);
      append_response(output, 408, reason_of(408), "text/plain", "request timeout", true);
      const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(output.data()),
                                             output.size());
      if (!co_await within(options.write_timeout, stream.write_all(bytes, error))) {
        add(totals.write_timeouts, 1);
      }
      break;
    }
    if (error || got == 0) {
      break;  // truncation, reset, a TLS error, or the client's close_notify
    }
    input.filled(got);
  }
  idle_closer.reset();  // waits for a close_if_idle running on another thread
  // Every end the stream survived (an answer with close, an idle close, a
  // stop, the client's close_notify) sends close_notify, so the client
  // sees a clean end rather than a truncation; after an error or a write
  // cut short the stream is unusable and the close is all there is.
  if (stream.usable()) {
    co_await within(options.write_timeout, stream.shutdown(error));
  }
  stream.next_layer().shutdown(SHUT_WR);
  stream.close();
}

task<std::error_code> serve(tcp_listener& listener, tls_context context, server_options options,
                            handler respond, std::stop_token stop) {
  detail::check_serving(options, respond);
  // A named local, not a temporary inside the co_await (http_serve.cpp).
  detail::connection_maker connection = [options, respond, context](tcp_stream stream,
                                                                    std::stop_token drain) {
    return serve_connection(tls_stream<tcp_stream>(std::move(stream), context), options, respond,
                            std::move(drain));
  };
  co_return co_await detail::serve_with(listener, options, std::move(connection), std::move(stop));
}

}  // namespace canopy::io::http
