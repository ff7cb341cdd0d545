// http_connection — the pieces of the connection loop
// (http_connection_loop.hpp, run by the plain server and the HTTPS one): the
// input buffer, the server's additions to an answer, the 100-continue
// check, the idle watch a stop uses, the counters. Internal (canopy::io::http::detail).
#pragma once

#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../../atomics/atomics.hpp"
#include "http_chars.hpp"
#include "http_parser.hpp"

namespace canopy::io::http::detail {

struct shared_counters {
  canopy::detail::atomics::atomic<std::uint64_t> connections{0};
  canopy::detail::atomics::atomic<std::uint64_t> requests{0};
  canopy::detail::atomics::atomic<std::uint64_t> bad_requests{0};
  canopy::detail::atomics::atomic<std::uint64_t> timeouts{0};
  canopy::detail::atomics::atomic<std::uint64_t> idle_closes{0};
  canopy::detail::atomics::atomic<std::uint64_t> write_timeouts{0};
};
// Over every connection served, plain and TLS (defined in http_server.cpp).
extern shared_counters connection_totals;

inline void add(canopy::detail::atomics::atomic<std::uint64_t>& counter,
                std::uint64_t by) noexcept {
  counter.fetch_add(by, canopy::detail::atomics::relaxed);
}

// The bytes that arrived and are not yet answered: [begin, end) of `data`.
class input_buffer {
 public:
  explicit input_buffer(std::size_t capacity) : data_(capacity) {}

