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
// direction at a time (a second one while another task's waits fails at
// once with errc::connection_already_in_progress); close() from any thread
// (a waiting operation then ends with errc::operation_canceled), not while
// another thread is inside a call on the object.
// Errors: each operation has a std::error_code& form that never throws for
// I/O errors and a form that throws std::system_error with the same code;
// EAGAIN and EINTR never surface; errc::bad_file_descriptor on a socket
// that is not open.
//
// Reference (namespace canopy::io):
//   udp_socket::bind(reactor, endpoint[, error], reuse_address = false):
//     bound to the endpoint (port 0: any free port; an IPv6 socket is
//     IPv6-only; SO_REUSEADDR if asked).
//   udp_socket::open(reactor, family[, error]): unbound, AF_INET or
//     AF_INET6; the kernel picks a port at the first send.
//   connect(peer) -> std::error_code: sets the default peer (no handshake,
//     never waits); receive() then only gets datagrams from it. An ICMP
//     error for an earlier datagram comes back from a later operation as
//     errc::connection_refused.
//   co_await send_to(bytes, peer[, error]) -> std::size_t: one datagram,
//     all of it (EMSGSIZE when larger than UDP allows);
//   co_await receive_from(buffer[, error]) -> datagram {size, from};
//   co_await send(bytes[, error]), receive(buffer[, error]) -> std::size_t:
//     on a connected socket.
//   A datagram larger than the buffer is cut: receive_from / receive report
//     std::errc::message_size ("Message too long") with size the bytes
//     kept and from the sender (the throwing forms throw it); the rest of
//     that datagram is gone.
//   try_send_to(bytes, peer, error), try_receive_from(buffer, error): never
//     wait; errc::resource_unavailable_try_again when they would.
//   close(), is_open(), native_handle(), local_endpoint(),
//   remote_endpoint(). Move-only; the destructor closes.
// Link canopy.
#pragma once

#include "../detail/io/udp.hpp"
#include "../io.hpp"
