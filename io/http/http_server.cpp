#include "http_server.hpp"

#include <sys/socket.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "../../atomics/atomics.hpp"
#include "http_connection.hpp"
#include "http_connection_loop.hpp"

namespace canopy::io::http {

detail::shared_counters detail::connection_totals;

namespace {

auto& totals = detail::connection_totals;

using detail::flush_outcome;

// The connection loop's link over plain TCP (http_connection_loop.hpp):
// the stream's bounded forms, handed to the loop as they are.
class tcp_link {
 public:
  using stream_type = tcp_stream;
  static constexpr bool lingers = true;

  tcp_link(tcp_stream& stream, const server_options& options) noexcept
      : stream_(&stream), stall_limit_(options.write_timeout) {}

  [[nodiscard]] int fd() const noexcept { return stream_->native_handle(); }
  // Nothing before the first request: the loop's first read is its idle wait.
  [[nodiscard]] static detail::ready_value<bool> start(detail::idle_watch& /*watch*/,
                                                       const std::stop_token& /*stop*/) noexcept {
    return {true};
  }
  task<void> write(std::span<const std::byte> bytes, std::error_code& error) {
    return stream_->write_all_within(bytes, stall_limit_, error);
  }
  [[nodiscard]] auto read(std::span<std::byte> room, std::chrono::steady_clock::time_point deadline,
                          std::error_code& error) {
    return stream_->read_some_until(room, deadline, error);
  }
  [[nodiscard]] bool has_unread_input() const noexcept {
    return detail::has_unread_input(*stream_);
  }
  task<void> linger() { return detail::linger_close(*stream_); }
  static void after_idle_shut() noexcept {}  // the EOF is all a plain stream has
  detail::ready_void end(bool reset, bool write_shut) noexcept {
    if (reset) {
      // Drop the unsent answer now rather than leave it queued in the
      // kernel for a client that does not read.
      detail::reset_on_close(fd());
    } else if (!write_shut) {
      stream_->shutdown(SHUT_WR);
    }
    stream_->close();
    return {};
  }

 private:
  tcp_stream* stream_;
  std::chrono::milliseconds stall_limit_;
};

}  // namespace

// After an error answer: stop sending, then read and drop what the client
// still sends (bounded in bytes and time) before closing, so that the close
// does not reset the connection while the answer is still unread (a close
// with unread input sends RST, which can discard the answer at the client).
task<void> detail::linger_close(tcp_stream& stream) {
  stream.shutdown(SHUT_WR);
  // Bounds as nginx's lingering close has them (time, not only bytes): a
  // client that has not yet read the answer may send a whole body's rest
  // before it notices, and a close before that rest is read resets.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  std::byte sink[4096];
  std::size_t dropped = 0;
  while (dropped < std::size_t{4} << 20) {
    std::error_code error;
    const std::size_t got = co_await stream.read_some_until(sink, deadline, error);
    if (error || got == 0) {
      break;  // the deadline, an error, or EOF
    }
    dropped += got;
  }
}

// Whether bytes the server has not read wait in the socket (a non-blocking
// peek). A close with unread input resets the connection; without any,
// the answer and the FIN go out as they are and no lingering is needed.
bool detail::has_unread_input(const tcp_stream& stream) noexcept {
  char probe = 0;
  return ::recv(stream.native_handle(), &probe, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

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
  // The parsed request holds its fields in a fixed array (request::headers,
  // no allocation per request): a larger limit could not be honoured, and
  // quietly capping it would answer 431 below the limit the caller set.
  if (options.limits.max_headers > request::header_capacity) {
    throw std::invalid_argument(
        "canopy::io::http::server_options::limits.max_headers must be at most " +
        std::to_string(request::header_capacity) + " (request::header_capacity), got " +
        std::to_string(options.limits.max_headers));
  }
  if (!respond) {
    throw std::invalid_argument(
        "canopy::io::http: the handler is empty (a null function "
        "pointer, an empty std::function or a default handler)");
  }
}

void append_response(std::string& out, int status, std::string_view reason,
                     std::string_view content_type, std::string_view body, bool close) {
  // As append_response(out, response, close) does (http_response.hpp): a
  // status outside 200-599 goes out as 500, 204 and 304 without
  // Content-Length or body.
  const int sent_status = detail::sendable_status(status);
  const bool content = detail::carries_content(sent_status);
  char number[24];
  out.append("HTTP/1.1 ");
  out.append(number, std::to_chars(number, number + sizeof number, sent_status).ptr);
  out.push_back(' ');
  out.append(sent_status == status ? reason : reason_of(sent_status));
  if (content) {
    out.append("\r\nContent-Length: ");
    out.append(number, std::to_chars(number, number + sizeof number, body.size()).ptr);
  }
  if (!content_type.empty()) {
    out.append("\r\nContent-Type: ");
    out.append(content_type);
  }
  if (close) {
    out.append("\r\nConnection: close");
  }
  out.append("\r\n\r\n");
  if (content) {
    out.append(body);
  }
}

task<void> serve_connection(tcp_stream stream, server_options options, handler respond,
                            std::stop_token stop) {
  return detail::run_connection<tcp_link>(std::move(stream), std::move(options), std::move(respond),
                                          std::move(stop));
}

server_counters counters() noexcept {
  return {totals.connections.load(canopy::detail::atomics::relaxed),
          totals.requests.load(canopy::detail::atomics::relaxed),
          totals.bad_requests.load(canopy::detail::atomics::relaxed),
          totals.timeouts.load(canopy::detail::atomics::relaxed),
          totals.idle_closes.load(canopy::detail::atomics::relaxed),
          totals.write_timeouts.load(canopy::detail::atomics::relaxed)};
}

}  // namespace canopy::io::http