  [[nodiscard]] std::string_view pending() const noexcept {
    return {data_.data() + begin_, end_ - begin_};
  }
  // The same bytes, writable: request_reader decodes a chunked body in place.
  [[nodiscard]] std::span<char> pending_bytes() noexcept {
    return {data_.data() + begin_, end_ - begin_};
  }
  // Drops the pending bytes after the first `count` (a chunked body's
  // framing, already decoded).
  void keep(std::size_t count) noexcept { end_ = begin_ + std::min(count, end_ - begin_); }
  void consume(std::size_t count) noexcept {
    begin_ += count;
    if (begin_ == end_) {
      begin_ = end_ = 0;
    }
  }
  // Room to read into: moves the pending bytes to the front when the tail
  // is short, and grows up to `limit` bytes in all.
  std::span<std::byte> space(std::size_t limit) {
    if (data_.size() - end_ < 512 && begin_ > 0) {
      std::memmove(data_.data(), data_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (end_ == data_.size() && data_.size() < limit) {
      data_.resize(std::min(limit, data_.size() * 2));
    }
    return {reinterpret_cast<std::byte*>(data_.data()) + end_, data_.size() - end_};
  }
  void filled(std::size_t count) noexcept { end_ += count; }

 private:
  std::vector<char> data_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

// Whether a response head (its status line and fields, each line ending
// in CRLF) has a Connection field listing "close".
inline bool announces_close(std::string_view head) noexcept {
  constexpr std::string_view field = "connection:";
  for (std::size_t at = head.find("\r\n"); at != std::string_view::npos;
       at = head.find("\r\n", at + 2)) {
    const std::string_view line = head.substr(at + 2, head.find("\r\n", at + 2) - (at + 2));
    if (equals_ignoring_case(line.substr(0, field.size()), field) &&
        lists_token(line.substr(field.size()), "close")) {
      return true;
    }
  }
  return false;
}

// What the server adds to the response the handler appended to `out` at
// `start`, for the requests whose answer a handler easily gets wrong:
//   * HEAD: the head only (RFC 9110 9.3.2), so a handler answers HEAD as it
//     answers GET and the Content-Length stays that of the GET answer;
//   * HTTP/1.0 kept alive: `Connection: keep-alive` (unless the handler
//     named a Connection), without which a 1.0 client cannot tell the
//     connection stays open and waits for its close (RFC 9112 9.3).
//   * a server draining (its stop was requested) ends a kept-alive
//     connection after this answer: `Connection: close` (unless the
//     handler named a Connection), so the client does not send another.
// Returns whether the answer ends the connection: a request kept alive
// whose answer says `Connection: close` (response::close, or a field the
// handler wrote) is closed after it, as RFC 9112 9.6 requires; a client
// told so (ab -k, curl) sends nothing more and may wait for the close.
// That needs the answer's head searched for every kept-alive request (its
// few lines); the rest costs nothing for other requests.
[[nodiscard]] inline bool complete_response(const request& req, std::string& out, std::size_t start,
                                            bool draining) {
  const bool head_only = req.method == "HEAD";
  const bool close_now = draining && req.keep_alive;
  const bool confirm_keep_alive = req.version_minor == 0 && req.keep_alive && !close_now;
  if (!head_only && !confirm_keep_alive && !close_now && !req.keep_alive) {
    return false;  // closing anyway, and the server wrote Connection: close itself
  }
  const std::size_t head_end = out.find("\r\n\r\n", start);
  if (head_end == std::string::npos) {
    return false;  // not a response: left as the handler wrote it
  }
  const bool announced = req.keep_alive && !close_now &&
                         announces_close(std::string_view(out).substr(start, head_end + 2 - start));
  if (head_only) {
    out.resize(head_end + 4);
  }
  if ((confirm_keep_alive && !announced) || close_now) {
    bool named = false;
    constexpr std::string_view field = "\r\nconnection:";
    for (std::size_t at = out.find("\r\n", start); at < head_end && !named;
         at = out.find("\r\n", at + 2)) {
      named = equals_ignoring_case(std::string_view(out).substr(at, field.size()), field);
    }
    if (!named) {
      out.insert(head_end, close_now ? "\r\nConnection: close" : "\r\nConnection: keep-alive");
    }
  }
  return announced;
}

// Whether `pending`, the bytes read and not answered, holds no byte of a
// request: nothing, or only the empty lines (CRLF; at most the two the
// parser skips, RFC 9112 2.2) that some clients send after a body. Such a
// connection is idle between requests: a quiet close at request_timeout
// (not a 408 nobody asked for) and the drain's close at once.
[[nodiscard]] inline bool holds_no_request(std::string_view pending) noexcept {
  // Empty first: the common case between requests, one compare on every read.
  return pending.empty() ||
         (pending.size() <= 4 && std::string_view("\r\n\r\n").starts_with(pending));
}

// Whether the incomplete request at the front of `pending` has its whole
// head and asks `Expect: 100-continue` (RFC 9110 10.1.1): such a client
// waits for an interim `100 Continue` before it sends the body (curl does
// for a body over 1 MiB, and after a second's wait sends it anyway). The
// parser has already accepted the head (else it would have said invalid),
// limits included, so the body is wanted. HTTP/1.1 only: a 1.0 client
// knows no interim answers.
inline bool expects_continue(std::string_view pending) noexcept {
  // The empty lines the parser skips before a request line (RFC 9112 2.2).
  for (int skipped = 0; skipped < 2 && pending.starts_with("\r\n"); ++skipped) {
    pending.remove_prefix(2);
  }
  const std::size_t head_end = pending.find("\r\n\r\n");
  if (head_end == std::string_view::npos) {
    return false;
  }
  std::string_view rest = pending.substr(0, head_end + 2);
  const std::size_t line_end = rest.find("\r\n");
  if (!rest.substr(0, line_end).ends_with(" HTTP/1.1")) {
    return false;
  }
  rest.remove_prefix(line_end + 2);
  while (!rest.empty()) {
    const std::size_t end = rest.find("\r\n");
    const std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end + 2);
    const std::size_t colon = line.find(':');
    if (colon != std::string_view::npos && equals_ignoring_case(line.substr(0, colon), "expect") &&
        lists_token(line.substr(colon + 1), "100-continue")) {
      return true;
    }
  }
  return false;
}

// Makes the socket's close a reset (SO_LINGER 0): what is still unsent is
// dropped instead of staying queued in the kernel for a client that does
// not read (the write timeout's end, over TCP and TLS alike).
inline void reset_on_close(int fd) noexcept {
  const ::linger abort_on_close{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
}

// What a stop of serve_connection's token does to a connection waiting idle
// for its next request (no byte of it yet): shuts its reading side, so the
// wait ends with EOF and the connection closes (tcp.hpp allows this from
// any thread while a read waits). A connection doing anything else sees the
// stop itself at its next request boundary.
struct idle_watch {
  int fd = -1;
  canopy::detail::atomics::atomic<bool> idle{false};
};
struct close_if_idle {
  idle_watch* watch;
  void operator()() const noexcept {
    // Runs after request_stop() made stop_requested() true. This fence pairs
    // with the connection's fence between its store of idle and its read of
    // stop_requested() (run_connection, http_connection_loop.hpp): of the
    // two, at least one sees the other's write, so an idle connection is
    // either shut here or sees the stop itself and closes.
    canopy::detail::atomics::fence_seq_cst();
    if (watch->idle.load(canopy::detail::atomics::relaxed)) {
      ::shutdown(watch->fd, SHUT_RD);
    }
  }
};

}  // namespace canopy::io::http::detail
