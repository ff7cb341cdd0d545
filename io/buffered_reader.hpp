// buffered_reader — a read buffer over a Canopy stream, with the reads a
// protocol needs: lines, delimited records, exact counts, length-prefixed
// frames. The public contract is in <canopy/io/buffered.hpp>; in short:
//
//   canopy::io::buffered_reader reader(std::move(stream));   // owns the stream
//   while (std::optional<std::string> line = co_await reader.read_line(4096)) { ... }
//
// Stream: any type with task<std::size_t> read_some(std::span<std::byte>,
// std::error_code&) (tcp_stream, unix_stream), held by value (the reader
// owns it) or, as buffered_reader<tcp_stream&>, by reference. Writes go to
// stream() directly (io/stream_writes.hpp has the text and frame forms).
//
// Every read that fails or loses a race consumes nothing: the steps
// (io/read_buffer.hpp) take bytes out of the buffer only when the read is
// done, and the buffer lives in the reader, not in the read's frame.
#pragma once

#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "../coroutine/task.hpp"
#include "read_buffer.hpp"

namespace canopy::io {

// A stream a buffered_reader reads: the error_code form of read_some.
template <class S>
concept readable_stream = requires(S& stream, std::span<std::byte> into, std::error_code& error) {
  { stream.read_some(into, error) } -> std::same_as<task<std::size_t>>;
};

namespace detail {

inline void throw_if_failed(const std::error_code& error, const char* what) {
  if (error) {
    throw std::system_error(error, what);
  }
}

}  // namespace detail

template <class Stream>
requires readable_stream<std::remove_reference_t<Stream>>
class buffered_reader {
 public:
  using stream_type = std::remove_reference_t<Stream>;
  static constexpr std::size_t default_capacity = 4096;

  explicit buffered_reader(Stream stream, std::size_t capacity = default_capacity)
      : stream_(std::forward<Stream>(stream)), buffer_(capacity) {}

  // The stream: for writes (another task may write while one reads, as
  // the stream allows), shutdown, close. Reading it directly skips what
  // the reader has buffered.
  stream_type& stream() noexcept { return stream_; }
  const stream_type& stream() const noexcept { return stream_; }

  // The bytes read from the stream and not yet returned, and a way to
  // drop some of them (count <= buffered().size()).
  [[nodiscard]] std::span<const std::byte> buffered() const noexcept { return buffer_.data(); }
  void consume(std::size_t count) noexcept { buffer_.consume(count); }

  // Buffered bytes first; with none, one read of the stream (straight into
  // `into` when it is at least the buffer's capacity). 0: EOF.
  task<std::size_t> read_some(std::span<std::byte> into, std::error_code& error) {
    error.clear();
    if (buffer_.size() == 0 && !into.empty()) {
      if (into.size() >= buffer_.capacity()) {
        co_return co_await stream_.read_some(into, error);
      }
      const std::size_t got =
          co_await stream_.read_some(buffer_.prepare(1, buffer_.capacity()), error);
      buffer_.commit(got);
    }
    co_return buffer_.take(into);
  }
  task<std::size_t> read_some(std::span<std::byte> into) {
    return throwing(read_some(into, last_error_), "canopy::io::buffered_reader::read_some");
  }
  task<std::size_t> read_some(std::span<char> into, std::error_code& error) {
    return read_some(std::as_writable_bytes(into), error);
  }
  task<std::size_t> read_some(std::span<char> into) {
    return read_some(std::as_writable_bytes(into));
  }

  // Fills `into` exactly. EOF first: errc::unexpected_eof (canopy::io),
  // and the bytes that did come stay buffered. The buffer grows to
  // into.size() meanwhile (that is what keeps a lost race from losing
  // bytes).
  task<void> read_exact(std::span<std::byte> into, std::error_code& error) {
    const std::size_t count = into.size();
    detail::read_scan scan;
    auto step = [this, count](bool eof, detail::read_scan& at, std::error_code& failure) {
      return buffer_.find_exact(count, eof, at, failure);
    };
    const bool done = co_await run(step, scan, error);  // see run() for why a named bool
    if (done) {
      buffer_.take(into);
    }
  }
  task<void> read_exact(std::span<std::byte> into) {
    return throwing(read_exact(into, last_error_), "canopy::io::buffered_reader::read_exact");
  }
  task<void> read_exact(std::span<char> into, std::error_code& error) {
    return read_exact(std::as_writable_bytes(into), error);
  }
  task<void> read_exact(std::span<char> into) { return read_exact(std::as_writable_bytes(into)); }
  // `count` bytes as a string.
  task<std::string> read_exact(std::size_t count, std::error_code& error) {
    std::string text(count, '\0');
    co_await read_exact(std::span<char>(text), error);
    if (error) {
      text.clear();
    }
    co_return text;
  }
  task<std::string> read_exact(std::size_t count) {
    return throwing(read_exact(count, last_error_), "canopy::io::buffered_reader::read_exact");
  }

