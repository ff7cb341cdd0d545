// http_parser — a small HTTP/1.1 request parser: pure (no I/O, no
// allocation), so it can be fuzzed on its own.
//
//   canopy::io::http::request req;
//   auto outcome = canopy::io::http::parse_request(bytes, req);   // bytes: what arrived so far
//   switch (outcome.status) {
//     case parse_status::complete:   /* req is valid; outcome.consumed bytes were one request */
//     case parse_status::incomplete: /* read more, then call again with the longer buffer */
//     case parse_status::invalid:    /* answer 400 and close; outcome.error says why */
//   }
//
// What it accepts (RFC 9112, strictly): a request line `METHOD SP target SP
// HTTP/1.x CRLF` (method a token, target visible ASCII: no control, space or
// byte of 0x80 and above), header lines `name: value CRLF` (name a token;
// value printable, obs-text, SP and HTAB; surrounding whitespace dropped; no
// obsolete line folding), an empty line, and a body of Content-Length bytes.
// Every line of the head ends in CRLF: a bare LF or CR is `invalid`
// (bad_line_ending) as soon as it is seen, not tolerated as RFC 9112 2.2
// allows (a lenient reader that a proxy in front disagrees with is how
// requests get smuggled). Transfer-Encoding is not supported (invalid), nor
// are two different Content-Length values. The views in `request` point
// into the caller's buffer: they are valid while it is.
//
// Limits (request_limits): the head (request line + headers) beyond
// max_head_bytes, more than max_headers headers, or a body over
// max_body_bytes is `invalid` with errc too_large — decided as soon as the
// bytes seen exceed the limit, so a client cannot make the server buffer
// an unbounded head.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace canopy::io::http {

struct request_limits {
  std::size_t max_head_bytes = 8192;
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
};

enum class parse_status : std::uint8_t { complete, incomplete, invalid };

enum class parse_error : std::uint8_t {
  none,
  bad_request_line,
  bad_method,
  bad_target,
  bad_version,
  bad_header,
  bad_content_length,
  unsupported_transfer_encoding,
  too_large,
  bad_line_ending,  // a bare LF or CR in the head (RFC 9112 2.2: CRLF only here)
};

struct parse_outcome {
  parse_status status = parse_status::incomplete;
  parse_error error = parse_error::none;
  std::size_t consumed = 0;  // bytes of the request, when complete
};

// Parse one request from the start of `input`.
[[nodiscard]] parse_outcome parse_request(std::string_view input, request& out,
                                          const request_limits& limits = {}) noexcept;

// A short description of `error`, for logs.
[[nodiscard]] std::string_view describe(parse_error error) noexcept;

// Case-insensitive ASCII comparison (header names, tokens).
[[nodiscard]] bool equals_ignoring_case(std::string_view a, std::string_view b) noexcept;
// Whether the comma-separated header value lists `token` (case-insensitive).
[[nodiscard]] bool lists_token(std::string_view value, std::string_view token) noexcept;

}  // namespace canopy::io::http
