#include "fiber_io.hpp"

#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>

#include "gather.hpp"
#include "readiness.hpp"
#include "socket_ops.hpp"
#include "stream_op.hpp"

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
    auto op = detail::connect_op(stream.reg(), stream.native_handle(), peer);
    error = canopy::this_fiber::wait_on(op).error;
    if (error) {
      return {};
    }
    detail::set_no_delay_on(stream.native_handle());
  }
  return stream;
}

tcp_stream accept(tcp_listener& listener, std::error_code& error) {
  auto op = detail::accept_op(listener.reg(), listener.native_handle());
  const io_result accepted = canopy::this_fiber::wait_on(op);
  return detail::adopt_accepted(listener.reg(), accepted, error);
}

std::size_t read_some(tcp_stream& stream, std::span<std::byte> buffer, std::error_code& error) {
  auto op = detail::receive_op(stream.reg(), stream.native_handle(), buffer);
  const io_result done = canopy::this_fiber::wait_on(op);
  error = done.error;
  return done.count;
}

void write_all(tcp_stream& stream, std::span<const std::byte> data, std::error_code& error) {
  std::size_t sent = 0;
  auto op = detail::send_all_op(stream.reg(), stream.native_handle(), data, sent);
  error = canopy::this_fiber::wait_on(op).error;
}

void write_all(tcp_stream& stream, std::span<const std::span<const std::byte>> buffers,
               std::error_code& error) {
  detail::gather_cursor cursor(buffers);
  auto op = detail::send_gathered_op(stream.reg(), stream.native_handle(), cursor);
  error = canopy::this_fiber::wait_on(op).error;
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

void write_all(tcp_stream& stream, std::span<const std::span<const std::byte>> buffers) {
  std::error_code error;
  write_all(stream, buffers, error);
  throw_if(error, "canopy::io::this_fiber::write_all");
}

}  // namespace this_fiber

// ---- UDP

namespace this_fiber {

std::size_t send_to(udp_socket& socket, std::span<const std::byte> data, const endpoint& peer,
                    std::error_code& error) {
  const int fd = socket.native_handle();
  const io_result sent = fiber_io(socket.reg(), direction::write, [fd, data, &peer]() noexcept {
    return detail::udp_send_to(fd, data, &peer);
  });
  error = sent.error;
  return sent.count;
}

datagram receive_from(udp_socket& socket, std::span<std::byte> buffer, std::error_code& error) {
  const int fd = socket.native_handle();
  detail::receive_state state;
  const io_result got = fiber_io(socket.reg(), direction::read, [fd, buffer, &state]() noexcept {
    return detail::udp_receive(fd, buffer, state);
  });
  return detail::finish_receive(got, buffer, state, error);
}

std::size_t send(udp_socket& socket, std::span<const std::byte> data, std::error_code& error) {
  const int fd = socket.native_handle();
  const io_result sent = fiber_io(socket.reg(), direction::write, [fd, data]() noexcept {
    return detail::udp_send_to(fd, data, nullptr);
  });
  error = sent.error;
  return sent.count;
}

std::size_t receive(udp_socket& socket, std::span<std::byte> buffer, std::error_code& error) {
  return receive_from(socket, buffer, error).size;
}

std::size_t send_to(udp_socket& socket, std::span<const std::byte> data, const endpoint& peer) {
  std::error_code error;
  const std::size_t sent = send_to(socket, data, peer, error);
  if (error) {
    throw std::system_error(error, "canopy::io::this_fiber::send_to " + peer.to_string());
  }
  return sent;
}

datagram receive_from(udp_socket& socket, std::span<std::byte> buffer) {
  std::error_code error;
  datagram got = receive_from(socket, buffer, error);
  throw_if(error, "canopy::io::this_fiber::receive_from");
  return got;
}

std::size_t send(udp_socket& socket, std::span<const std::byte> data) {
  std::error_code error;
  const std::size_t sent = send(socket, data, error);
  throw_if(error, "canopy::io::this_fiber::send");
  return sent;
}

std::size_t receive(udp_socket& socket, std::span<std::byte> buffer) {
  std::error_code error;
  const std::size_t got = receive(socket, buffer, error);
  throw_if(error, "canopy::io::this_fiber::receive");
  return got;
}

}  // namespace this_fiber

