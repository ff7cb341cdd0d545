// http_parser — a small HTTP/1.1 request parser: pure (no I/O, no
// allocation), so it can be fuzzed on its own.
//
// A connection reads its requests with a request_reader, which also
// decodes chunked bodies (in place, in the caller's buffer):
//
//   canopy::io::http::request_reader reader(limits);     // one per connection
//   auto outcome = reader.read(pending, req);   // pending: std::span<char>, unanswered bytes
//   switch (outcome.status) {
//     case parse_status::complete:   /* req is valid; the first outcome.consumed bytes were it */
//     case parse_status::incomplete: /* keep the first outcome.keep bytes of pending (a chunked
//                                       body's spent framing lies after them: drop it), append
//                                       what arrives next, call again */
//     case parse_status::invalid:    /* answer (status_of(outcome.error)) and close */
//   }
//
// parse_request(bytes, req) is the same parser without state, for input
// that is not a chunked body: it reads the head and a Content-Length body
// from a read-only buffer, and for a chunked request stops after the head
// (parse_status::chunked_body, consumed = the head's bytes; request_reader
// decodes the body that follows).
//
// What it accepts (RFC 9112, strictly): a request line `METHOD SP target SP
// HTTP/1.x CRLF` (method a token, target visible ASCII: no control, space or
// byte of 0x80 and above; the version HTTP/1.0 or HTTP/1.1, while a
// well-formed version of another major number, `HTTP/2.0`, is
// unsupported_version: 505), header lines `name: value CRLF` (name a token;
// value printable, obs-text, SP and HTAB; surrounding whitespace dropped; no
// obsolete line folding), an empty line, and a body: Content-Length bytes,
// or `Transfer-Encoding: chunked` (chunked_decoder.hpp: chunk extensions
// ignored, trailer fields read and discarded), decoded into `body` as a
// Content-Length body would be. Every line of the head ends in CRLF: a bare
// LF or CR is `invalid` (bad_line_ending) as soon as it is seen, not
// tolerated as RFC 9112 2.2 allows (a lenient reader that a proxy in front
// disagrees with is how requests get smuggled). Transfer-Encoding:
//   * `chunked` alone (any case; in one field or split over several) is
//     supported;
//   * any other coding or list (gzip, identity, `gzip, chunked`, unknown)
//     is unsupported_transfer_encoding: 501 Not Implemented;
//   * with a Content-Length, in an HTTP/1.0 request, empty, or chunked
//     twice: bad_transfer_encoding (400: RFC 9112 6.1, 6.3 — a message read
//     two ways is how requests get smuggled).
// Two different Content-Length values are invalid. Host (RFC 9112 3.2): a
// request with more than one, or with one that is not `host[:port]` (RFC
// 9110 7.2: a reg-name or IPv4 address of RFC 3986's characters, or an IP
// literal in brackets; an empty value is allowed) is bad_host (400); a
// request without one is served (HTTP/1.1 too, leniently, as hyper does).
// The views in `request`
// point into the caller's buffer: they are valid while it is (and a
// chunked body lies where request_reader decoded it, in that buffer).
//
// Limits (request_limits): the head (request line + headers) beyond
// max_head_bytes or more than max_headers headers is `invalid` with
// head_too_large (431), a body over max_body_bytes with body_too_large (413)
// — decided as soon as the bytes seen exceed the limit (for a
// Content-Length body: from the header, before any of the body arrives; for
// a chunked body: as soon as a chunk-size takes the decoded total over it),
// so a client cannot make the server buffer an unbounded head or body. A
// chunked body's trailer section has the head's limits (max_head_bytes in
// all, max_headers fields) and is head_too_large over them: trailer fields
// are header fields, which is what 431 names. A chunk-size line longer than
// max_head_bytes is bad_chunk_size.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "chunked_decoder.hpp"

namespace canopy::io::http {

struct request_limits {
  std::size_t max_head_bytes = 8192;
  // At most request::header_capacity: the server refuses more at its start
  // (check_serving); the parser alone caps it there.
  std::size_t max_headers = 64;
  std::size_t max_body_bytes = 1 << 20;
};

struct header {
  std::string_view name;
  std::string_view value;
};

struct request {
  static constexpr std::size_t header_capacity = 64;

