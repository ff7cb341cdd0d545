// http_chars — the byte classes of RFC 9110/9112 that the request parser
// and the chunked decoder both check, written once.
#pragma once

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

}  // namespace canopy::io::http::detail
