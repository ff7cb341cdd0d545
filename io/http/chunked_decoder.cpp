#include "chunked_decoder.hpp"

#include <algorithm>
#include <cstring>

#include "http_chars.hpp"

namespace canopy::io::http::detail {

namespace {

// The value of a hex digit, or -1.
constexpr int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

}  // namespace

chunk_outcome chunked_decoder::decode(std::span<char> body, const chunk_limits& limits) noexcept {
  if (phase_ == phase::done) {
    return {chunk_status::complete, chunk_error::none};
  }
  std::size_t at = decoded_;  // the next encoded byte; everything before it is used
  while (at < body.size()) {
    if (phase_ == phase::data) {
      // Chunk data in bulk: moved down over the framing already read.
      const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(size_, body.size() - at));
      if (at != decoded_) {
        std::memmove(body.data() + decoded_, body.data() + at, take);
      }
      decoded_ += take;
      at += take;
      size_ -= take;
      if (size_ == 0) {
        phase_ = phase::data_cr;
      }
      continue;
    }
    if (const chunk_error error = step(body[at++], limits); error != chunk_error::none) {
      return {chunk_status::invalid, error};
    }
    if (phase_ == phase::done) {
      consumed_ = at;
      return {chunk_status::complete, chunk_error::none};
    }
  }
  return {};
}

// One byte of framing (anything but chunk data).
chunk_error chunked_decoder::step(char c, const chunk_limits& limits) noexcept {
  const bool size_line =
      phase_ == phase::size || phase_ == phase::size_space || phase_ == phase::extension;
  if (size_line && ++line_bytes_ > limits.max_line_bytes) {
    return chunk_error::bad_size;
  }
  const bool trailer = phase_ >= phase::trailer_start && phase_ <= phase::final_lf;
  if (trailer && ++trailer_bytes_ > limits.max_line_bytes) {
    return chunk_error::trailers_too_large;
  }
  switch (phase_) {
    case phase::size:
      if (const int digit = hex_value(c); digit >= 0) {
        if (size_ > (UINT64_MAX >> 4)) {
          return chunk_error::bad_size;  // would overflow
        }
        size_ = size_ * 16 + static_cast<std::uint64_t>(digit);
        size_digit_ = true;
        // Refused as soon as the size says the body will not fit: the data
        // is never read, let alone buffered.
        if (size_ > limits.max_body_bytes - decoded_) {
          return chunk_error::body_too_large;
        }
        return chunk_error::none;
      }
      if (!size_digit_) {
        return c == '\n' ? chunk_error::bad_line_ending : chunk_error::bad_size;
      }
      switch (c) {
        case ' ':
        case '\t':
          phase_ = phase::size_space;
          return chunk_error::none;
        case ';':
          phase_ = phase::extension;
          return chunk_error::none;
        case '\r':
          phase_ = phase::size_lf;
          return chunk_error::none;
        case '\n':
          return chunk_error::bad_line_ending;
        default:
          return chunk_error::bad_size;
      }
    case phase::size_space:
      // RFC 9112 7.1.1: whitespace (BWS) only before an extension's `;`.
      if (c == ';') {
        phase_ = phase::extension;
        return chunk_error::none;
      }
      return c == ' ' || c == '\t' ? chunk_error::none : chunk_error::bad_size;
    case phase::extension:
      if (c == '\r') {
        phase_ = phase::size_lf;
        return chunk_error::none;
      }
      if (c == '\n') {
        return chunk_error::bad_line_ending;
      }
      return is_field_char(c) ? chunk_error::none : chunk_error::bad_size;
    case phase::size_lf:
      if (c != '\n') {
        return chunk_error::bad_line_ending;
      }
      line_bytes_ = 0;
      size_digit_ = false;
      phase_ = size_ == 0 ? phase::trailer_start : phase::data;
      return chunk_error::none;
    case phase::data:
      return chunk_error::none;  // decode() copies data in bulk; never reached
    case phase::data_cr:
      if (c != '\r') {
        return chunk_error::bad_data_end;
      }
      phase_ = phase::data_lf;
      return chunk_error::none;
    case phase::data_lf:
      if (c != '\n') {
        return chunk_error::bad_data_end;
      }
      phase_ = phase::size;
      return chunk_error::none;
    case phase::trailer_start:
      if (c == '\r') {
        phase_ = phase::final_lf;
        return chunk_error::none;
      }
      if (c == '\n') {
        return chunk_error::bad_line_ending;
      }
      if (!is_token_char(c)) {
        return chunk_error::bad_trailer;  // also obsolete folding (a leading space)
      }
      if (++trailers_ > limits.max_trailers) {
        return chunk_error::trailers_too_large;
      }
      phase_ = phase::trailer_name;
      return chunk_error::none;
    case phase::trailer_name:
      if (c == ':') {
        phase_ = phase::trailer_value;
        return chunk_error::none;
      }
      if (c == '\n' || c == '\r') {
        return c == '\n' ? chunk_error::bad_line_ending : chunk_error::bad_trailer;
      }
      return is_token_char(c) ? chunk_error::none : chunk_error::bad_trailer;
    case phase::trailer_value:
      if (c == '\r') {
        phase_ = phase::trailer_lf;
        return chunk_error::none;
      }
      if (c == '\n') {
        return chunk_error::bad_line_ending;
      }
      return is_field_char(c) ? chunk_error::none : chunk_error::bad_trailer;
    case phase::trailer_lf:
    case phase::final_lf:
      if (c != '\n') {
        return chunk_error::bad_line_ending;
      }
      phase_ = phase_ == phase::final_lf ? phase::done : phase::trailer_start;
      return chunk_error::none;
    case phase::done:
      return chunk_error::none;
  }
  return chunk_error::none;
}

}  // namespace canopy::io::http::detail