  std::string_view method;
  std::string_view target;
  int version_minor = 1;  // HTTP/1.<minor>: 0 or 1
  std::array<header, header_capacity> headers{};
  std::size_t header_count = 0;
  std::string_view body;
  // From the version and the Connection header: HTTP/1.1 keeps the
  // connection unless "close" is listed; HTTP/1.0 closes unless "keep-alive".
  bool keep_alive = true;

  // The first header of that name (case-insensitive), or an empty view.
  [[nodiscard]] std::string_view find(std::string_view name) const noexcept;
  // The target's path (RFC 9112 3.2), what a router matches: before '?';
  // of an absolute-form target ("http://host:port/p?q", sent through a
  // proxy), what follows the authority; "/" where that is empty. "*"
  // (OPTIONS *) stays "*". A view into `target`; no percent-decoding.
  [[nodiscard]] std::string_view path() const noexcept;
  // What follows the first '?' of the target (without it), or an empty
  // view. No decoding.
  [[nodiscard]] std::string_view query() const noexcept;
};

// The parser itself: the connection loop's (io/http/http_connection_loop.hpp).
namespace detail {

enum class parse_status : std::uint8_t {
  complete,
  incomplete,
  invalid,
  // parse_request only: the head is complete (and `request` holds it) and a
  // chunked body follows at `consumed`; request_reader decodes it.
  chunked_body,
};

enum class parse_error : std::uint8_t {
  none,
  bad_request_line,
  bad_method,
  bad_target,
  bad_version,          // not HTTP/1.0 or HTTP/1.1, nor a well-formed other version: 400
  unsupported_version,  // well formed, a major version other than 1 (HTTP/2.0): 505
  bad_header,
  bad_content_length,
  unsupported_transfer_encoding,
  head_too_large,         // the head, or a chunked body's trailers, over the limits: 431
  body_too_large,         // Content-Length or the decoded chunked body over max_body_bytes: 413
  bad_line_ending,        // a bare LF or CR in the head (RFC 9112 2.2: CRLF only here)
  bad_transfer_encoding,  // with Content-Length, in HTTP/1.0, empty, or chunked twice
  bad_chunk_size,         // a chunk-size line: not hex, overflow, too long, a bad byte
  bad_chunk_ending,       // chunk data not followed by CRLF
  bad_host,               // two Host fields; a Host not host[:port]
};

struct parse_outcome {
  parse_status status = parse_status::incomplete;
  parse_error error = parse_error::none;
  std::size_t consumed = 0;  // bytes of the request, when complete (of the head: chunked_body)
  // When incomplete: how many bytes of the input to keep for the next call
  // (all of them, but for a chunked body's spent framing: request_reader).
  std::size_t keep = 0;
};

// Parse one request from the start of `input`.
[[nodiscard]] parse_outcome parse_request(std::string_view input, request& out,
                                          const request_limits& limits = {}) noexcept;

// Reads the requests of one connection, one at a time: parse_request, and
// for a chunked body a chunked_decoder that keeps its place between calls,
// so a body that arrives in pieces is decoded once, not again per piece.
// Each call gets the unanswered bytes at the front of `input`: after
// `incomplete`, its first `keep` bytes (moved or not) followed by what
// arrived since; after `complete` or `invalid`, a new request.
class request_reader {
 public:
  explicit request_reader(const request_limits& limits = {}) noexcept : limits_(limits) {}

  [[nodiscard]] parse_outcome read(std::span<char> input, request& out) noexcept;

 private:
  request_limits limits_;
  bool in_body_ = false;  // a chunked body is being decoded
  detail::chunked_decoder body_;
};

// The status code that answers `error`: 413 Content Too Large for
// body_too_large (RFC 9110 15.5.14), 431 Request Header Fields Too Large for
// head_too_large (RFC 6585 5), 501 for a transfer coding this parser does
// not implement, 400 for every other.
[[nodiscard]] int status_of(parse_error error) noexcept;

// A short description of `error`, for logs.
[[nodiscard]] std::string_view describe(parse_error error) noexcept;

}  // namespace detail

// Case-insensitive ASCII comparison (header names, tokens).
[[nodiscard]] bool equals_ignoring_case(std::string_view a, std::string_view b) noexcept;
// Whether the comma-separated header value lists `token` (case-insensitive).
[[nodiscard]] bool lists_token(std::string_view value, std::string_view token) noexcept;

}  // namespace canopy::io::http
