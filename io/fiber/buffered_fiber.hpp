// buffered_fiber — the fibers' forms of the buffered reader's reads and of
// the text and frame writes (io/buffered_reader.hpp, io/stream_writes.hpp):
// the same steps (io/read_buffer.hpp), with this_fiber::read_some and
// this_fiber::write_all blocking only the calling fiber.
//
//   canopy::io::buffered_reader<canopy::io::tcp_stream&> reader(stream);
//   std::optional<std::string> line = canopy::this_fiber::read_line(reader, 4096);
//   canopy::this_fiber::write_all(stream, "ok\n");
//
// Only inside a fiber (elsewhere std::logic_error); the streams are those
// with this_fiber forms (tcp_stream, unix_stream). Results, errors and the
// consume-nothing-on-failure rule are the task forms'. A fiber cancelled
// while it reads loses no buffered bytes, as a task does.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "../buffered_reader.hpp"
#include "../read_buffer.hpp"
#include "fiber_io.hpp"

namespace canopy::this_fiber {

namespace buffered_detail {

// Steps `step` until done (true) or failed (false, `error` set), reading
// between steps; consumes nothing.
template <class Stream, class Step>
bool run(io::buffered_reader<Stream>& reader, Step step, io::detail::read_scan& scan,
         std::error_code& error) {
  error.clear();
  io::detail::read_buffer& buffer = reader.buffer_for_fiber_forms();
  bool eof = false;
  for (;;) {
    switch (step(buffer, eof, scan, error)) {
      case io::detail::read_step::done:
        return true;
      case io::detail::read_step::failed:
        return false;
      case io::detail::read_step::more:
        break;
    }
    const std::size_t got = canopy::this_fiber::read_some(
        reader.stream(), buffer.prepare(scan.room_min, scan.room_max), error);
    if (error) {
      return false;
    }
    buffer.commit(got);
    eof = got == 0;
  }
}

template <class T>
T or_throw(T value, const std::error_code& error, const char* what) {
  io::detail::throw_if_failed(error, what);
  return value;
}

}  // namespace buffered_detail

template <class Stream>
std::size_t read_some(io::buffered_reader<Stream>& reader, std::span<std::byte> into,
                      std::error_code& error) {
  error.clear();
  io::detail::read_buffer& buffer = reader.buffer_for_fiber_forms();
  if (buffer.size() == 0 && !into.empty()) {
    if (into.size() >= buffer.capacity()) {
      return canopy::this_fiber::read_some(reader.stream(), into, error);
    }
    buffer.commit(canopy::this_fiber::read_some(reader.stream(),
                                                buffer.prepare(1, buffer.capacity()), error));
  }
  return buffer.take(into);
}
template <class Stream>
std::size_t read_some(io::buffered_reader<Stream>& reader, std::span<std::byte> into) {
  std::error_code error;
  const std::size_t got = this_fiber::read_some(reader, into, error);
  return buffered_detail::or_throw(got, error, "canopy::io::this_fiber::read_some");
}

// Into chars, as the task form's read_some(std::span<char>).
template <class Stream>
std::size_t read_some(io::buffered_reader<Stream>& reader, std::span<char> into,
                      std::error_code& error) {
  return this_fiber::read_some(reader, std::as_writable_bytes(into), error);
}
template <class Stream>
std::size_t read_some(io::buffered_reader<Stream>& reader, std::span<char> into) {
  return this_fiber::read_some(reader, std::as_writable_bytes(into));
}

template <class Stream>
void read_exact(io::buffered_reader<Stream>& reader, std::span<std::byte> into,
                std::error_code& error) {
  const std::size_t count = into.size();
  io::detail::read_scan scan;
  if (buffered_detail::run(
          reader,
          [count](io::detail::read_buffer& buffer, bool eof, io::detail::read_scan& at,
                  std::error_code& failure) { return buffer.find_exact(count, eof, at, failure); },
          scan, error)) {
    reader.buffer_for_fiber_forms().take(into);
  }
}
template <class Stream>
void read_exact(io::buffered_reader<Stream>& reader, std::span<std::byte> into) {
  std::error_code error;
  this_fiber::read_exact(reader, into, error);
  io::detail::throw_if_failed(error, "canopy::io::this_fiber::read_exact");
}
template <class Stream>
void read_exact(io::buffered_reader<Stream>& reader, std::span<char> into, std::error_code& error) {
  this_fiber::read_exact(reader, std::as_writable_bytes(into), error);
}
template <class Stream>
void read_exact(io::buffered_reader<Stream>& reader, std::span<char> into) {
  this_fiber::read_exact(reader, std::as_writable_bytes(into));
}
// read_exact(n): the next `count` bytes as a string, as the task form's.
template <class Stream>
std::string read_exact(io::buffered_reader<Stream>& reader, std::size_t count,
                       std::error_code& error) {
  std::string text(count, '\0');
  this_fiber::read_exact(reader, std::span<char>(text), error);
  if (error) {
    text.clear();
  }
  return text;
}
template <class Stream>
std::string read_exact(io::buffered_reader<Stream>& reader, std::size_t count) {
  std::string text(count, '\0');
  this_fiber::read_exact(reader, std::span<char>(text));
  return text;
}

template <class Stream>
std::optional<std::string> read_until(io::buffered_reader<Stream>& reader, char delimiter,
                                      std::size_t max, std::error_code& error) {
  io::detail::read_scan scan;
  if (!buffered_detail::run(
          reader,
          [delimiter, max](io::detail::read_buffer& buffer, bool eof, io::detail::read_scan& at,
                           std::error_code& failure) {
            return buffer.find_record(delimiter, max, eof, at, failure);
          },
          scan, error) ||
      !scan.found) {
    return std::nullopt;
  }
  return reader.buffer_for_fiber_forms().take_string(scan);
}
template <class Stream>
std::optional<std::string> read_until(io::buffered_reader<Stream>& reader, char delimiter,
                                      std::size_t max) {
  std::error_code error;
  std::optional<std::string> record = this_fiber::read_until(reader, delimiter, max, error);
  return buffered_detail::or_throw(std::move(record), error, "canopy::io::this_fiber::read_until");
}

template <class Stream>
std::optional<std::string> read_line(io::buffered_reader<Stream>& reader, std::size_t max_length,
                                     std::error_code& error) {
  io::detail::read_scan scan;
  if (!buffered_detail::run(
          reader,
          [max_length](io::detail::read_buffer& buffer, bool eof, io::detail::read_scan& at,
                       std::error_code& failure) {
            return buffer.find_line(max_length, eof, at, failure);
          },
          scan, error) ||
      !scan.found) {
    return std::nullopt;
  }
  return reader.buffer_for_fiber_forms().take_string(scan);
}
template <class Stream>
std::optional<std::string> read_line(io::buffered_reader<Stream>& reader, std::size_t max_length) {
  std::error_code error;
  std::optional<std::string> line = this_fiber::read_line(reader, max_length, error);
  return buffered_detail::or_throw(std::move(line), error, "canopy::io::this_fiber::read_line");
}

template <class Stream>
bool skip_until(io::buffered_reader<Stream>& reader, char delimiter, std::error_code& error) {
  io::detail::read_scan scan;
  const bool done = buffered_detail::run(
      reader,
      [delimiter](io::detail::read_buffer& buffer, bool eof, io::detail::read_scan& at,
                  std::error_code&) { return buffer.skip_through(delimiter, eof, at); },
      scan, error);
  return done && scan.found;
}
template <class Stream>
bool skip_until(io::buffered_reader<Stream>& reader, char delimiter) {
  std::error_code error;
  const bool found = this_fiber::skip_until(reader, delimiter, error);
  return buffered_detail::or_throw(found, error, "canopy::io::this_fiber::skip_until");
}

template <class Stream>
std::optional<std::vector<std::byte>> read_frame(io::buffered_reader<Stream>& reader,
                                                 std::size_t max_size, std::error_code& error) {
  io::detail::read_scan scan;
  if (!buffered_detail::run(
          reader,
          [max_size](io::detail::read_buffer& buffer, bool eof, io::detail::read_scan& at,
                     std::error_code& failure) {
            return buffer.find_frame(max_size, eof, at, failure);
          },
          scan, error) ||
      !scan.found) {
    return std::nullopt;
  }
  return reader.buffer_for_fiber_forms().take_bytes(scan);
}
template <class Stream>
std::optional<std::vector<std::byte>> read_frame(io::buffered_reader<Stream>& reader,
                                                 std::size_t max_size) {
  std::error_code error;
  std::optional<std::vector<std::byte>> frame = this_fiber::read_frame(reader, max_size, error);
  return buffered_detail::or_throw(std::move(frame), error, "canopy::io::this_fiber::read_frame");
}

// Text and frames to a stream (tcp_stream, unix_stream).
template <class Stream>
void write_all(Stream& stream, std::string_view text, std::error_code& error) {
  canopy::this_fiber::write_all(stream, std::as_bytes(std::span(text.data(), text.size())), error);
}
template <class Stream>
void write_all(Stream& stream, std::string_view text) {
  canopy::this_fiber::write_all(stream, std::as_bytes(std::span(text.data(), text.size())));
}
// std::span<char> and std::span<const char>, as the task forms take them. A
// template, so that a std::string or a literal (which would convert to both)
// goes to the std::string_view form.
template <class Stream, class Char>
requires std::same_as<std::remove_const_t<Char>, char>
void write_all(Stream& stream, std::span<Char> text, std::error_code& error) {
  canopy::this_fiber::write_all(stream, std::as_bytes(text), error);
}
template <class Stream, class Char>
requires std::same_as<std::remove_const_t<Char>, char>
void write_all(Stream& stream, std::span<Char> text) {
  canopy::this_fiber::write_all(stream, std::as_bytes(text));
}
template <class Stream>
void write_frame(Stream& stream, std::span<const std::byte> payload, std::error_code& error,
                 std::size_t max_size = std::numeric_limits<std::uint32_t>::max()) {
  const io::detail::frame_header_bytes header =
      io::detail::frame_header(payload.size(), max_size, error);
  if (!error) {
    const std::array<std::span<const std::byte>, 2> parts{std::span<const std::byte>(header),
                                                          payload};
    canopy::this_fiber::write_all(stream, std::span<const std::span<const std::byte>>(parts),
                                  error);
  }
}
template <class Stream>
void write_frame(Stream& stream, std::span<const std::byte> payload,
                 std::size_t max_size = std::numeric_limits<std::uint32_t>::max()) {
  std::error_code error;
  this_fiber::write_frame(stream, payload, error, max_size);
  io::detail::throw_if_failed(error, "canopy::io::this_fiber::write_frame");
}
template <class Stream>
void write_frame(Stream& stream, std::string_view payload, std::error_code& error,
                 std::size_t max_size = std::numeric_limits<std::uint32_t>::max()) {
  this_fiber::write_frame(stream, std::as_bytes(std::span(payload.data(), payload.size())), error,
                          max_size);
}
template <class Stream>
void write_frame(Stream& stream, std::string_view payload,
                 std::size_t max_size = std::numeric_limits<std::uint32_t>::max()) {
  this_fiber::write_frame(stream, std::as_bytes(std::span(payload.data(), payload.size())),
                          max_size);
}

}  // namespace canopy::this_fiber

namespace canopy::io {
// The name these forms had before they joined canopy::this_fiber (fiber_io.hpp).
namespace this_fiber = canopy::this_fiber;
}  // namespace canopy::io
