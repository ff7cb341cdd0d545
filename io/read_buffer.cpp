#include "read_buffer.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "timer/timer_error.hpp"

namespace canopy::io::detail {

namespace {

// Grow no further than this many times the initial capacity while empty:
// a reader that took one large record gives the memory back.
constexpr std::size_t shrink_factor = 4;

std::size_t saturating_add(std::size_t left, std::size_t right) noexcept {
  return left > std::numeric_limits<std::size_t>::max() - right
             ? std::numeric_limits<std::size_t>::max()
             : left + right;
}

}  // namespace

read_buffer::read_buffer(std::size_t capacity)
    : storage_(std::max<std::size_t>(capacity, 1)), initial_(std::max<std::size_t>(capacity, 1)) {}

void read_buffer::consume(std::size_t count) noexcept {
  begin_ += std::min(count, size());
  if (begin_ == end_) {
    begin_ = end_ = 0;
  }
}

std::size_t read_buffer::take(std::span<std::byte> into) noexcept {
  const std::size_t count = std::min(into.size(), size());
  if (count != 0) {
    std::memcpy(into.data(), storage_.data() + begin_, count);
  }
  consume(count);
  return count;
}

std::string read_buffer::take_string(const read_scan& scan) {
  const std::span<const std::byte> record = data().subspan(scan.offset, scan.length);
  std::string text(reinterpret_cast<const char*>(record.data()), record.size());
  consume(scan.consumed);
  return text;
}

std::vector<std::byte> read_buffer::take_bytes(const read_scan& scan) {
  const std::span<const std::byte> record = data().subspan(scan.offset, scan.length);
  std::vector<std::byte> bytes(record.begin(), record.end());
  consume(scan.consumed);
  return bytes;
}

std::span<std::byte> read_buffer::prepare(std::size_t min_total, std::size_t max_total) {
  const std::size_t held = size();
  min_total = std::max(min_total, held + 1);
  if (held == 0 && storage_.size() > shrink_factor * initial_ && min_total <= initial_) {
    std::vector<std::byte>(initial_).swap(storage_);
  }
  if (storage_.size() - begin_ < min_total) {
    if (begin_ != 0) {
      std::memmove(storage_.data(), storage_.data() + begin_, held);
      begin_ = 0;
      end_ = held;
    }
    if (storage_.size() < min_total) {
      const std::size_t doubled = storage_.size() > std::numeric_limits<std::size_t>::max() / 2
                                      ? min_total
                                      : 2 * storage_.size();
      storage_.resize(std::max(min_total, std::min(doubled, std::max(max_total, min_total))));
    }
  }
  return std::span<std::byte>(storage_).subspan(end_);
}

read_step read_buffer::find_record(char delimiter, std::size_t limit, bool eof, read_scan& scan,
                                   std::error_code& error) const noexcept {
  const std::span<const std::byte> held = data();
  const std::size_t window = std::min(held.size(), limit);
  if (scan.scanned < window) {
    const void* hit = std::memchr(held.data() + scan.scanned, delimiter, window - scan.scanned);
    if (hit != nullptr) {
      scan.offset = 0;
      scan.length = scan.consumed =
          static_cast<std::size_t>(static_cast<const std::byte*>(hit) - held.data()) + 1;
      scan.found = true;
      return read_step::done;
    }
    scan.scanned = window;
  }
  if (window >= limit) {
    error = std::make_error_code(std::errc::message_size);
    return read_step::failed;
  }
  if (eof) {
    scan.offset = 0;
    scan.length = scan.consumed = held.size();
    scan.found = !held.empty();
    return read_step::done;
  }
  scan.room_min = held.size() + 1;
  scan.room_max = limit;
  return read_step::more;
}

read_step read_buffer::find_line(std::size_t max_length, bool eof, read_scan& scan,
                                 std::error_code& error) const noexcept {
  const read_step step = find_record('\n', saturating_add(max_length, 2), eof, scan, error);
  if (step != read_step::done || !scan.found) {
    return step;
  }
  const std::span<const std::byte> held = data();
  std::size_t length = scan.length;
  if (held[length - 1] == std::byte{'\n'}) {
    --length;
    if (length != 0 && held[length - 1] == std::byte{'\r'}) {
      --length;
    }
  }
  if (length > max_length) {
    error = std::make_error_code(std::errc::message_size);
    return read_step::failed;
  }
  scan.length = length;
  return read_step::done;
}

read_step read_buffer::find_exact(std::size_t count, bool eof, read_scan& scan,
                                  std::error_code& error) const noexcept {
  if (size() >= count) {
    scan.offset = 0;
    scan.length = scan.consumed = count;
    scan.found = true;
    return read_step::done;
  }
  if (eof) {
    error = make_error_code(errc::unexpected_eof);
    return read_step::failed;
  }
  scan.room_min = scan.room_max = count;
  return read_step::more;
}

read_step read_buffer::find_frame(std::size_t max_size, bool eof, read_scan& scan,
                                  std::error_code& error) const noexcept {
  const std::span<const std::byte> held = data();
  if (held.size() < frame_header_size) {
    if (eof) {
      scan.found = false;
      if (held.empty()) {
        return read_step::done;
      }
      error = make_error_code(errc::unexpected_eof);
      return read_step::failed;
    }
    scan.room_min = scan.room_max = frame_header_size;
    return read_step::more;
  }
  std::uint32_t length = 0;
  for (std::size_t index = 0; index < frame_header_size; ++index) {
    length = (length << 8U) | std::to_integer<std::uint32_t>(held[index]);
  }
  if (length > max_size) {
    error = std::make_error_code(std::errc::message_size);
    return read_step::failed;
  }
  const std::size_t total = frame_header_size + length;
  if (held.size() >= total) {
    scan.offset = frame_header_size;
    scan.length = length;
    scan.consumed = total;
    scan.found = true;
    return read_step::done;
  }
  if (eof) {
    error = make_error_code(errc::unexpected_eof);
    return read_step::failed;
  }
  scan.room_min = scan.room_max = total;
  return read_step::more;
}

read_step read_buffer::skip_through(char delimiter, bool eof, read_scan& scan) noexcept {
  const std::span<const std::byte> held = data();
  const void* hit = held.empty() ? nullptr : std::memchr(held.data(), delimiter, held.size());
  if (hit != nullptr) {
    const auto through =
        static_cast<std::size_t>(static_cast<const std::byte*>(hit) - held.data()) + 1;
    scan.consumed += through;
    consume(through);
    scan.found = true;
    return read_step::done;
  }
  scan.consumed += held.size();
  consume(held.size());
  if (eof) {
    scan.found = false;
    return read_step::done;
  }
  scan.room_min = 1;
  scan.room_max = initial_;
  return read_step::more;
}

frame_header_bytes frame_header(std::size_t payload_size, std::size_t max_size,
                                std::error_code& error) noexcept {
  error.clear();
  frame_header_bytes header{};
  if (payload_size > max_size || payload_size > std::numeric_limits<std::uint32_t>::max()) {
    error = std::make_error_code(std::errc::message_size);
    return header;
  }
  auto length = static_cast<std::uint32_t>(payload_size);
  for (std::size_t index = frame_header_size; index-- > 0;) {
    header[index] = static_cast<std::byte>(length & 0xFFU);
    length >>= 8U;
  }
  return header;
}

std::vector<std::byte> make_frame(std::span<const std::byte> payload, std::size_t max_size,
                                  std::error_code& error) {
  const frame_header_bytes header = frame_header(payload.size(), max_size, error);
  if (error) {
    return {};
  }
  std::vector<std::byte> frame(frame_header_size + payload.size());
  std::memcpy(frame.data(), header.data(), frame_header_size);
  if (!payload.empty()) {
    std::memcpy(frame.data() + frame_header_size, payload.data(), payload.size());
  }
  return frame;
}

}  // namespace canopy::io::detail
