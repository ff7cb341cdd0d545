#include "http_parser.hpp"

#include <algorithm>

#include "http_chars.hpp"

namespace canopy::io::http {

using detail::parse_error;
using detail::parse_outcome;
using detail::parse_status;

namespace {

using detail::is_field_char;
using detail::is_host_value;
using detail::is_token_char;

// A request target is ASCII (RFC 9112 3.2, RFC 3986): VCHAR only, no
// obs-text — a byte of 0x80 or above is invalid, not passed on.
constexpr bool is_target_char(char c) noexcept {
  const auto byte = static_cast<unsigned char>(c);
  return byte > 0x20 && byte < 0x7F;
}

constexpr char lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
}

bool is_token(std::string_view text) noexcept {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_token_char);
}

std::string_view trim(std::string_view text) noexcept {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

parse_outcome fail(parse_error error) noexcept { return {parse_status::invalid, error, 0}; }

// A line without its CRLF that holds a CR or an LF: a bare line ending.
bool has_bare_line_end(std::string_view line) noexcept {
  return line.find_first_of("\r\n") != std::string_view::npos;
}

// Digits only (no sign, no spaces inside); 19 digits cannot overflow.
bool parse_length(std::string_view text, std::size_t& length) noexcept {
  if (text.empty() || text.size() > 19) {
    return false;
  }
  std::size_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') {
      return false;
    }
    value = value * 10 + static_cast<std::size_t>(c - '0');
  }
  length = value;
  return true;
}

// A version that is not HTTP/1.0 or HTTP/1.1: well formed ("HTTP/" digits,
// then "." and digits or nothing, as nginx reads it) with a major version
// other than 1 is one this server does not speak (505, RFC 9110 15.6.6:
// HTTP/2.0, the preface of a client that assumes HTTP/2, HTTP/0.9); any
// other text, and HTTP/1 with another minor, is malformed (400).
parse_error other_version(std::string_view version) noexcept {
  constexpr std::string_view name = "HTTP/";
  if (!version.starts_with(name)) {
    return parse_error::bad_version;
  }
  const auto is_digit = [](char c) noexcept { return c >= '0' && c <= '9'; };
  const std::string_view number = version.substr(name.size());
  const std::size_t dot = number.find('.');
  const std::string_view major = number.substr(0, dot);
  const std::string_view minor =
      dot == std::string_view::npos ? std::string_view() : number.substr(dot + 1);
  if (major.empty() || !std::all_of(major.begin(), major.end(), is_digit) ||
      (dot != std::string_view::npos &&
       (minor.empty() || !std::all_of(minor.begin(), minor.end(), is_digit)))) {
    return parse_error::bad_version;
  }
  // Leading zeros do not make another version: "01" is major 1.
  const bool major_one = major.find_first_not_of('0') == major.size() - 1 && major.back() == '1';
  return major_one ? parse_error::bad_version : parse_error::unsupported_version;
}

parse_error parse_request_line(std::string_view line, request& out) noexcept {
  const std::size_t first_space = line.find(' ');
  if (first_space == std::string_view::npos) {
    return parse_error::bad_request_line;
  }
  const std::size_t second_space = line.find(' ', first_space + 1);
  if (second_space == std::string_view::npos) {
    return parse_error::bad_request_line;
  }
  out.method = line.substr(0, first_space);
  out.target = line.substr(first_space + 1, second_space - first_space - 1);
  const std::string_view version = line.substr(second_space + 1);
  if (!is_token(out.method)) {
    return parse_error::bad_method;
  }
  if (out.target.empty() || !std::all_of(out.target.begin(), out.target.end(), is_target_char)) {
    return parse_error::bad_target;
  }
  if (version.size() == 8 && version.substr(0, 7) == "HTTP/1." &&
      (version[7] == '0' || version[7] == '1')) {
    out.version_minor = version[7] - '0';
    return parse_error::none;
  }
  return other_version(version);
}

}  // namespace

