// gather — the state of a gathered write (write_all of several buffers,
// io/tcp.hpp, io/unix.hpp): where the send stands across the buffers, and
// the msghdr of the next sendmsg. Both backends send from it: the
// readiness attempt below (epoll) and completion_op's send_gathered
// requests (io_uring, IORING_OP_SENDMSG). Internal (canopy::io::detail).
//
// sendmsg rather than writev: only sendmsg takes MSG_NOSIGNAL, so that a
// write to a reset connection reports EPIPE instead of raising SIGPIPE.
#pragma once

#include <limits.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <span>

namespace canopy::io::detail {

class gather_cursor {
 public:
  // iovecs per sendmsg; more buffers take more calls. Small enough for the
  // cursor to live in a coroutine frame, and within IOV_MAX (sendmsg fails
  // with EMSGSIZE past it).
  static constexpr std::size_t batch = 64;
  static_assert(batch <= IOV_MAX);

  // `buffers` (and what they point at) must outlive the cursor.
  explicit gather_cursor(std::span<const std::span<const std::byte>> buffers) noexcept
      : buffers_(buffers) {
    skip_sent();
  }
  gather_cursor(const gather_cursor&) = delete;  // message() points into it
  gather_cursor& operator=(const gather_cursor&) = delete;

  // Every byte of every buffer went (at once for none, or empty ones only).
  [[nodiscard]] bool done() const noexcept { return index_ == buffers_.size(); }

  // The next sendmsg's message: up to `batch` iovecs from where the send
  // stands, empty buffers left out. Unchanged until the next message()
  // (io_uring reads it while the request is in flight).
  msghdr* message() noexcept {
    std::size_t count = 0;
    std::size_t offset = offset_;
    for (std::size_t at = index_; at < buffers_.size() && count < batch; ++at) {
      const std::span<const std::byte> buffer = buffers_[at];
      if (buffer.size() > offset) {
        // sendmsg does not write through iov_base; iovec has no const form.
        iov_[count].iov_base = const_cast<std::byte*>(buffer.data() + offset);
        iov_[count].iov_len = buffer.size() - offset;
        ++count;
      }
      offset = 0;
    }
    message_ = msghdr{};
    message_.msg_iov = iov_.data();
    message_.msg_iovlen = count;
    return &message_;
  }

  // `count` more bytes went (what a sendmsg of message() returned).
  void advance(std::size_t count) noexcept {
    while (count > 0 && index_ < buffers_.size()) {
      const std::size_t left = buffers_[index_].size() - offset_;
      if (count < left) {
        offset_ += count;
        return;
      }
      count -= left;
      ++index_;
      offset_ = 0;
    }
    skip_sent();
  }

  // sendmsg (MSG_NOSIGNAL, plus `flags`) until every byte went: 0, or -1
  // with errno (EAGAIN: what went is counted, the next call goes on).
  ssize_t send_all(int fd, int flags = 0) noexcept {
    while (!done()) {
      const ssize_t count = ::sendmsg(fd, message(), MSG_NOSIGNAL | flags);
      if (count < 0) {
        return -1;
      }
      advance(static_cast<std::size_t>(count));
    }
    return 0;
  }

 private:
  void skip_sent() noexcept {
    while (index_ < buffers_.size() && offset_ == buffers_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
  }

  std::span<const std::span<const std::byte>> buffers_;
  std::size_t index_ = 0;   // the first buffer not sent in full
  std::size_t offset_ = 0;  // bytes of it sent
  std::array<iovec, batch> iov_{};
  msghdr message_{};
};

// The readiness attempt (io/readiness.hpp) of a gathered write: 0 when
// every byte went.
inline auto send_gathered_attempt(int fd, gather_cursor& cursor) noexcept {
  return [fd, &cursor]() noexcept { return cursor.send_all(fd); };
}

}  // namespace canopy::io::detail
