// response_writer: a streamed answer's head, chunks and end (http_response.hpp).
#include "http_response.hpp"

#include <sys/socket.h>

#include <charconv>
#include <string>

#include "../../coroutine/yield.hpp"

namespace canopy::io::http {

response_writer::~response_writer() {
  // A close-delimited body cut short (an exception from the handler, or its
  // task cancelled) would read as complete at a plain close: reset instead.
  if (mode_ == mode::close_delimited && sink_ != nullptr) {
    const linger abort_on_close{1, 0};
    ::setsockopt(sink_->fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
  }
}

// The head: no Content-Length; `Transfer-Encoding: chunked` for HTTP/1.1,
// and for HTTP/1.0 (which knows no chunks) a body that ends at the close.
void response_writer::start() {
  const bool http10 = req_->version_minor == 0;
  // A Connection field of the handler's that lists close ends the
  // connection as head().close does (its field is sent, not a second one).
  bool announced = false;
  for (const auto& [name, value] : head_.headers) {
    announced =
        announced || (equals_ignoring_case(name, "connection") && lists_token(value, "close"));
  }
  const bool close = !req_->keep_alive || head_.close || http10 || announced ||
                     (sink_->stop != nullptr && sink_->stop->stop_requested());
  std::string& out = *sink_->out;
  // As a complete answer's (append_response): a status outside 200-599 is
  // sent as 500; 204 and 304 have no body, so no chunked framing either.
  const int status = detail::sendable_status(head_.status);
  const bool content = detail::carries_content(status);
  char number[24];
  out.append("HTTP/1.1 ");
  out.append(number, std::to_chars(number, number + sizeof number, status).ptr);
  out.push_back(' ');
  out.append(status == head_.status && !head_.reason.empty() ? std::string_view(head_.reason)
                                                             : reason_of(status));
  if (!head_.content_type.empty()) {
    out.append("\r\nContent-Type: ");
    out.append(head_.content_type);
  }
  for (const auto& [name, value] : head_.headers) {
    // The framing is the server's (chunked, or the close for HTTP/1.0): a
    // Content-Length or Transfer-Encoding of the handler's beside it would
    // make the answer mean two things (RFC 9112 6.1), so it is left out.
    if (detail::is_framing_field(name)) {
      continue;
    }
    out.append("\r\n");
    out.append(name);
    out.append(": ");
    out.append(value);
  }
  if (!http10 && content) {
    out.append("\r\nTransfer-Encoding: chunked");
  }
  if (close && !announced) {
    out.append("\r\nConnection: close");
  }
  out.append("\r\n\r\n");
  sink_->streamed = true;
  sink_->close = close;
  if (req_->method == "HEAD" || !content) {
    mode_ = mode::head_only;  // the head only: the body (head().body, writes) is dropped
    return;
  }
  mode_ = http10 ? mode::close_delimited : mode::chunked;
  append_piece(head_.body);
}

void response_writer::append_piece(std::string_view piece) {
  if (piece.empty()) {
    return;  // an empty chunk would end the body
  }
  std::string& out = *sink_->out;
  if (mode_ == mode::chunked) {
    char size[24];
    out.append(size, std::to_chars(size, size + sizeof size, piece.size(), 16).ptr);
    out.append("\r\n");
    out.append(piece);
    out.append("\r\n");
  } else {
    out.append(piece);
  }
}

task<bool> response_writer::write(std::string_view piece) {
  if (sink_ == nullptr) {
    head_.body.append(piece);  // no streaming here: the body goes out whole
    co_return true;
  }
  if (mode_ == mode::unstarted) {
    start();
  }
  if (mode_ != mode::chunked && mode_ != mode::close_delimited) {
    co_return false;  // HEAD (its head goes out with the server's next write), or ended
  }
  append_piece(piece);
  if (sink_->out->empty()) {
    co_return true;
  }
  sink_->head_sent = true;
  const detail::flush_outcome sent = co_await sink_->send(sink_->connection, *sink_->out);
  if (sent != detail::flush_outcome::sent) {
    sink_->outcome = sent;
    mode_ = mode::ended;  // the connection ends without sending more
    co_return false;
  }
  // A send the socket takes at once does not suspend, so a handler making
  // its pieces without waiting, to a client that reads as fast, would
  // never give its worker back: other connections on it starve, and a
  // cancel (serve()'s drain past drain_timeout) never lands, since a task
  // sees it only when it suspends. Every few writes it yields.
  if (++writes_since_yield_ == yield_every) {
    writes_since_yield_ = 0;
    co_await canopy::yield_now();
  }
  co_return true;
}

response response_writer::finish() {
  if (sink_ == nullptr || mode_ == mode::unstarted) {
    return std::move(head_);
  }
  if (mode_ == mode::chunked) {
    sink_->out->append("0\r\n\r\n");
  }
  // A close-delimited body ends at the connection's close (sink_->close).
  mode_ = mode::ended;
  return {};
}

}  // namespace canopy::io::http
