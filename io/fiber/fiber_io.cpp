#include "fiber_io.hpp"

#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>

#include "../coop_budget.hpp"
#include "../gather.hpp"
#include "../readiness.hpp"
#include "../socket_ops.hpp"
#include "../stream_op.hpp"

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

// The fiber form of the cooperative budget's check (io/coop_budget.hpp):
// a fiber whose budget is spent yields before its next socket operation.
void fiber_coop_point() {
  if (!detail::coop_take()) {
    canopy::this_fiber::yield();
  }
}

// The stream forms, once for both protocols (detail::basic_stream's
// operations, protocol_ops: io/stream_op.hpp).
template <class Protocol>
typename Protocol::stream connect_stream(reactor& owner,
                                         const typename Protocol::endpoint_type& peer,
                                         std::error_code& error) {
  bool pending = false;
  typename Protocol::stream stream = Protocol::open_connect(owner, peer, pending, error);
  if (pending) {
    auto op = detail::protocol_ops<Protocol>::connect(stream.reg(), stream.native_handle(), peer);
    error = canopy::this_fiber::wait_on(op).error;
    if (error) {
      return {};
    }
    Protocol::connected(stream.native_handle());
  }
  return stream;
}

template <class Protocol, class Listener>
io_result accept_on(Listener& listener) {
  fiber_coop_point();
  auto op = detail::protocol_ops<Protocol>::accept(listener.reg(), listener.native_handle());
  return canopy::this_fiber::wait_on(op);
}

template <class Protocol>
std::size_t read_stream(detail::basic_stream<Protocol>& stream, std::span<std::byte> buffer,
                        std::error_code& error) {
  if (buffer.empty()) {
    return detail::empty_read(stream.reg(), error);
  }
  fiber_coop_point();
  auto op = detail::protocol_ops<Protocol>::receive(stream.reg(), stream.native_handle(), buffer);
  const io_result done = canopy::this_fiber::wait_on(op);
  error = done.error;
  return done.count;
}

template <class Protocol>
void write_stream(detail::basic_stream<Protocol>& stream, std::span<const std::byte> data,
                  std::error_code& error) {
  if (data.empty()) {
    detail::empty_write(stream.reg(), error);
    return;
  }
  fiber_coop_point();
  std::size_t sent = 0;
  auto op =
      detail::protocol_ops<Protocol>::send_all(stream.reg(), stream.native_handle(), data, sent);
  error = canopy::this_fiber::wait_on(op).error;
}

template <class Protocol>
void write_stream(detail::basic_stream<Protocol>& stream,
                  std::span<const std::span<const std::byte>> buffers, std::error_code& error) {
  detail::gather_cursor cursor(buffers);
  if (cursor.done()) {
    detail::empty_write(stream.reg(), error);
    return;
  }
  fiber_coop_point();
  auto op =
      detail::protocol_ops<Protocol>::send_gathered(stream.reg(), stream.native_handle(), cursor);
  error = canopy::this_fiber::wait_on(op).error;
}

// The throwing forms, over the error_code forms (io/fiber/fiber_io.hpp).
template <class Protocol>
typename Protocol::stream or_throw_connect(reactor& owner,
                                           const typename Protocol::endpoint_type& peer) {
  std::error_code error;
  typename Protocol::stream stream = this_fiber::connect(owner, peer, error);
  if (error) {
    throw std::system_error(error, "canopy::io::this_fiber::connect to " + peer.to_string());
  }
  return stream;
}

template <class Listener>
auto or_throw_accept(Listener& listener) {
  std::error_code error;
  auto stream = this_fiber::accept(listener, error);
  throw_if(error, "canopy::io::this_fiber::accept");
  return stream;
}

template <class Stream>
std::size_t or_throw_read(Stream& stream, std::span<std::byte> buffer) {
  std::error_code error;
  const std::size_t got = this_fiber::read_some(stream, buffer, error);
  throw_if(error, "canopy::io::this_fiber::read_some");
  return got;
}

template <class Stream, class Data>
void or_throw_write(Stream& stream, Data data) {
  std::error_code error;
  this_fiber::write_all(stream, data, error);
  throw_if(error, "canopy::io::this_fiber::write_all");
}

}  // namespace

}  // namespace canopy::io

