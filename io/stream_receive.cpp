// The stream sockets' receive as a wait source (stream_receive.hpp): the
// operation each stream's read_some runs, a TCP stream's on whichever
// backend its reactor has, a Unix stream's on readiness, made in place.
#include "stream_receive.hpp"

#include <memory>
#include <new>

#include "readiness.hpp"
#include "socket_ops.hpp"
#include "stream_op.hpp"

namespace canopy::io::detail {

namespace {

using tcp_receive = decltype(receive_op(std::declval<const registration&>(), 0,
                                        std::declval<std::span<std::byte>>()));
using unix_receive = readiness_op<decltype(recv_attempt(0, std::declval<std::span<std::byte>>()))>;

static_assert(sizeof(tcp_receive) <= stream_receive::storage_size &&
                  alignof(tcp_receive) <= alignof(std::max_align_t),
              "stream_receive::storage_size is too small for the TCP receive");
static_assert(sizeof(unix_receive) <= stream_receive::storage_size &&
                  alignof(unix_receive) <= alignof(std::max_align_t),
              "stream_receive::storage_size is too small for the Unix receive");

// Calls `visit` with the built operation, as its own type: a TCP receive's
// (a request on io_uring), or the readiness form (a Unix receive, a TCP
// receive on readiness).
template <class Visit>
decltype(auto) with_op(stream_receive::kind which, std::byte* storage, Visit&& visit) {
  if (which == stream_receive::kind::tcp) {
    return visit(*std::launder(reinterpret_cast<tcp_receive*>(storage)));
  }
  return visit(*std::launder(reinterpret_cast<unix_receive*>(storage)));
}

}  // namespace

void stream_receive::build() noexcept {
  if (kind_ == kind::tcp) {
    ::new (static_cast<void*>(storage_)) tcp_receive(receive_op(*reg_, fd_, buffer_));
  } else {
    ::new (static_cast<void*>(storage_))
        unix_receive(*reg_, direction::read, recv_attempt(fd_, buffer_), buffer_.size());
  }
  built_ = true;
}

void stream_receive::destroy() noexcept {
  with_op(kind_, storage_, [](auto& op) noexcept { std::destroy_at(&op); });
}

bool stream_receive::ready() noexcept {
  if (direct_) {
    return true;
  }
  if (!built_) {
    build();
  }
  return with_op(kind_, storage_, [](auto& op) noexcept { return op.ready(); });
}

bool stream_receive::arm(const waker& waiter) noexcept {
  if (direct_) {
    return false;
  }
  if (!built_) {
    build();
  }
  return with_op(kind_, storage_, [&waiter](auto& op) noexcept { return op.arm(waiter); });
}

void stream_receive::disarm() noexcept {
  if (built_) {
    with_op(kind_, storage_, [](auto& op) noexcept { op.disarm(); });
  }
}

stream_receive stream_receive::unusual(const registration& reg, int fd,
                                       std::span<std::byte> buffer, kind which,
                                       bool on_readiness) noexcept {
  stream_receive made(reg, fd, buffer, on_readiness ? kind::tcp_on_readiness : which);
  if (buffer.empty()) {
    made.direct_count_ = empty_read(reg, made.direct_error_);
    made.direct_ = true;
  } else if (on_readiness) {
    made.direct_count_ = reg.owner()->take_kept(reg.id(), buffer);
    made.direct_ = made.direct_count_ > 0;
  }
  return made;
}

bool stream_receive::try_now() noexcept {
  if (buffer_.empty()) {
    return false;  // a receive of nothing would end at once, as if at EOF
  }
  io_result got;
  std::size_t kept = 0;
  if (kind_ != kind::unix_domain && reg_->completions()) {
    kept = reg_->owner()->take_kept(reg_->id(), buffer_);
  }
  if (kept > 0) {
    got.count = kept;
  } else {
    got = try_io(*reg_, direction::read, recv_attempt(fd_, buffer_), buffer_.size());
    if (got.error == std::errc::resource_unavailable_try_again) {
      return false;
    }
  }
  direct_ = true;
  direct_count_ = got.count;
  direct_error_ = got.error;
  return true;
}

std::size_t stream_receive::result(std::error_code& error) noexcept {
  if (direct_) {
    error = direct_error_;
    return direct_count_;
  }
  const io_result got = with_op(kind_, storage_, [](auto& op) noexcept { return op.result(); });
  error = got.error;
  return got.count;
}

}  // namespace canopy::io::detail
