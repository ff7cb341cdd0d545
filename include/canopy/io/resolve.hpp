// <canopy/io/resolve.hpp> — name resolution: co_await
// canopy::io::resolve(host, service) gives the IPv4 and IPv6 endpoints of a
// host name (getaddrinfo, run on the blocking pool of <canopy/blocking.hpp>
// so that no worker waits on DNS).
//
//   std::vector<canopy::io::endpoint> found = co_await canopy::io::resolve("localhost", "8080");
//   // in a fiber (<canopy/io/fiber.hpp>): canopy::io::this_fiber::resolve(host, service)
//
// Who may call: the task forms inside a running canopy::task, the fiber
// forms inside a fiber. Errors: getaddrinfo's, as std::error_codes of the
// category "canopy.resolve", compared with canopy::io::resolve_errc
// (host_not_found for a name that does not exist, service_not_found for an
// unknown service name, try_again when no name server answered, ...), the
// message gai_strerror's; an empty host or a NUL byte:
// errc::invalid_argument; the blocking pool's refusals as run_blocking's.
// The std::error_code& form reports them there, the other throws
// std::system_error naming host and service. The full contract is at the
// top of detail/io/resolve.hpp. Link canopy.
#pragma once

#include "../detail/io/resolve.hpp"
#include "../io.hpp"
