// The members of basic_stream (io/basic_stream.hpp), written once and
// instantiated here for the two protocols: TCP (io/tcp.hpp) and
// Unix-domain streams (io/unix.hpp). Each operation is the protocol's
// (protocol_ops, io/stream_op.hpp).
#include "basic_stream.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "coop_budget.hpp"
#include "gather.hpp"
#include "readiness.hpp"
#include "socket_ops.hpp"
#include "stream_bounded.hpp"
#include "stream_op.hpp"
#include "tcp.hpp"
#include "unix.hpp"

namespace canopy::io::detail {

template <class Protocol>
task<typename basic_stream<Protocol>::stream_type> basic_stream<Protocol>::connect(
    reactor& owner, endpoint_type peer, std::error_code& error) {
  bool pending = false;
  stream_type stream = Protocol::open_connect(owner, peer, pending, error);
  if (pending) {
    const io_result done = co_await canopy::wait_on(
        protocol_ops<Protocol>::connect(stream.reg(), stream.native_handle(), peer));
    error = done.error;
    if (error) {
      co_return stream_type{};  // `stream` closes the socket
    }
    Protocol::connected(stream.native_handle());
  }
  co_return stream;
}

template <class Protocol>
task<typename basic_stream<Protocol>::stream_type> basic_stream<Protocol>::connect(
    reactor& owner, endpoint_type peer) {
  std::error_code error;
  stream_type stream = co_await connect(owner, peer, error);
  if (error) {
    throw std::system_error(error, Protocol::connect_what + peer.to_string());
  }
  co_return stream;
}

template <class Protocol>
task<typename basic_stream<Protocol>::stream_type> basic_stream<Protocol>::connect(
    endpoint_type peer, std::error_code& error) {
  return connect(reactor::current(), peer, error);
}

template <class Protocol>
task<typename basic_stream<Protocol>::stream_type> basic_stream<Protocol>::connect(
    endpoint_type peer) {
  return connect(reactor::current(), peer);
}

template <class Protocol>
task<std::size_t> basic_stream<Protocol>::read_some(std::span<std::byte> buffer,
                                                    std::error_code& error) {
  if (buffer.empty()) {
    co_return empty_read(socket_.reg(), error);
  }
  co_await coop_point();
  const io_result done = co_await canopy::wait_on(
      protocol_ops<Protocol>::receive(socket_.reg(), socket_.fd(), buffer));
  error = done.error;
  co_return done.count;
}

template <class Protocol>
task<std::size_t> basic_stream<Protocol>::read_some(std::span<std::byte> buffer) {
  std::error_code error;
  const std::size_t got = co_await read_some(buffer, error);
  throw_if(error, Protocol::read_what);
  co_return got;
}

template <class Protocol>
task<void> basic_stream<Protocol>::write_all(std::span<const std::byte> data,
                                             std::error_code& error) {
  if (data.empty()) {
    empty_write(socket_.reg(), error);
    co_return;
  }
  co_await coop_point();
  std::size_t sent = 0;
  const io_result done = co_await canopy::wait_on(
      protocol_ops<Protocol>::send_all(socket_.reg(), socket_.fd(), data, sent));
  error = done.error;
}

template <class Protocol>
task<void> basic_stream<Protocol>::write_all(std::span<const std::byte> data) {
  std::error_code error;
  co_await write_all(data, error);
  throw_if(error, Protocol::write_what);
}

template <class Protocol>
task<void> basic_stream<Protocol>::write_all(std::span<const std::span<const std::byte>> buffers,
                                             std::error_code& error) {
  gather_cursor cursor(buffers);
  if (cursor.done()) {
    empty_write(socket_.reg(), error);
    co_return;
  }
  co_await coop_point();
  const io_result done = co_await canopy::wait_on(
      protocol_ops<Protocol>::send_gathered(socket_.reg(), socket_.fd(), cursor));
  error = done.error;
}

template <class Protocol>
task<void> basic_stream<Protocol>::write_all(std::span<const std::span<const std::byte>> buffers) {
  std::error_code error;
  co_await write_all(buffers, error);
  throw_if(error, Protocol::write_what);
}

// The receive is made inside the awaitable, in the calling task's frame
// (stream_receive, io/stream_receive.cpp). A receive request whose
// deadline is nearer than this likely ends given up, and giving a request
// up waits for the worker that submitted it to enter the kernel, up to a
// scheduler tick (1-4 ms): such a receive waits on readiness instead.
namespace {
constexpr std::chrono::milliseconds near_deadline{5};

// A write of nothing as a task, judged when it is awaited (as the other
// writes are), not when it is made.
task<void> empty_write_task(const registration& reg, std::error_code& error) {
  empty_write(reg, error);
  co_return;
}
}  // namespace

template <class Protocol>
bounded_read basic_stream<Protocol>::read_some_until(std::span<std::byte> buffer,
                                                     std::chrono::steady_clock::time_point deadline,
                                                     std::error_code& error) {
  const registration& reg = socket_.reg();
  bool on_readiness = false;
  if constexpr (Protocol::completion_requests) {
    // Compared as time points: a deadline far in the past (time_point::min())
    // would overflow a difference.
    on_readiness =
        reg.completions() && deadline < std::chrono::steady_clock::now() + near_deadline;
  }
  if (buffer.empty() || on_readiness) [[unlikely]] {
    return canopy::wait_on(bounded_receive(
        stream_receive::unusual(reg, socket_.fd(), buffer, Protocol::receive_kind, on_readiness),
        deadline, error));
  }
  return canopy::wait_on(bounded_receive(
      stream_receive(reg, socket_.fd(), buffer, Protocol::receive_kind), deadline, error));
}

// The write's rounds are made inside the helper's frame (an armed
// operation must not move), when the task starts, as write_all's are. At
// the stall limit the helper asks the socket directly (try_write_some's
// send), on either backend: no request of the write is in flight then.
template <class Protocol>
task<void> basic_stream<Protocol>::write_all_within(std::span<const std::byte> data,
                                                    std::chrono::milliseconds stall_limit,
                                                    std::error_code& error) {
  if (data.empty()) {
    // Not send_all_within's empty loop, which would report success on a
    // stream that is not open, where write_all reports its error.
    return empty_write_task(socket_.reg(), error);
  }
  return send_all_within(
      [this](std::span<const std::byte> rest) noexcept {
        return protocol_ops<Protocol>::send_some(socket_.reg(), socket_.fd(), rest);
      },
      [this](std::span<const std::byte> rest) noexcept {
        return try_io(socket_.reg(), direction::write, send_some_attempt(socket_.fd(), rest));
      },
      data, stall_limit, error);
}

template <class Protocol>
std::size_t basic_stream<Protocol>::try_read_some(std::span<std::byte> buffer,
                                                  std::error_code& error) noexcept {
  const registration& reg = socket_.reg();
  if (buffer.empty()) {
    // As read_some's: nothing to take is not "try again" (a recv of
    // nothing on an idle TCP socket says EAGAIN).
    return empty_read(reg, error);
  }
  if constexpr (Protocol::completion_requests) {
    // Bytes a receive that lost a race kept come before the socket's: only
    // a registration whose receives are completion requests keeps any.
    if (reg.completions()) {
      if (const std::size_t kept = reg.owner()->take_kept(reg.id(), buffer); kept > 0) {
        error.clear();
        return kept;
      }
    }
  }
  const io_result done =
      try_io(reg, direction::read, recv_attempt(socket_.fd(), buffer), buffer.size());
  error = done.error;
  return done.count;
}

template <class Protocol>
std::size_t basic_stream<Protocol>::try_write_some(std::span<const std::byte> data,
                                                   std::error_code& error) noexcept {
  const io_result done =
      try_io(socket_.reg(), direction::write, send_some_attempt(socket_.fd(), data));
  error = done.error;
  return done.count;
}

template <class Protocol>
// NOLINTNEXTLINE(readability-make-member-function-const): changes the socket's state
std::error_code basic_stream<Protocol>::shutdown(int how) noexcept {
  if (!socket_.is_open()) {
    return std::make_error_code(std::errc::bad_file_descriptor);
  }
  if (::shutdown(socket_.fd(), how) != 0) {
    return {errno, std::system_category()};
  }
  return {};
}

template class basic_stream<tcp_protocol>;
template class basic_stream<unix_protocol>;

}  // namespace canopy::io::detail
