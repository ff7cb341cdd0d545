// http_chars — the byte classes of RFC 9110/9112 that the request parser
// and the chunked decoder both check, written once.
#pragma once

#include <cstddef>
#include <string_view>

namespace canopy::io::http::detail {

// tchar (RFC 9110 5.6.2): the bytes of a token (a method, a field name).
constexpr bool is_token_char(char c) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
    return true;
  }
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

// VCHAR and obs-text (0x80..0xFF).
constexpr bool is_visible(char c) noexcept {
  const auto byte = static_cast<unsigned char>(c);
  return byte > 0x20 && byte != 0x7F;
}

// What a field value (and a chunk extension) may hold: visible bytes, SP, HTAB.
constexpr bool is_field_char(char c) noexcept { return is_visible(c) || c == ' ' || c == '\t'; }

constexpr bool is_hex_digit(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// unreserved and sub-delims (RFC 3986 2.3, 2.2): what a reg-name holds
// besides pct-encoded bytes.
constexpr bool is_host_char(char c) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
    return true;
  }
  switch (c) {
    case '-':
    case '.':
    case '_':
    case '~':
    case '!':
    case '$':
    case '&':
    case '\'':
    case '(':
    case ')':
    case '*':
    case '+':
    case ',':
    case ';':
    case '=':
      return true;
    default:
      return false;
  }
}

// A Host field value (RFC 9110 7.2): uri-host [ ":" port ] (RFC 3986
// 3.2.2-3.2.3). uri-host: an IP-literal ("[" an IPv6 address or IPvFuture
// "]": checked for its characters only) or a reg-name / IPv4 address
// (unreserved, sub-delims, pct-encoded); port: digits (possibly none).
// Empty is valid: RFC 9112 3.2 has a client send an empty Host for a
// target without an authority.
constexpr bool is_host_value(std::string_view value) noexcept {
  std::size_t at = 0;
  if (!value.empty() && value.front() == '[') {
    const std::size_t close = value.find(']');
    if (close == std::string_view::npos || close == 1) {
      return false;
    }
    for (const char c : value.substr(1, close - 1)) {
      if (!is_host_char(c) && c != ':') {
        return false;
      }
    }
    at = close + 1;
  } else {
    while (at < value.size() && value[at] != ':') {
      if (value[at] == '%') {
        if (at + 2 >= value.size() || !is_hex_digit(value[at + 1]) ||
            !is_hex_digit(value[at + 2])) {
          return false;
        }
        at += 3;
      } else if (is_host_char(value[at])) {
        ++at;
      } else {
        return false;
      }
    }
  }
  if (at == value.size()) {
    return true;
  }
  if (value[at] != ':') {
    return false;  // after an IP literal: only a port
  }
  for (++at; at < value.size(); ++at) {
    if (value[at] < '0' || value[at] > '9') {
      return false;
    }
  }
  return true;
}

}  // namespace canopy::io::http::detail
