// udp_socket — a non-blocking UDP socket on the reactor, IPv4 and IPv6.
//
//   auto socket = canopy::io::udp_socket::bind(reactor, canopy::io::endpoint::loopback_v4(0));
//   auto peer = canopy::io::endpoint::loopback_v4(9000);
//   co_await socket.send_to(bytes, peer);
//   canopy::io::datagram got = co_await socket.receive_from(buffer);  // got.size, got.from
//   socket.connect(peer);                        // then send(bytes) / receive(buffer)
//
// Error convention: TCP's (io/tcp.hpp, docs/io.md): each operation has a
// form taking std::error_code& (never throws for I/O errors) and one that
// throws std::system_error with the same code; EAGAIN and EINTR never
// surface; errc::operation_canceled when the socket is closed during a
// wait; errc::bad_file_descriptor on a socket that is not open.
//
// Truncation. A datagram larger than the buffer is cut to the buffer's
// size by the kernel; receive_from/receive then report
// std::errc::message_size (EMSGSIZE, "Message too long") with `size` the
// bytes that were kept and `from` the sender (the throwing forms throw
// it). The rest of that datagram is gone; the next receive gets the next
// datagram.
//
// An ICMP error for an earlier datagram on a connected socket (e.g. a send
// to a port nobody listens on) comes back from a later operation as
// errc::connection_refused, as the kernel reports it.
//
// Threads: one operation per direction at a time (one receiver and one
// sender may run concurrently); close() from any thread, not while another
// thread still uses the object. The fiber forms are in io/fiber/fiber_io.hpp.
#pragma once

#include <cstddef>
#include <span>
#include <system_error>

#include "../coroutine/task.hpp"
#include "endpoint.hpp"
#include "owned_socket.hpp"
#include "reactor.hpp"
#include "registration.hpp"

namespace canopy::io {

// What a receive got: the bytes kept in the buffer and the sender.
struct datagram {
  std::size_t size = 0;
  endpoint from;
};

class udp_socket {
 public:
  udp_socket() noexcept = default;
  udp_socket(udp_socket&&) noexcept = default;
  udp_socket& operator=(udp_socket&&) noexcept = default;
  udp_socket(const udp_socket&) = delete;
  udp_socket& operator=(const udp_socket&) = delete;
  ~udp_socket() = default;

  // A socket bound to `local` (port 0: any free port; IPv6 sockets are
  // IPv6-only). SO_REUSEADDR if `reuse_address`.
  static udp_socket bind(reactor& owner, const endpoint& local, std::error_code& error,
                         bool reuse_address = false) noexcept;
  static udp_socket bind(reactor& owner, const endpoint& local, bool reuse_address = false);
  // An unbound socket of `family` (AF_INET or AF_INET6); the kernel binds
  // it to a free port at its first send.
  static udp_socket open(reactor& owner, int family, std::error_code& error) noexcept;
  static udp_socket open(reactor& owner, int family);

  // Set the default peer (connect(2) on UDP: no handshake, never waits);
  // receive() then only gets datagrams from it.
  std::error_code connect(const endpoint& peer) noexcept;

  // One datagram to `peer`: all of `data` (the size) or an error (EMSGSIZE
  // when it is larger than UDP allows).
  task<std::size_t> send_to(std::span<const std::byte> data, endpoint peer, std::error_code& error);
  task<std::size_t> send_to(std::span<const std::byte> data, endpoint peer);
  task<datagram> receive_from(std::span<std::byte> buffer, std::error_code& error);
  task<datagram> receive_from(std::span<std::byte> buffer);
  // On a connected socket.
  task<std::size_t> send(std::span<const std::byte> data, std::error_code& error);
  task<std::size_t> send(std::span<const std::byte> data);
  task<std::size_t> receive(std::span<std::byte> buffer, std::error_code& error);
  task<std::size_t> receive(std::span<std::byte> buffer);

  // Without waiting: errc::resource_unavailable_try_again when it would block.
  std::size_t try_send_to(std::span<const std::byte> data, const endpoint& peer,
                          std::error_code& error) noexcept;
  datagram try_receive_from(std::span<std::byte> buffer, std::error_code& error) noexcept;

  void close() noexcept { socket_.close(); }
  [[nodiscard]] bool is_open() const noexcept { return socket_.is_open(); }
  [[nodiscard]] int native_handle() const noexcept { return socket_.fd(); }
  [[nodiscard]] endpoint local_endpoint() const noexcept { return socket_.local_endpoint(); }
  [[nodiscard]] endpoint remote_endpoint() const noexcept { return socket_.remote_endpoint(); }
  [[nodiscard]] const registration& reg() const noexcept { return socket_.reg(); }

 private:
  detail::owned_socket socket_;
};

namespace detail {
// The attempts and results the task and fiber forms share (io/udp.cpp).
struct io_result;
struct receive_state {
  sockaddr_storage from{};
  socklen_t length = sizeof from;
};
ssize_t udp_send_to(int fd, std::span<const std::byte> data, const endpoint* peer) noexcept;
ssize_t udp_receive(int fd, std::span<std::byte> buffer, receive_state& state) noexcept;
// The datagram of a finished receive: EMSGSIZE when it was cut.
datagram finish_receive(const io_result& got, std::span<std::byte> buffer,
                        const receive_state& state, std::error_code& error) noexcept;
}  // namespace detail

}  // namespace canopy::io
