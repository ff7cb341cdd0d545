// fiber_io — the I/O and timer waits of canopy::io for fibers, in
// canopy::this_fiber beside the fiber's own calls (fiber/this_fiber.hpp): the same
// operations as the task forms (io/registration.hpp, io/tcp.hpp,
// io/udp.hpp, io/unix.hpp, io/signal.hpp, io/timer/timer_wait.hpp), on the
// same readiness helper (io/readiness.hpp), blocking only the calling fiber
// (its worker runs other tasks meanwhile). Separate from the task forms so
// that a program without fibers does not need Boost.Context: link
// canopy_io_fiber (pkg-config canopy-fiber) for these.
//
//   std::error_code error = canopy::this_fiber::readable(reg);
//   canopy::io::tcp_stream peer = canopy::this_fiber::accept(listener);
//   std::size_t got = canopy::this_fiber::read_some(peer, buffer);
//   int which = canopy::this_fiber::wait(signals);   // also UDP, Unix-domain streams
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
#include "../udp.hpp"
#include "../unix.hpp"
#include "timer_fiber.hpp"

namespace canopy::this_fiber {

// Readiness of a registration, and one-shot waits on an unregistered
// descriptor (on the current fiber's reactor).
inline std::error_code readable(const io::registration& reg) {
  io::readiness_wait wait{reg, io::direction::read};
  return wait_on(wait);
}
inline std::error_code writable(const io::registration& reg) {
  io::readiness_wait wait{reg, io::direction::write};
  return wait_on(wait);
}
std::error_code readable(int fd);
std::error_code writable(int fd);

// TCP: the same operations as tcp_stream's and tcp_listener's.
io::tcp_stream connect(io::reactor& owner, const io::endpoint& peer, std::error_code& error);
io::tcp_stream accept(io::tcp_listener& listener, std::error_code& error);
std::size_t read_some(io::tcp_stream& stream, std::span<std::byte> buffer, std::error_code& error);
void write_all(io::tcp_stream& stream, std::span<const std::byte> data, std::error_code& error);
// Gathered: every byte of every buffer, in order (tcp_stream::write_all's).
void write_all(io::tcp_stream& stream, std::span<const std::span<const std::byte>> buffers,
               std::error_code& error);
// Throwing forms.
io::tcp_stream connect(io::reactor& owner, const io::endpoint& peer);
io::tcp_stream accept(io::tcp_listener& listener);
std::size_t read_some(io::tcp_stream& stream, std::span<std::byte> buffer);
void write_all(io::tcp_stream& stream, std::span<const std::byte> data);
void write_all(io::tcp_stream& stream, std::span<const std::span<const std::byte>> buffers);

// UDP (io/udp.hpp): the same operations as udp_socket's.
std::size_t send_to(io::udp_socket& socket, std::span<const std::byte> data,
                    const io::endpoint& peer, std::error_code& error);
io::datagram receive_from(io::udp_socket& socket, std::span<std::byte> buffer,
                          std::error_code& error);
std::size_t send(io::udp_socket& socket, std::span<const std::byte> data, std::error_code& error);
std::size_t receive(io::udp_socket& socket, std::span<std::byte> buffer, std::error_code& error);
std::size_t send_to(io::udp_socket& socket, std::span<const std::byte> data,
                    const io::endpoint& peer);
io::datagram receive_from(io::udp_socket& socket, std::span<std::byte> buffer);
std::size_t send(io::udp_socket& socket, std::span<const std::byte> data);
std::size_t receive(io::udp_socket& socket, std::span<std::byte> buffer);

// Unix-domain streams (io/unix.hpp): the same operations as TCP's.
io::unix_stream connect(io::reactor& owner, const io::unix_endpoint& peer, std::error_code& error);
io::unix_stream accept(io::unix_listener& listener, std::error_code& error);
std::size_t read_some(io::unix_stream& stream, std::span<std::byte> buffer, std::error_code& error);
void write_all(io::unix_stream& stream, std::span<const std::byte> data, std::error_code& error);
void write_all(io::unix_stream& stream, std::span<const std::span<const std::byte>> buffers,
               std::error_code& error);
io::unix_stream connect(io::reactor& owner, const io::unix_endpoint& peer);
io::unix_stream accept(io::unix_listener& listener);
std::size_t read_some(io::unix_stream& stream, std::span<std::byte> buffer);
void write_all(io::unix_stream& stream, std::span<const std::byte> data);
void write_all(io::unix_stream& stream, std::span<const std::span<const std::byte>> buffers);

// Signals (io/signal.hpp): the next signal of `set`.
int wait(io::signal_set& set, std::error_code& error);
int wait(io::signal_set& set);

}  // namespace canopy::this_fiber

namespace canopy::io {
// The name these forms had before they joined canopy::this_fiber, kept so
// that code written against it still compiles.
namespace this_fiber = canopy::this_fiber;
}  // namespace canopy::io
