// <canopy/io/udp.hpp> — UDP sockets on a Canopy executor's reactor, IPv4
// and IPv6: canopy::io::udp_socket (bind, open, send_to, receive_from,
// connect, then send and receive) and canopy::io::datagram.
//
//   auto socket = canopy::io::udp_socket::bind(canopy::io::reactor::of(pool),
//                                              canopy::io::endpoint::loopback_v4(0));
//   canopy::io::datagram got = co_await socket.receive_from(buffer);   // inside a task
//   co_await socket.send_to(std::span(buffer).first(got.size), got.from);
//
// Who may call: the operations are canopy::task<T> awaited inside a task
// (the fibers' forms are in <canopy/io/fiber.hpp>); one operation per
// direction at a time (a second one while another task's waits fails with
// errc::connection_already_in_progress); close() from any thread. Errors: each operation has
// a std::error_code& form that never throws for I/O errors and a form that
// throws std::system_error with the same code; EAGAIN and EINTR never
// surface. A datagram larger than the buffer is cut: the receive reports
// std::errc::message_size with the bytes kept and the sender. The full
// contract is at the top of detail/io/udp.hpp. Link canopy.
#pragma once

#include "../detail/io/udp.hpp"
#include "../io.hpp"