// ---- Unix-domain streams

namespace this_fiber {

unix_stream connect(reactor& owner, const unix_endpoint& peer, std::error_code& error) {
  return detail::unix_connect(owner, peer, error);  // never waits
}

unix_stream accept(unix_listener& listener, std::error_code& error) {
  const io_result accepted =
      fiber_io(listener.reg(), direction::read, detail::accept_attempt(listener.native_handle()));
  return detail::adopt_accepted_unix(listener.reg(), accepted, error);
}

std::size_t read_some(unix_stream& stream, std::span<std::byte> buffer, std::error_code& error) {
  const io_result done =
      fiber_io(stream.reg(), direction::read, detail::recv_attempt(stream.native_handle(), buffer),
               buffer.size());
  error = done.error;
  return done.count;
}

void write_all(unix_stream& stream, std::span<const std::byte> data, std::error_code& error) {
  std::size_t sent = 0;
  error = fiber_io(stream.reg(), direction::write,
                   detail::send_all_attempt(stream.native_handle(), data, sent))
              .error;
}

void write_all(unix_stream& stream, std::span<const std::span<const std::byte>> buffers,
               std::error_code& error) {
  detail::gather_cursor cursor(buffers);
  error = fiber_io(stream.reg(), direction::write,
                   detail::send_gathered_attempt(stream.native_handle(), cursor))
              .error;
}

unix_stream connect(reactor& owner, const unix_endpoint& peer) {
  std::error_code error;
  unix_stream stream = connect(owner, peer, error);
  if (error) {
    throw std::system_error(error, "canopy::io::this_fiber::connect to " + peer.to_string());
  }
  return stream;
}

unix_stream accept(unix_listener& listener) {
  std::error_code error;
  unix_stream stream = accept(listener, error);
  throw_if(error, "canopy::io::this_fiber::accept");
  return stream;
}

std::size_t read_some(unix_stream& stream, std::span<std::byte> buffer) {
  std::error_code error;
  const std::size_t got = read_some(stream, buffer, error);
  throw_if(error, "canopy::io::this_fiber::read_some");
  return got;
}

void write_all(unix_stream& stream, std::span<const std::byte> data) {
  std::error_code error;
  write_all(stream, data, error);
  throw_if(error, "canopy::io::this_fiber::write_all");
}

void write_all(unix_stream& stream, std::span<const std::span<const std::byte>> buffers) {
  std::error_code error;
  write_all(stream, buffers, error);
  throw_if(error, "canopy::io::this_fiber::write_all");
}

}  // namespace this_fiber

// ---- signals

namespace this_fiber {

int wait(signal_set& set, std::error_code& error) {
  const int fd = set.native_handle();
  const auto attempt = [fd]() noexcept { return detail::read_signal(fd); };
  if (!set.reg().valid() && set.is_open()) {
    // A set made without a reactor: registered for this wait only.
    const registration here(reactor::current(), fd, interest::readable, error);
    if (error) {
      return 0;
    }
    const io_result got = fiber_io(here, direction::read, attempt);
    error = got.error;
    return error ? 0 : static_cast<int>(got.count);
  }
  const io_result got = fiber_io(set.reg(), direction::read, attempt);
  error = got.error;
  return error ? 0 : static_cast<int>(got.count);
}

int wait(signal_set& set) {
  std::error_code error;
  const int number = wait(set, error);
  throw_if(error, "canopy::io::this_fiber::wait(signal_set)");
  return number;
}

}  // namespace this_fiber

}  // namespace canopy::io