bool equals_ignoring_case(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) {
      return false;
    }
  }
  return true;
}

bool lists_token(std::string_view value, std::string_view token) noexcept {
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    const std::string_view item = trim(value.substr(0, comma));
    if (equals_ignoring_case(item, token)) {
      return true;
    }
    if (comma == std::string_view::npos) {
      break;
    }
    value.remove_prefix(comma + 1);
  }
  return false;
}

std::string_view request::find(std::string_view name) const noexcept {
  for (std::size_t i = 0; i < header_count; ++i) {
    if (equals_ignoring_case(headers[i].name, name)) {
      return headers[i].value;
    }
  }
  return {};
}

std::string_view request::path() const noexcept {
  std::string_view path = target;
  if (!path.starts_with('/')) [[unlikely]] {
    // An absolute-form target's path follows its authority (RFC 9110
    // 4.2.3: an empty one is "/"); "*" and the like stay as they are.
    if (const std::size_t scheme_end = path.find("://"); scheme_end != std::string_view::npos) {
      path.remove_prefix(scheme_end + 3);
      const std::size_t path_start = path.find_first_of("/?");
      path.remove_prefix(path_start == std::string_view::npos ? path.size() : path_start);
    }
  }
  if (const std::size_t mark = path.find('?'); mark != std::string_view::npos) {
    path = path.substr(0, mark);
  }
  return path.empty() ? "/" : path;
}

std::string_view request::query() const noexcept {
  const std::size_t mark = target.find('?');
  return mark == std::string_view::npos ? std::string_view{} : target.substr(mark + 1);
}

namespace {

// What the Transfer-Encoding fields of a request list, in order.
struct transfer_codings {
  bool present = false;
  std::size_t count = 0;    // codings listed, in all fields
  std::size_t chunked = 0;  // how many of them are `chunked`
  bool last_chunked = false;

  void add(std::string_view value) noexcept {
    present = true;
    while (!value.empty()) {
      const std::size_t comma = value.find(',');
      const std::string_view item = trim(value.substr(0, comma));
      if (!item.empty()) {  // empty list elements are allowed (RFC 9110 5.6.1)
        ++count;
        last_chunked = equals_ignoring_case(item, "chunked");
        chunked += last_chunked ? 1 : 0;
      }
      if (comma == std::string_view::npos) {
        break;
      }
      value.remove_prefix(comma + 1);
    }
  }

