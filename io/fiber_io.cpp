#include "fiber_io.hpp"

#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>

#include "readiness.hpp"
#include "socket_ops.hpp"

namespace canopy::io {

using detail::io_result;
using detail::readiness_op;
using detail::throw_if;

namespace {

interest interest_of(direction which) noexcept {
  return which == direction::read ? interest::readable : interest::writable;
}

// The fiber form of the readiness helper (io/readiness.hpp).
template <class Attempt>
io_result fiber_io(const registration& reg, direction which, Attempt attempt,
                   std::size_t short_read_below = 0) {
  readiness_op op(reg, which, std::move(attempt), short_read_below);
  return canopy::this_fiber::wait_on(op);
}

}  // namespace

namespace this_fiber {

namespace {
std::error_code one_shot(int fd, direction which) {
  std::error_code error;
  registration reg(reactor::current(), fd, interest_of(which), error, false);
  if (error) {
    return error;
  }
  readiness_wait wait{reg, which};
  return canopy::this_fiber::wait_on(wait);
}
}  // namespace
std::error_code readable(int fd) { return one_shot(fd, direction::read); }
std::error_code writable(int fd) { return one_shot(fd, direction::write); }

tcp_stream connect(reactor& owner, const endpoint& peer, std::error_code& error) {
  bool pending = false;
  tcp_stream stream = detail::start_tcp_connect(owner, peer, pending, error);
  if (pending) {
    error =
        fiber_io(stream.reg(), direction::write, detail::connect_attempt(stream.native_handle()))
            .error;
    if (error) {
      return {};
    }
    detail::set_no_delay_on(stream.native_handle());
  }
  return stream;
}

tcp_stream accept(tcp_listener& listener, std::error_code& error) {
  const io_result accepted =
      fiber_io(listener.reg(), direction::read, detail::accept_attempt(listener.native_handle()));
  return detail::adopt_accepted(listener.reg(), accepted, error);
}

std::size_t read_some(tcp_stream& stream, std::span<std::byte> buffer, std::error_code& error) {
  const io_result done =
      fiber_io(stream.reg(), direction::read,
               detail::recv_attempt(stream.native_handle(), buffer), buffer.size());
  error = done.error;
  return done.count;
}

void write_all(tcp_stream& stream, std::span<const std::byte> data, std::error_code& error) {
  std::size_t sent = 0;
  error = fiber_io(stream.reg(), direction::write,
                   detail::send_all_attempt(stream.native_handle(), data, sent))
              .error;
}

tcp_stream connect(reactor& owner, const endpoint& peer) {
  std::error_code error;
  tcp_stream stream = connect(owner, peer, error);
  if (error) {
    throw std::system_error(error, "canopy::io::this_fiber::connect to " + peer.to_string());
  }
  return stream;
}

tcp_stream accept(tcp_listener& listener) {
  std::error_code error;
  tcp_stream stream = accept(listener, error);
  throw_if(error, "canopy::io::this_fiber::accept");
  return stream;
}

std::size_t read_some(tcp_stream& stream, std::span<std::byte> buffer) {
  std::error_code error;
  const std::size_t got = read_some(stream, buffer, error);
  throw_if(error, "canopy::io::this_fiber::read_some");
  return got;
}

void write_all(tcp_stream& stream, std::span<const std::byte> data) {
  std::error_code error;
  write_all(stream, data, error);
  throw_if(error, "canopy::io::this_fiber::write_all");
}

}  // namespace this_fiber

}  // namespace canopy::io