  // The bytes through the next `delimiter`, delimiter included, if it
  // comes within `max` bytes (max >= 1); past that, errc::message_size and
  // nothing is consumed. At EOF: the rest without a delimiter (so a caller
  // that needs one checks the last byte), then std::nullopt.
  task<std::optional<std::string>> read_until(char delimiter, std::size_t max,
                                              std::error_code& error) {
    detail::read_scan scan;
    auto step = [this, delimiter, max](bool eof, detail::read_scan& at, std::error_code& failure) {
      return buffer_.find_record(delimiter, max, eof, at, failure);
    };
    co_return co_await take_string(step, scan, error);
  }
  task<std::optional<std::string>> read_until(char delimiter, std::size_t max) {
    return throwing(read_until(delimiter, max, last_error_),
                    "canopy::io::buffered_reader::read_until");
  }

  // The next line without its "\n" (and a "\r" before it), if it is at
  // most `max_length` bytes; longer: errc::message_size and nothing is
  // consumed (skip_until('\n') drops it and the reader goes on). At EOF:
  // a last line without "\n" as it is, then std::nullopt.
  task<std::optional<std::string>> read_line(std::size_t max_length, std::error_code& error) {
    detail::read_scan scan;
    auto step = [this, max_length](bool eof, detail::read_scan& at, std::error_code& failure) {
      return buffer_.find_line(max_length, eof, at, failure);
    };
    co_return co_await take_string(step, scan, error);
  }
  task<std::optional<std::string>> read_line(std::size_t max_length) {
    return throwing(read_line(max_length, last_error_), "canopy::io::buffered_reader::read_line");
  }

  // Drops bytes through the next `delimiter` without buffering them all:
  // true when one came, false at EOF. A skip that loses a race has dropped
  // a prefix of what it would have.
  task<bool> skip_until(char delimiter, std::error_code& error) {
    detail::read_scan scan;
    auto step = [this, delimiter](bool eof, detail::read_scan& at, std::error_code&) {
      return buffer_.skip_through(delimiter, eof, at);
    };
    const bool done = co_await run(step, scan, error);
    co_return done&& scan.found;
  }
  task<bool> skip_until(char delimiter) {
    return throwing(skip_until(delimiter, last_error_), "canopy::io::buffered_reader::skip_until");
  }

  // A frame written by write_frame: a 4-byte big-endian length, then the
  // payload, which is returned. A length over `max_size`:
  // errc::message_size, nothing consumed (the stream is then out of step:
  // close it). EOF inside a frame: errc::unexpected_eof; EOF between
  // frames: std::nullopt.
  task<std::optional<std::vector<std::byte>>> read_frame(std::size_t max_size,
                                                         std::error_code& error) {
    detail::read_scan scan;
    auto step = [this, max_size](bool eof, detail::read_scan& at, std::error_code& failure) {
      return buffer_.find_frame(max_size, eof, at, failure);
    };
    const bool done = co_await run(step, scan, error);
    if (!done || !scan.found) {
      co_return std::nullopt;
    }
    co_return buffer_.take_bytes(scan);
  }
  task<std::optional<std::vector<std::byte>>> read_frame(std::size_t max_size) {
    return throwing(read_frame(max_size, last_error_), "canopy::io::buffered_reader::read_frame");
  }

  // The steps the fiber forms (io/fiber/buffered_fiber.hpp) run; not for users.
  detail::read_buffer& buffer_for_fiber_forms() noexcept { return buffer_; }

 private:
  // Steps `step` until it is done (true) or failed (false, `error` set),
  // reading into the buffer between steps. Nothing is consumed here.
  // Callers name its result before testing it, and name the step before
  // the co_await: with GCC 12, `if (!co_await run(...)) co_return
  // std::nullopt;` followed by `co_return <a temporary>;` left the awaiting
  // task waiting forever (the same pair with the result in a named bool
  // works), and a lambda temporary inside a co_await expression is the
  // pitfall docs/toolkit.md describes.
  template <class Step>
  task<bool> run(Step step, detail::read_scan& scan, std::error_code& error) {
    error.clear();
    bool eof = false;
    for (;;) {
      switch (step(eof, scan, error)) {
        case detail::read_step::done:
          co_return true;
        case detail::read_step::failed:
          co_return false;
        case detail::read_step::more:
          break;
      }
      const std::size_t got =
          co_await stream_.read_some(buffer_.prepare(scan.room_min, scan.room_max), error);
      if (error) {
        co_return false;
      }
      buffer_.commit(got);
      eof = got == 0;
    }
  }

  template <class Step>
  task<std::optional<std::string>> take_string(Step step, detail::read_scan& scan,
                                               std::error_code& error) {
    const bool done = co_await run(std::move(step), scan, error);
    if (!done || !scan.found) {
      co_return std::nullopt;
    }
    co_return buffer_.take_string(scan);
  }

  // The throwing form of an error_code form that reports into last_error_
  // (one read at a time, so one slot serves them all).
  template <class T>
  task<T> throwing(task<T> work, const char* what) {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(work);
      detail::throw_if_failed(std::exchange(last_error_, {}), what);
    } else {
      T value = co_await std::move(work);
      detail::throw_if_failed(std::exchange(last_error_, {}), what);
      co_return value;
    }
  }

  Stream stream_;
  detail::read_buffer buffer_;
  std::error_code last_error_;
};

}  // namespace canopy::io