  // none: chunked alone; else why the request is refused.
  [[nodiscard]] parse_error check(bool have_length, int version_minor) const noexcept {
    if (have_length || version_minor == 0 || count == 0 || chunked > 1) {
      return parse_error::bad_transfer_encoding;
    }
    return count == 1 && last_chunked ? parse_error::none
                                      : parse_error::unsupported_transfer_encoding;
  }
};

parse_outcome parse(std::string_view input, request& out, const request_limits& limits) noexcept {
  out.header_count = 0;
  out.body = {};
  // RFC 9112 2.2: ignore at least one empty line before a request line.
  std::size_t start = 0;
  while (start + 1 < input.size() && input[start] == '\r' && input[start + 1] == '\n' &&
         start < 4) {
    start += 2;
  }
  const std::size_t head_end = input.find("\r\n\r\n", start);
  if (head_end == std::string_view::npos) {
    if (input.size() - start > limits.max_head_bytes) {
      return fail(parse_error::head_too_large);
    }
    // A byte no request head may hold, or a bare line ending (an LF not
    // after a CR, a CR before anything but an LF; a CR at the end may still
    // get its LF), is reported now, not at the limit or the timeout: a head
    // whose lines end in LF alone never shows the CRLF CRLF that ends it.
    for (std::size_t i = start; i < input.size(); ++i) {
      const char c = input[i];
      if (c == '\n') {
        if (i == 0 || input[i - 1] != '\r') {
          return fail(parse_error::bad_line_ending);
        }
      } else if (c == '\r') {
        if (i + 1 < input.size() && input[i + 1] != '\n') {
          return fail(parse_error::bad_line_ending);
        }
      } else if (!is_field_char(c)) {
        return fail(parse_error::bad_request_line);
      }
    }
    return {};
  }
  if (head_end - start + 4 > limits.max_head_bytes) {
    return fail(parse_error::head_too_large);
  }

  std::string_view rest = input.substr(start, head_end - start + 2);  // lines, each with CRLF
  std::size_t line_end = rest.find("\r\n");
  if (const parse_error error = parse_request_line(rest.substr(0, line_end), out);
      error != parse_error::none) {
    return fail(has_bare_line_end(rest.substr(0, line_end)) ? parse_error::bad_line_ending : error);
  }
  rest.remove_prefix(line_end + 2);

  bool have_length = false;
  std::size_t content_length = 0;
  bool close = false;
  bool keep_alive = false;
  std::size_t hosts = 0;
  std::string_view host;
  transfer_codings codings;
  while (!rest.empty()) {
    line_end = rest.find("\r\n");
    const std::string_view line = rest.substr(0, line_end);
    rest.remove_prefix(line_end + 2);
    const std::size_t colon = line.find(':');
    const std::string_view name = line.substr(0, colon);
    const std::string_view raw_value =
        colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
    // No colon is also obsolete folding (a line that starts with a space).
    if (colon == std::string_view::npos || !is_token(name) ||
        !std::all_of(raw_value.begin(), raw_value.end(), is_field_char)) {
      return fail(has_bare_line_end(line) ? parse_error::bad_line_ending : parse_error::bad_header);
    }
    if (out.header_count == limits.max_headers || out.header_count == request::header_capacity) {
      return fail(parse_error::head_too_large);
    }
    const std::string_view value = trim(raw_value);
    out.headers[out.header_count++] = header{name, value};

    if (equals_ignoring_case(name, "content-length")) {
      std::size_t length = 0;
      if (!parse_length(value, length) || (have_length && length != content_length)) {
        return fail(parse_error::bad_content_length);
      }
      have_length = true;
      content_length = length;
    } else if (equals_ignoring_case(name, "transfer-encoding")) {
      codings.add(value);
    } else if (equals_ignoring_case(name, "connection")) {
      close = close || lists_token(value, "close");
      keep_alive = keep_alive || lists_token(value, "keep-alive");
    } else if (equals_ignoring_case(name, "host")) {
      ++hosts;
      host = value;
    }
  }
  if (codings.present) {
    if (const parse_error error = codings.check(have_length, out.version_minor);
        error != parse_error::none) {
      return fail(error);
    }
  }
  if (content_length > limits.max_body_bytes) {
    return fail(parse_error::body_too_large);
  }
  // RFC 9112 3.2: 400 for a request with more than one Host or with one
  // that is not a valid host[:port] (a server and a proxy in front that
  // read the authority differently is a way past the proxy's rules). An
  // HTTP/1.1 request without Host is served, as hyper serves it: this
  // server has one authority, so nothing is read two ways, and hand-written
  // clients often leave it out. Checked after the framing, so a request bad
  // in both is told about its framing first.
  if (hosts > 1 || (hosts == 1 && !is_host_value(host))) {
    return fail(parse_error::bad_host);
  }
  out.keep_alive = out.version_minor == 1 ? !close : (keep_alive && !close);

  const std::size_t body_start = head_end + 4;
  if (codings.present) {
    return {parse_status::chunked_body, parse_error::none, body_start};
  }
  if (input.size() - body_start < content_length) {
    return {};
  }
  out.body = input.substr(body_start, content_length);
  return {parse_status::complete, parse_error::none, body_start + content_length};
}

parse_error error_of(detail::chunk_error error) noexcept {
  switch (error) {
    case detail::chunk_error::none:
      return parse_error::none;
    case detail::chunk_error::bad_size:
      return parse_error::bad_chunk_size;
    case detail::chunk_error::bad_data_end:
      return parse_error::bad_chunk_ending;
    case detail::chunk_error::bad_trailer:
      return parse_error::bad_header;
    case detail::chunk_error::bad_line_ending:
      return parse_error::bad_line_ending;
    case detail::chunk_error::body_too_large:
      return parse_error::body_too_large;
    case detail::chunk_error::trailers_too_large:
      return parse_error::head_too_large;
  }
  return parse_error::bad_chunk_size;
}

}  // namespace

