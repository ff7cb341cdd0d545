// chunked_decoder — the chunked transfer coding of a request body (RFC 9112
// 7.1), decoded in place and incrementally; pure (no I/O, no allocation), so
// it is fuzzed with the parser. http::request_reader (http_parser.hpp) is
// its user: it finds the head, then hands this decoder the bytes after it.
//
// The layout it works on, `body` being the bytes after the request's head:
//   body[0, decoded())           the body decoded so far (chunk data only);
//   body[decoded(), body.size()) bytes that arrived since, still encoded.
// decode() reads every encoded byte it is given, moving chunk data down to
// decoded() (memmove: the decoded body is never longer than its encoding),
// and returns:
//   * incomplete: every byte was used; the caller drops what lies after
//     decoded() (spent framing and data already moved) and calls again
//     with the bytes that arrive next appended there;
//   * complete: the terminating `0` chunk, its trailer section (read,
//     checked and discarded) and the final CRLF were read; the body is
//     body[0, decoded()) and the request ended at body[consumed()]: what
//     lies after it is the next request, untouched;
//   * invalid: the error says why; nothing more may be decoded.
// So input split anywhere (inside a size line, a CRLF, the data) decodes
// the same as input given at once.
//
// Strictness: a chunk-size is hex digits (at least one; leading zeros
// allowed, more than 16 significant ones overflow), then optionally
// whitespace and `;` chunk extensions (visible bytes, SP, HTAB: ignored),
// then CRLF; chunk data is followed by CRLF; a trailer field line is
// `name: value` as in the head. A bare LF or CR is an error, as in the
// head. Limits: the body as decoded over max_body_bytes is body_too_large
// as soon as a chunk-size says so (before its data arrives; so a size too
// big for 64 bits is body_too_large, not bad_size, under any smaller limit:
// the limit is passed digit by digit, before the overflow); a chunk-size
// line over max_line_bytes is bad_size; the trailer section over
// max_line_bytes bytes or max_trailers fields is trailers_too_large.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace canopy::io::http::detail {

struct chunk_limits {
  std::size_t max_body_bytes = 0;
  std::size_t max_line_bytes = 0;  // one chunk-size line; the trailer section in all
  std::size_t max_trailers = 0;
};

enum class chunk_status : std::uint8_t { incomplete, complete, invalid };

enum class chunk_error : std::uint8_t {
  none,
  bad_size,            // not hex, no digit, overflow, a line too long, a bad byte in it
  bad_data_end,        // chunk data not followed by CRLF
  bad_trailer,         // a malformed trailer field line
  bad_line_ending,     // a bare LF, or a CR not followed by LF
  body_too_large,      // the decoded body over max_body_bytes
  trailers_too_large,  // the trailer section over max_line_bytes or max_trailers
};

struct chunk_outcome {
  chunk_status status = chunk_status::incomplete;
  chunk_error error = chunk_error::none;
};

class chunked_decoder {
 public:
  // Decodes body[decoded(), body.size()) as described above.
  [[nodiscard]] chunk_outcome decode(std::span<char> body, const chunk_limits& limits) noexcept;

  // Bytes of decoded body at the front of `body`.
  [[nodiscard]] std::size_t decoded() const noexcept { return decoded_; }
  // After `complete`: the bytes of `body` the request took, framing included.
  [[nodiscard]] std::size_t consumed() const noexcept { return consumed_; }

  // Back to the start of a body, for the next request.
  void reset() noexcept { *this = chunked_decoder{}; }

 private:
  // Where the next encoded byte falls.
  enum class phase : std::uint8_t {
    size,           // hex digits of a chunk-size
    size_space,     // whitespace after the digits: only `;` (an extension) may follow
    extension,      // a chunk extension, up to CR
    size_lf,        // the LF of the chunk-size line
    data,           // chunk data: remaining_ more bytes
    data_cr,        // the CR after chunk data
    data_lf,        // the LF after chunk data
    trailer_start,  // the start of a trailer line, or the CR of the final CRLF
    trailer_name,   // a trailer field's name, up to ':'
    trailer_value,  // its value, up to CR
    trailer_lf,     // the LF of a trailer line
    final_lf,       // the LF of the final CRLF
    done,
  };

  [[nodiscard]] chunk_error step(char c, const chunk_limits& limits) noexcept;

  phase phase_ = phase::size;
  std::uint64_t size_ = 0;  // the chunk-size being read, then the data left of it
  bool size_digit_ = false;
  std::size_t line_bytes_ = 0;  // of the chunk-size line being read
  std::size_t trailer_bytes_ = 0;
  std::size_t trailers_ = 0;
  std::size_t decoded_ = 0;
  std::size_t consumed_ = 0;
};

}  // namespace canopy::io::http::detail
