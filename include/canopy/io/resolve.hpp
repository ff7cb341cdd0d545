// <canopy/io/resolve.hpp> — name resolution: co_await
// canopy::io::resolve(host, service) gives the IPv4 and IPv6 endpoints of a
// host name (getaddrinfo, run on the blocking pool of <canopy/blocking.hpp>
// so that no worker waits on DNS).
//
//   std::vector<canopy::io::endpoint> found = co_await canopy::io::resolve("localhost", "8080");
//   // in a fiber (<canopy/io/fiber.hpp>): canopy::this_fiber::resolve(host, service)
//
// Reference (namespace canopy::io):
//   co_await resolve(std::string host, std::string service[, error]) ->
//     std::vector<endpoint>: every address getaddrinfo gives for a stream
//     socket (IPv4 and IPv6, in its order, duplicates removed), each with
//     the service's port. host: a name or a numeric address ("127.0.0.1",
//     "::1"); service: a port number ("8080") or a name from /etc/services
//     ("http"); empty: port 0.
//   this_fiber::resolve(host, service[, error]) (<canopy/io/fiber.hpp>):
//     the same, in a fiber.
//   resolve_errc (host_not_found, no_address, service_not_found,
//     try_again, failure, family_not_supported, ...) and resolve_category()
//     ("canopy.resolve"; message() is gai_strerror's).
// Who may call: the task forms inside a running canopy::task (they use
// run_blocking), the fiber forms inside a fiber. Cancelling the waiting
// task abandons the lookup (a getaddrinfo already running finishes on its
// pool thread, its result dropped).
// Errors: getaddrinfo's, as std::error_codes of "canopy.resolve", compared
// with resolve_errc: host_not_found for a name that does not exist,
// no_address for one without an address, service_not_found for an unknown
// service name (or a port over 65535), try_again when no name server
// answered (also a machine without network); EAI_SYSTEM becomes its errno.
// An empty host or a NUL byte in host or service: errc::invalid_argument.
// The blocking pool's refusals as run_blocking's (errc::at_capacity,
// errc::shut_down). The std::error_code& form reports every error there and
// returns an empty vector; the other throws std::system_error with the same
// code and a message naming host and service. Link canopy.
#pragma once

#include "../detail/io/resolve.hpp"
#include "../io.hpp"