parse_outcome detail::parse_request(std::string_view input, request& out,
                                    const request_limits& limits) noexcept {
  parse_outcome outcome = parse(input, out, limits);
  if (outcome.status == parse_status::incomplete) {
    outcome.keep = input.size();
  }
  return outcome;
}

parse_outcome detail::request_reader::read(std::span<char> input, request& out) noexcept {
  // The head again (it may have moved): as cheap as for a Content-Length
  // body, and the decoder does not depend on it.
  parse_outcome head = parse_request(std::string_view(input.data(), input.size()), out, limits_);
  if (head.status != parse_status::chunked_body) {
    in_body_ = false;
    return head;
  }
  if (!in_body_) {
    body_.reset();
    in_body_ = true;
  }
  const std::span<char> body = input.subspan(head.consumed);
  const detail::chunk_limits limits{limits_.max_body_bytes, limits_.max_head_bytes,
                                    limits_.max_headers};
  const detail::chunk_outcome decoded = body_.decode(body, limits);
  switch (decoded.status) {
    case detail::chunk_status::incomplete:
      return {parse_status::incomplete, parse_error::none, 0, head.consumed + body_.decoded()};
    case detail::chunk_status::invalid:
      in_body_ = false;
      return fail(error_of(decoded.error));
    case detail::chunk_status::complete:
      break;
  }
  in_body_ = false;
  out.body = std::string_view(body.data(), body_.decoded());
  return {parse_status::complete, parse_error::none, head.consumed + body_.consumed()};
}

int detail::status_of(parse_error error) noexcept {
  switch (error) {
    case parse_error::body_too_large:
      return 413;
    case parse_error::head_too_large:
      return 431;
    case parse_error::unsupported_transfer_encoding:
      return 501;
    case parse_error::unsupported_version:
      return 505;
    default:
      return 400;
  }
}

std::string_view detail::describe(parse_error error) noexcept {
  switch (error) {
    case parse_error::none:
      return "no error";
    case parse_error::bad_request_line:
      return "malformed request line";
    case parse_error::bad_method:
      return "the method is not a token";
    case parse_error::bad_target:
      return "the request target is empty or holds a control character or a byte of 0x80 or above";
    case parse_error::bad_version:
      return "the version is not HTTP/1.0 or HTTP/1.1";
    case parse_error::unsupported_version:
      return "this server speaks HTTP/1.0 and HTTP/1.1 only, not the request's major version";
    case parse_error::bad_header:
      return "malformed header line";
    case parse_error::bad_content_length:
      return "invalid or conflicting Content-Length";
    case parse_error::unsupported_transfer_encoding:
      return "this transfer coding is not implemented (only chunked alone is)";
    case parse_error::head_too_large:
      return "the request head or the chunked body's trailers are over the size limits";
    case parse_error::body_too_large:
      return "the request body is over the size limit";
    case parse_error::bad_line_ending:
      return "a line of the head ends in a bare LF or CR (CRLF is required)";
    case parse_error::bad_transfer_encoding:
      return "Transfer-Encoding with Content-Length, in an HTTP/1.0 request, empty, or chunked "
             "twice";
    case parse_error::bad_chunk_size:
      return "a chunk-size line is not hex, overflows, is too long or holds a bad byte";
    case parse_error::bad_chunk_ending:
      return "chunk data is not followed by CRLF";
    case parse_error::bad_host:
      return "more than one Host field, or one that is not host[:port]";
  }
  return "unknown error";
}

}  // namespace canopy::io::http