namespace canopy::this_fiber {

// The I/O types and the helpers above by their short names (this file only).
using namespace canopy::io;

namespace {
std::error_code one_shot(int fd, direction which) {
  std::error_code error;
  registration reg(reactor::current(), fd, interest_of(which), error, false);
  if (error) {
    return error;
  }
  readiness_wait wait{reg, which};
  return wait_on(wait);
}
}  // namespace
std::error_code readable(int fd) { return one_shot(fd, direction::read); }
std::error_code writable(int fd) { return one_shot(fd, direction::write); }

tcp_stream connect(reactor& owner, const endpoint& peer, std::error_code& error) {
  return connect_stream<io::detail::tcp_protocol>(owner, peer, error);
}
tcp_stream accept(tcp_listener& listener, std::error_code& error) {
  return io::detail::adopt_accepted(listener.reg(), accept_on<io::detail::tcp_protocol>(listener),
                                    error);
}
std::size_t read_some(tcp_stream& stream, std::span<std::byte> buffer, std::error_code& error) {
  return read_stream(stream, buffer, error);
}
void write_all(tcp_stream& stream, std::span<const std::byte> data, std::error_code& error) {
  write_stream(stream, data, error);
}
void write_all(tcp_stream& stream, std::span<const std::span<const std::byte>> buffers,
               std::error_code& error) {
  write_stream(stream, buffers, error);
}
tcp_stream connect(reactor& owner, const endpoint& peer) {
  return or_throw_connect<io::detail::tcp_protocol>(owner, peer);
}
tcp_stream accept(tcp_listener& listener) { return or_throw_accept(listener); }
std::size_t read_some(tcp_stream& stream, std::span<std::byte> buffer) {
  return or_throw_read(stream, buffer);
}
void write_all(tcp_stream& stream, std::span<const std::byte> data) {
  or_throw_write(stream, data);
}
void write_all(tcp_stream& stream, std::span<const std::span<const std::byte>> buffers) {
  or_throw_write(stream, buffers);
}

// ---- UDP

std::size_t send_to(udp_socket& socket, std::span<const std::byte> data, const endpoint& peer,
                    std::error_code& error) {
  const int fd = socket.native_handle();
  const io_result sent = fiber_io(socket.reg(), direction::write, [fd, data, &peer]() noexcept {
    return io::detail::udp_send_to(fd, data, &peer);
  });
  error = sent.error;
  return sent.count;
}

datagram receive_from(udp_socket& socket, std::span<std::byte> buffer, std::error_code& error) {
  const int fd = socket.native_handle();
  io::detail::receive_state state;
  const io_result got = fiber_io(socket.reg(), direction::read, [fd, buffer, &state]() noexcept {
    return io::detail::udp_receive(fd, buffer, state);
  });
  return io::detail::finish_receive(got, buffer, state, error);
}

std::size_t send(udp_socket& socket, std::span<const std::byte> data, std::error_code& error) {
  const int fd = socket.native_handle();
  const io_result sent = fiber_io(socket.reg(), direction::write, [fd, data]() noexcept {
    return io::detail::udp_send_to(fd, data, nullptr);
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

// ---- Unix-domain streams

unix_stream connect(reactor& owner, const unix_endpoint& peer, std::error_code& error) {
  return connect_stream<io::detail::unix_protocol>(owner, peer, error);  // never waits
}
unix_stream accept(unix_listener& listener, std::error_code& error) {
  return io::detail::adopt_accepted_unix(listener.reg(),
                                         accept_on<io::detail::unix_protocol>(listener), error);
}
std::size_t read_some(unix_stream& stream, std::span<std::byte> buffer, std::error_code& error) {
  return read_stream(stream, buffer, error);
}
void write_all(unix_stream& stream, std::span<const std::byte> data, std::error_code& error) {
  write_stream(stream, data, error);
}
void write_all(unix_stream& stream, std::span<const std::span<const std::byte>> buffers,
               std::error_code& error) {
  write_stream(stream, buffers, error);
}
unix_stream connect(reactor& owner, const unix_endpoint& peer) {
  return or_throw_connect<io::detail::unix_protocol>(owner, peer);
}
unix_stream accept(unix_listener& listener) { return or_throw_accept(listener); }
std::size_t read_some(unix_stream& stream, std::span<std::byte> buffer) {
  return or_throw_read(stream, buffer);
}
void write_all(unix_stream& stream, std::span<const std::byte> data) {
  or_throw_write(stream, data);
}
void write_all(unix_stream& stream, std::span<const std::span<const std::byte>> buffers) {
  or_throw_write(stream, buffers);
}

// ---- signals

int wait(signal_set& set, std::error_code& error) {
  if (!set.reg().valid() && set.is_open()) {
    // A set made without a reactor: registered for this wait only (and
    // removed by a close() meanwhile), as the task form's.
    const io::detail::unbound_signal_wait here(set, reactor::current(), error);
    if (error) {
      return 0;
    }
    const int fd = here.fd();
    const io_result got = fiber_io(here.reg(), direction::read,
                                   [fd]() noexcept { return io::detail::read_signal(fd); });
    error = got.error;
    return error ? 0 : static_cast<int>(got.count);
  }
  if (!set.is_open()) {  // closed before this wait: the same end as a close during it
    error = std::make_error_code(std::errc::operation_canceled);
    return 0;
  }
  const int fd = set.native_handle();
  const auto attempt = [fd]() noexcept { return io::detail::read_signal(fd); };
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

}  // namespace canopy::this_fiber
