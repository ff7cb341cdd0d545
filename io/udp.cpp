#include "udp.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "readiness.hpp"
#include "socket_ops.hpp"

namespace canopy::io {

using detail::io_result;
using detail::readiness_op;
using detail::throw_if;

namespace detail {

ssize_t udp_send_to(int fd, std::span<const std::byte> data, const endpoint* peer) noexcept {
  return ::sendto(fd, data.data(), data.size(), MSG_NOSIGNAL,
                  peer == nullptr ? nullptr : peer->data(), peer == nullptr ? 0 : peer->size());
}

ssize_t udp_receive(int fd, std::span<std::byte> buffer, receive_state& state) noexcept {
  state.length = sizeof state.from;
  // MSG_TRUNC: the datagram's real length, so that a cut one is reported.
  return ::recvfrom(fd, buffer.data(), buffer.size(), MSG_TRUNC,
                    reinterpret_cast<sockaddr*>(&state.from), &state.length);
}

datagram finish_receive(const io_result& got, std::span<std::byte> buffer,
                        const receive_state& state, std::error_code& error) noexcept {
  error = got.error;
  if (error) {
    return {};
  }
  datagram result{std::min(got.count, buffer.size()),
                  endpoint::from(reinterpret_cast<const sockaddr*>(&state.from), state.length)};
  if (got.count > buffer.size()) {
    error = std::make_error_code(std::errc::message_size);
  }
  return result;
}

}  // namespace detail

namespace {

auto send_attempt(int fd, std::span<const std::byte> data, const endpoint* peer) noexcept {
  return [fd, data, peer]() noexcept { return detail::udp_send_to(fd, data, peer); };
}

auto receive_attempt(int fd, std::span<std::byte> buffer, detail::receive_state& state) noexcept {
  return [fd, buffer, &state]() noexcept { return detail::udp_receive(fd, buffer, state); };
}

}  // namespace

udp_socket udp_socket::open(reactor& owner, int family, std::error_code& error) noexcept {
  error.clear();
  if (family != AF_INET && family != AF_INET6) {
    error = std::make_error_code(std::errc::address_family_not_supported);
    return {};
  }
  const int fd = detail::open_socket(family, error, SOCK_DGRAM);
  if (fd < 0) {
    return {};
  }
  udp_socket socket;
  socket.socket_ = detail::owned_socket(owner, fd, interest::both, error);  // closes fd on failure
  return socket;
}

udp_socket udp_socket::open(reactor& owner, int family) {
  std::error_code error;
  udp_socket socket = open(owner, family, error);
  throw_if(error, "canopy::io::udp_socket::open");
  return socket;
}

udp_socket udp_socket::bind(reactor& owner, const endpoint& local, std::error_code& error,
                            bool reuse_address) noexcept {
  error.clear();
  const int fd = detail::open_socket(local.family(), error, SOCK_DGRAM);
  if (fd < 0) {
    return {};
  }
  const int one = 1;
  if (reuse_address) {
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  }
  // An IPv6 socket keeps the system's IPV6_V6ONLY default
  // (net.ipv6.bindv6only; 0 on Linux unless set): one on :: then takes
  // IPv4 too, as the public contract says and as Asio and Rust's std do.
  if (::bind(fd, local.data(), local.size()) != 0) {
    error = std::error_code(errno, std::system_category());
    ::close(fd);
    return {};
  }
  udp_socket socket;
  socket.socket_ = detail::owned_socket(owner, fd, interest::both, error);  // closes fd on failure
  return socket;
}

udp_socket udp_socket::bind(reactor& owner, const endpoint& local, bool reuse_address) {
  std::error_code error;
  udp_socket socket = bind(owner, local, error, reuse_address);
  if (error) {
    throw std::system_error(error, "canopy::io::udp_socket::bind " + local.to_string());
  }
  return socket;
}

// NOLINTNEXTLINE(readability-make-member-function-const): changes the socket's state
std::error_code udp_socket::connect(const endpoint& peer) noexcept {
  if (!is_open()) {
    return std::make_error_code(std::errc::bad_file_descriptor);
  }
  if (::connect(socket_.fd(), peer.data(), peer.size()) != 0) {
    return {errno, std::system_category()};
  }
  return {};
}

task<std::size_t> udp_socket::send_to(std::span<const std::byte> data, endpoint peer,
                                      std::error_code& error) {
  const io_result sent = co_await canopy::wait_on(
      readiness_op(socket_.reg(), direction::write, send_attempt(socket_.fd(), data, &peer)));
  error = sent.error;
  co_return sent.count;
}

task<std::size_t> udp_socket::send_to(std::span<const std::byte> data, endpoint peer) {
  std::error_code error;
  const std::size_t sent = co_await send_to(data, peer, error);
  if (error) {
    throw std::system_error(error, "canopy::io::udp_socket::send_to " + peer.to_string());
  }
  co_return sent;
}

task<datagram> udp_socket::receive_from(std::span<std::byte> buffer, std::error_code& error) {
  detail::receive_state state;
  const io_result got = co_await canopy::wait_on(
      readiness_op(socket_.reg(), direction::read, receive_attempt(socket_.fd(), buffer, state)));
  co_return detail::finish_receive(got, buffer, state, error);
}

task<datagram> udp_socket::receive_from(std::span<std::byte> buffer) {
  std::error_code error;
  const datagram got = co_await receive_from(buffer, error);
  throw_if(error, "canopy::io::udp_socket::receive_from");
  co_return got;
}

task<std::size_t> udp_socket::send(std::span<const std::byte> data, std::error_code& error) {
  const io_result sent = co_await canopy::wait_on(
      readiness_op(socket_.reg(), direction::write, send_attempt(socket_.fd(), data, nullptr)));
  error = sent.error;
  co_return sent.count;
}

task<std::size_t> udp_socket::send(std::span<const std::byte> data) {
  std::error_code error;
  const std::size_t sent = co_await send(data, error);
  throw_if(error, "canopy::io::udp_socket::send");
  co_return sent;
}

task<std::size_t> udp_socket::receive(std::span<std::byte> buffer, std::error_code& error) {
  const datagram got = co_await receive_from(buffer, error);
  co_return got.size;
}

task<std::size_t> udp_socket::receive(std::span<std::byte> buffer) {
  std::error_code error;
  const std::size_t got = co_await receive(buffer, error);
  throw_if(error, "canopy::io::udp_socket::receive");
  co_return got;
}

std::size_t udp_socket::try_send_to(std::span<const std::byte> data, const endpoint& peer,
                                    std::error_code& error) noexcept {
  const io_result sent =
      detail::try_io(socket_.reg(), direction::write, send_attempt(socket_.fd(), data, &peer));
  error = sent.error;
  return sent.count;
}

datagram udp_socket::try_receive_from(std::span<std::byte> buffer,
                                      std::error_code& error) noexcept {
  detail::receive_state state;
  const io_result got =
      detail::try_io(socket_.reg(), direction::read, receive_attempt(socket_.fd(), buffer, state));
  return detail::finish_receive(got, buffer, state, error);
}

}  // namespace canopy::io
