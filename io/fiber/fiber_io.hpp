// fiber_io — the I/O and timer waits of canopy::io for fibers: the same
// operations as the task forms (io/registration.hpp, io/tcp.hpp,
// io/udp.hpp, io/unix.hpp, io/signal.hpp, io/timer/timer_wait.hpp), on the
// same readiness helper (io/readiness.hpp), blocking only the calling fiber
// (its worker runs other tasks meanwhile). Separate from the task forms so
// that a program without fibers does not need Boost.Context: link
// canopy_io_fiber (pkg-config canopy-fiber) for these.
//
//   std::error_code error = canopy::io::this_fiber::readable(reg);
//   canopy::io::tcp_stream peer = canopy::io::this_fiber::accept(listener);
//   std::size_t got = canopy::io::this_fiber::read_some(peer, buffer);
//   int which = canopy::io::this_fiber::wait(signals);   // also UDP, Unix-domain streams
//   canopy::this_fiber::sleep_for(5ms);
//
// Only inside a fiber (elsewhere std::logic_error, this_fiber's rule). The
// error convention is the task forms' (docs/io.md). A cancelled fiber
// unwinds from its wait after the wait was released; a TCP read's bytes
// that came meanwhile are kept for the stream's next read (tcp.hpp).
#pragma once

#include <cstddef>
#include <span>
#include <system_error>

#include "../../fiber/this_fiber.hpp"
#include "../registration.hpp"
#include "../signal.hpp"
#include "../tcp.hpp"
#include "../timer/timer_fiber.hpp"
#include "../udp.hpp"
#include "../unix.hpp"

namespace canopy::io {

// Readiness of a registration, and one-shot waits on an unregistered
// descriptor (on the current fiber's reactor).
namespace this_fiber {
inline std::error_code readable(const registration& reg) {
  readiness_wait wait{reg, direction::read};
  return canopy::this_fiber::wait_on(wait);
}
inline std::error_code writable(const registration& reg) {
  readiness_wait wait{reg, direction::write};
  return canopy::this_fiber::wait_on(wait);
}
std::error_code readable(int fd);
std::error_code writable(int fd);
}  // namespace this_fiber

// TCP: the same operations as tcp_stream's and tcp_listener's.
namespace this_fiber {
tcp_stream connect(reactor& owner, const endpoint& peer, std::error_code& error);
tcp_stream accept(tcp_listener& listener, std::error_code& error);
std::size_t read_some(tcp_stream& stream, std::span<std::byte> buffer, std::error_code& error);
void write_all(tcp_stream& stream, std::span<const std::byte> data, std::error_code& error);
// Gathered: every byte of every buffer, in order (tcp_stream::write_all's).
void write_all(tcp_stream& stream, std::span<const std::span<const std::byte>> buffers,
               std::error_code& error);
// Throwing forms.
tcp_stream connect(reactor& owner, const endpoint& peer);
tcp_stream accept(tcp_listener& listener);
std::size_t read_some(tcp_stream& stream, std::span<std::byte> buffer);
void write_all(tcp_stream& stream, std::span<const std::byte> data);
void write_all(tcp_stream& stream, std::span<const std::span<const std::byte>> buffers);
}  // namespace this_fiber

// UDP (io/udp.hpp): the same operations as udp_socket's.
namespace this_fiber {
std::size_t send_to(udp_socket& socket, std::span<const std::byte> data, const endpoint& peer,
                    std::error_code& error);
datagram receive_from(udp_socket& socket, std::span<std::byte> buffer, std::error_code& error);
std::size_t send(udp_socket& socket, std::span<const std::byte> data, std::error_code& error);
std::size_t receive(udp_socket& socket, std::span<std::byte> buffer, std::error_code& error);
std::size_t send_to(udp_socket& socket, std::span<const std::byte> data, const endpoint& peer);
datagram receive_from(udp_socket& socket, std::span<std::byte> buffer);
std::size_t send(udp_socket& socket, std::span<const std::byte> data);
std::size_t receive(udp_socket& socket, std::span<std::byte> buffer);
}  // namespace this_fiber

// Unix-domain streams (io/unix.hpp): the same operations as TCP's.
namespace this_fiber {
unix_stream connect(reactor& owner, const unix_endpoint& peer, std::error_code& error);
unix_stream accept(unix_listener& listener, std::error_code& error);
std::size_t read_some(unix_stream& stream, std::span<std::byte> buffer, std::error_code& error);
void write_all(unix_stream& stream, std::span<const std::byte> data, std::error_code& error);
void write_all(unix_stream& stream, std::span<const std::span<const std::byte>> buffers,
               std::error_code& error);
unix_stream connect(reactor& owner, const unix_endpoint& peer);
unix_stream accept(unix_listener& listener);
std::size_t read_some(unix_stream& stream, std::span<std::byte> buffer);
void write_all(unix_stream& stream, std::span<const std::byte> data);
void write_all(unix_stream& stream, std::span<const std::span<const std::byte>> buffers);
}  // namespace this_fiber

// Signals (io/signal.hpp): the next signal of `set`.
namespace this_fiber {
int wait(signal_set& set, std::error_code& error);
int wait(signal_set& set);
}  // namespace this_fiber

}  // namespace canopy::io
