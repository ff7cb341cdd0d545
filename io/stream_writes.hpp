// stream_writes — write_all for text, and write_frame, over any Canopy
// stream (tcp_stream, unix_stream: a write_all(std::span<const std::byte>)
// in both error forms). The public contract is in <canopy/io/buffered.hpp>.
//
//   co_await canopy::io::write_all(stream, "hello\n");       // inside a task
//   co_await canopy::io::write_frame(stream, payload);       // a 4-byte length, then payload
//
// The text is not copied: it must outlive the co_await (as a span does).
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "../coroutine/task.hpp"
#include "read_buffer.hpp"

namespace canopy::io {

// A stream the writes below take: the error_code form of write_all.
template <class S>
concept writable_stream = requires(S& stream, std::span<const std::byte> data,
                                   std::error_code& error) {
  { stream.write_all(data, error) } -> std::same_as<task<void>>;
  { stream.write_all(data) } -> std::same_as<task<void>>;
};

template <writable_stream Stream>
task<void> write_all(Stream& stream, std::string_view text, std::error_code& error) {
  return stream.write_all(std::as_bytes(std::span(text.data(), text.size())), error);
}
template <writable_stream Stream>
task<void> write_all(Stream& stream, std::string_view text) {
  return stream.write_all(std::as_bytes(std::span(text.data(), text.size())));
}
// std::span<char> and std::span<const char>. A template, so that a
// std::string or a string literal, which would convert to both, goes to
// the string_view form.
template <writable_stream Stream, class Char>
requires std::same_as < std::remove_const_t<Char>,
char > task<void> write_all(Stream& stream, std::span<Char> text, std::error_code& error) {
  return stream.write_all(std::as_bytes(text), error);
}
template <writable_stream Stream, class Char>
requires std::same_as < std::remove_const_t<Char>,
char > task<void> write_all(Stream& stream, std::span<Char> text) {
  return stream.write_all(std::as_bytes(text));
}

namespace detail {

// A stream with a gathered write_all (tcp_stream, unix_stream).
template <class S>
concept gathering_stream = requires(S& stream, std::span<const std::span<const std::byte>> buffers,
                                    std::error_code& error) {
  { stream.write_all(buffers, error) } -> std::same_as<task<void>>;
};

}  // namespace detail

// One frame as buffered_reader::read_frame reads it: a 4-byte big-endian
// length, then `payload`, in one write (a gathered one where the stream
// has it; elsewhere the two are copied into one buffer). A payload over
// `max_size` (at most 2^32 - 1): errc::message_size, and nothing is
// written.
template <writable_stream Stream>
task<void> write_frame(Stream& stream, std::span<const std::byte> payload, std::error_code& error,
                       std::size_t max_size = std::numeric_limits<std::uint32_t>::max()) {
  if constexpr (detail::gathering_stream<Stream>) {
    const detail::frame_header_bytes header = detail::frame_header(payload.size(), max_size, error);
    if (error) {
      co_return;
    }
    const std::array<std::span<const std::byte>, 2> parts{std::span<const std::byte>(header),
                                                          payload};
    co_await stream.write_all(std::span<const std::span<const std::byte>>(parts), error);
  } else {
    const std::vector<std::byte> frame = detail::make_frame(payload, max_size, error);
    if (error) {
      co_return;
    }
    co_await stream.write_all(std::span<const std::byte>(frame), error);
  }
}
template <writable_stream Stream>
task<void> write_frame(Stream& stream, std::span<const std::byte> payload,
                       std::size_t max_size = std::numeric_limits<std::uint32_t>::max()) {
  std::error_code error;
  co_await write_frame(stream, payload, error, max_size);
  if (error) {
    throw std::system_error(error, "canopy::io::write_frame");
  }
}
template <writable_stream Stream>
task<void> write_frame(Stream& stream, std::string_view payload, std::error_code& error,
                       std::size_t max_size = std::numeric_limits<std::uint32_t>::max()) {
  return write_frame(stream, std::as_bytes(std::span(payload.data(), payload.size())), error,
                     max_size);
}
template <writable_stream Stream>
task<void> write_frame(Stream& stream, std::string_view payload,
                       std::size_t max_size = std::numeric_limits<std::uint32_t>::max()) {
  return write_frame(stream, std::as_bytes(std::span(payload.data(), payload.size())), max_size);
}

}  // namespace canopy::io
