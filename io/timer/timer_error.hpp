// The I/O layer's own error codes (std::error_code, category "canopy.io").
// timed_out, what with_timeout gives when the deadline comes first, and
// unexpected_eof, what a buffered reader (io/buffered_reader.hpp) gives when
// the stream ends inside a record it must read whole.
// System errors (ECONNRESET, ...) stay in std::system_category.
#pragma once

#include <system_error>
#include <type_traits>

namespace canopy::io {

enum class errc {
  timed_out = 1,       // a deadline passed before the awaited operation completed
  unexpected_eof = 2,  // the stream ended inside an exact read or a frame
};

[[nodiscard]] const std::error_category& io_category() noexcept;

[[nodiscard]] inline std::error_code make_error_code(errc code) noexcept {
  return {static_cast<int>(code), io_category()};
}

}  // namespace canopy::io

template <>
struct std::is_error_code_enum<canopy::io::errc> : std::true_type {};
