// <canopy/io/tls_fiber.hpp> — the fiber forms of <canopy/io/tls.hpp>'s
// tls_stream operations: canopy::this_fiber::{handshake, read_some,
// write_all, shutdown}(tls_stream<tcp_stream or unix_stream>&), each
// blocking only the calling fiber (its worker runs other tasks meanwhile).
//
//   namespace io = canopy::io;
//   io::tls_context client = io::tls_context::client({.ca_file = "ca.pem"});
//   io::tcp_stream tcp = canopy::this_fiber::connect(reactor, io::endpoint::loopback_v4(8443));
//   io::tls_stream<io::tcp_stream> tls(std::move(tcp), client, "localhost");
//   canopy::this_fiber::handshake(tls);
//   canopy::this_fiber::write_all(tls, payload);
//   std::size_t got = canopy::this_fiber::read_some(tls, buffer);   // 0: the peer's close_notify
//   canopy::this_fiber::shutdown(tls);                               // our close_notify
//
// Only inside a fiber (elsewhere std::logic_error, before the stream is
// touched). Everything else is the task forms' contract in
// <canopy/io/tls.hpp>: handshake first and alone, then one read and one
// write at once (a fiber and a task may share a stream, one direction
// each); the same errors in a std::error_code& form and a throwing form
// (std::system_error); an empty buffer's read returns 0 at once, taking
// nothing; the cancel rule with "a fiber cancelled or dropped" for "a task
// cancelled" (unwinding from handshake, write_all or shutdown, or from a
// read's rare send, leaves the stream unusable; from a read's wait for the
// socket, loses nothing). Built where both TLS and fibers are; link
// canopy-tls and canopy-fiber.
#pragma once

#include "../detail/io/fiber/tls_fiber.hpp"
#include "fiber.hpp"
#include "tls.hpp"
