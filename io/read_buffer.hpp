// read_buffer — the byte buffer of a buffered reader (io/buffered_reader.hpp)
// and the steps of its reads, without the I/O: each step looks at what is
// buffered (and whether the stream ended) and says whether the read is
// done, failed, or needs more bytes (then the caller reads into prepare()'s
// room, commit()s, and steps again). The coroutine forms and the fiber
// forms run the same steps, so they behave alike; the steps consume
// nothing until a read is done (but skip_through, which discards as it
// goes), which is what makes a read that loses a race lose no bytes.
// Not thread-safe: one read at a time, as the reader's contract says.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace canopy::io::detail {

enum class read_step : std::uint8_t {
  done,    // the record is in the scan (or, found == false, the stream ended)
  more,    // read into prepare(scan.room_min, scan.room_max), then step again
  failed,  // the error says why; nothing was consumed
};

// One read's progress and result.
struct read_scan {
  std::size_t scanned = 0;   // bytes already searched for the delimiter
  std::size_t offset = 0;    // done: where the record starts in data()
  std::size_t length = 0;    // done: the record's length
  std::size_t consumed = 0;  // done: the bytes the read takes, the record's and its framing
  bool found = false;        // done: false when the stream ended with nothing left
  std::size_t room_min = 0;  // more: the bytes the buffer must be able to hold
  std::size_t room_max = 0;  // more: at most this much growth is useful
};

class read_buffer {
 public:
  explicit read_buffer(std::size_t capacity);
  // A moved-from buffer is empty (not holding positions into storage it
  // no longer has), so a moved-from reader reads on as a new one would.
  read_buffer(read_buffer&& other) noexcept
      : storage_(std::move(other.storage_)),
        begin_(std::exchange(other.begin_, 0)),
        end_(std::exchange(other.end_, 0)),
        initial_(other.initial_) {
    other.storage_.clear();
  }
  read_buffer& operator=(read_buffer&& other) noexcept {
    if (this != &other) {
      storage_ = std::move(other.storage_);
      other.storage_.clear();
      begin_ = std::exchange(other.begin_, 0);
      end_ = std::exchange(other.end_, 0);
      initial_ = other.initial_;
    }
    return *this;
  }
  read_buffer(const read_buffer&) = default;
  read_buffer& operator=(const read_buffer&) = default;
  ~read_buffer() = default;

  [[nodiscard]] std::span<const std::byte> data() const noexcept {
    return std::span<const std::byte>(storage_).subspan(begin_, end_ - begin_);
  }
  [[nodiscard]] std::size_t size() const noexcept { return end_ - begin_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return initial_; }
  // Drop the first `count` buffered bytes (count <= size()).
  void consume(std::size_t count) noexcept;
  // Copy up to into.size() buffered bytes into `into` and consume them.
  std::size_t take(std::span<std::byte> into) noexcept;

  // A done read's record (scan.offset, scan.length) as a string or bytes;
  // consumes scan.consumed.
  std::string take_string(const read_scan& scan);
  std::vector<std::byte> take_bytes(const read_scan& scan);

  // Room after the buffered bytes, such that size() + room >= min_total
  // (compacting, else growing: geometrically, to no more than
  // max(max_total, min_total)). Shrinks back to the initial capacity when
  // empty after a large record. Throws std::bad_alloc.
  std::span<std::byte> prepare(std::size_t min_total, std::size_t max_total);
  // `count` bytes were read into prepare()'s room.
  void commit(std::size_t count) noexcept { end_ += count; }

  // The steps. `eof`: the last read returned 0. A step never says `more`
  // at EOF.
  // Through the first `delimiter` within `limit` bytes; at EOF the rest.
  // Past `limit` without one: errc::message_size.
  read_step find_record(char delimiter, std::size_t limit, bool eof, read_scan& scan,
                        std::error_code& error) const noexcept;
  // A line of at most `max_length` bytes without its "\n" or "\r\n"
  // (length excludes them, consumed includes them); at EOF the rest.
  read_step find_line(std::size_t max_length, bool eof, read_scan& scan,
                      std::error_code& error) const noexcept;
  // Exactly `count` bytes; errc::unexpected_eof (canopy::io) at EOF first.
  read_step find_exact(std::size_t count, bool eof, read_scan& scan,
                       std::error_code& error) const noexcept;
  // A frame: a 4-byte big-endian length, then that many bytes; a length
  // over `max_size`: errc::message_size; EOF inside one: unexpected_eof.
  read_step find_frame(std::size_t max_size, bool eof, read_scan& scan,
                       std::error_code& error) const noexcept;
  // Discards bytes through the next `delimiter` (found) or to EOF (not
  // found); scan.consumed counts them. Consumes as it goes.
  read_step skip_through(char delimiter, bool eof, read_scan& scan) noexcept;

 private:
  std::vector<std::byte> storage_;
  std::size_t begin_ = 0;  // the first buffered byte
  std::size_t end_ = 0;    // one past the last
  std::size_t initial_;
};

// The 4-byte big-endian length header of a frame.
inline constexpr std::size_t frame_header_size = 4;
using frame_header_bytes = std::array<std::byte, frame_header_size>;
// The header of a frame of `payload_size` bytes, for write_frame's
// gathered write. A payload over `max_size` or 2^32 - 1:
// errc::message_size (and a zero header).
frame_header_bytes frame_header(std::size_t payload_size, std::size_t max_size,
                                std::error_code& error) noexcept;
// A frame for write_frame on a stream without a gathered write: the
// header, then `payload`, in one buffer. Errors as frame_header's (then an
// empty vector).
std::vector<std::byte> make_frame(std::span<const std::byte> payload, std::size_t max_size,
                                  std::error_code& error);

}  // namespace canopy::io::detail
