// http_response — what a handler answers with: canopy::io::http::response
// (a complete answer, sent with Content-Length) and response_writer (a body
// streamed in pieces, sent with `Transfer-Encoding: chunked`). The contract
// is at the top of <canopy/io/http.hpp>.
//
// Mechanism of a streamed answer: the connection lends the writer a
// detail::body_sink (its output buffer, a function that sends that buffer
// whole, its stop token). The first write appends the head after the
// answers already waiting in the buffer (pipelined requests before this
// one) and sends it all; each later write sends one chunk and returns once
// the socket took it, so a slow client holds the handler back instead of
// making the server buffer the body. The terminating chunk is appended when
// the handler returns and goes out with the answers after it. A writer
// without a sink (a connection that does not stream) collects the body and
// answers with it whole.
#pragma once

#include <cstdint>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../coroutine/task.hpp"
#include "http_parser.hpp"

namespace canopy::io::http {

struct response {
  int status = 200;
  std::string reason;                                        // empty: the standard one for status
  std::string content_type = "text/plain";                   // empty: no Content-Type field
  std::vector<std::pair<std::string, std::string>> headers;  // more fields, as given
  std::string body;
  bool close = false;  // answer with Connection: close and end the connection
};

// The standard reason phrase of a status registered with IANA (RFC 9110
// and the others of the registry); empty for an unregistered one.
[[nodiscard]] std::string_view reason_of(int status) noexcept;

// Appends `r` as one complete response: status line, Content-Length,
// Content-Type, the extra headers, Connection: close if `close` or r.close.
// A status outside 200-599 is sent as 500 (with its standard reason); 204
// and 304 go without Content-Length, body, or a Content-Length or
// Transfer-Encoding field of r.headers.
void append_response(std::string& out, const response& r, bool close);

namespace detail {

// The status an answer goes out with: a final status, 200-599, as given;
// anything else is a handler's mistake the server must not send: an
// interim 1xx (it would announce a final answer still to come, and then
// the handler's body would be read as the next response) or no status at
// all (negative, 600 and above): 500 instead.
[[nodiscard]] constexpr int sendable_status(int status) noexcept {
  return status >= 200 && status <= 599 ? status : 500;
}
// Whether an answer with this (sendable) status has content: 204 and 304
// have none, and carry no Content-Length or chunked framing (RFC 9110 8.6,
// 15.3.5, 15.4.5); a client reads their head as the whole answer, so a
// body sent after it would be read as the next response.
[[nodiscard]] constexpr bool carries_content(int status) noexcept {
  return status != 204 && status != 304;
}
// A field that frames the content (Content-Length, Transfer-Encoding).
[[nodiscard]] inline bool is_framing_field(std::string_view name) noexcept {
  return equals_ignoring_case(name, "content-length") ||
         equals_ignoring_case(name, "transfer-encoding");
}

enum class flush_outcome : std::uint8_t { sent, failed, stalled };

// What a connection that streams lends each streamed answer, and what the
// writer tells it back. One per connection, reused by every request.
struct body_sink {
  // Sends `out` whole (then clears it), under the connection's write timeout.
  task<flush_outcome> (*send)(void* connection, std::string& out) = nullptr;
  void* connection = nullptr;
  std::string* out = nullptr;  // the connection's output buffer
  int fd = -1;                 // reset when a close-delimited body is cut short
  const std::stop_token* stop = nullptr;
  // Set by the writer: the head went into `out` (the connection appends no
  // answer of its own); a send of it began (the head left, or is leaving,
  // for the socket: until then, as for HEAD or a 204 head, it waits in
  // `out` behind the answers before it and a throw can still drop it); the
  // connection closes after it; a send failed (failed, or stalled past the
  // write timeout: the connection ends).
  bool streamed = false;
  bool head_sent = false;
  bool close = false;
  flush_outcome outcome = flush_outcome::sent;
};

}  // namespace detail

// The body of one answer, sent in pieces while the handler makes them. Made
// by the server for a handler of the form (const request&, response_writer&)
// -> task<void>; used from that handler only, on its connection's worker.
class response_writer {
 public:
  response_writer(const request& req, detail::body_sink* sink) noexcept : req_(&req), sink_(sink) {}
  ~response_writer();
  response_writer(const response_writer&) = delete;
  response_writer& operator=(const response_writer&) = delete;

  // The head to answer with: status, reason, content_type, headers, close.
  // Set it before the first write (later changes are not sent); what its
  // body holds goes out first, before the first piece written.
  [[nodiscard]] response& head() noexcept { return head_; }

  // Sends `piece` as the next part of the body (the head goes with the
  // first write; an empty piece sends only the head). Completes once the
  // connection took it, waiting while the client does not read. true: sent;
  // false: no more of the body will go out (the client is gone, or read
  // nothing for write_timeout, or the request is HEAD: the head goes out,
  // the body never does) — the handler should return; later writes return
  // false at once.
  [[nodiscard]] task<bool> write(std::string_view piece);

  // The server's, when the handler has returned: ends the body (the last
  // chunk is appended to the connection's output), or, if nothing was
  // written, returns head() for the server to send as a complete answer.
  response finish();

 private:
  enum class mode : std::uint8_t { unstarted, chunked, close_delimited, head_only, ended };
  void start();
  void append_piece(std::string_view piece);

  // write() yields its worker once every yield_every sends (http_response.cpp).
  static constexpr std::uint8_t yield_every = 16;

  const request* req_;
  detail::body_sink* sink_;
  response head_;
  mode mode_ = mode::unstarted;
  std::uint8_t writes_since_yield_ = 0;
};

}  // namespace canopy::io::http
