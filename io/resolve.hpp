// resolve — name resolution through getaddrinfo(3), run on the blocking
// pool (blocking/blocking_pool.hpp) so that no worker waits on DNS.
//
//   std::vector<canopy::io::endpoint> found = co_await canopy::io::resolve("localhost", "8080");
//   auto listener = canopy::io::tcp_listener::bind(reactor, found.front());
//   // in a fiber (io/fiber/resolve_fiber.hpp): canopy::this_fiber::resolve(host, service)
//
// What it returns: every address getaddrinfo gives for a stream socket
// (AF_UNSPEC: IPv4 and IPv6, in getaddrinfo's order, duplicates removed),
// each with the service's port. `host` is a name or a numeric address
// ("127.0.0.1", "::1"); `service` a port number ("8080") or a name from
// /etc/services ("http"); an empty service means port 0. A numeric
// service over 65535 is service_not_found (getaddrinfo would wrap it).
//
// Errors. getaddrinfo's failures are std::error_codes of the category
// "canopy.resolve" (resolve_category()), compared with resolve_errc:
// host_not_found (EAI_NONAME: the name does not exist, e.g. "x.invalid"),
// no_address (EAI_NODATA: it exists but has no address), service_not_found
// (EAI_SERVICE: an unknown service name), try_again (EAI_AGAIN: the name
// server did not answer; a machine without network reports names it cannot
// look up this way), failure (EAI_FAIL), ...; message() is gai_strerror's.
// EAI_SYSTEM becomes the errno it carries (system_category). An empty host,
// or a NUL byte in host or service, is errc::invalid_argument. The form
// with a std::error_code& reports every error there (the blocking pool's
// refusals too: errc::at_capacity, errc::shut_down of canopy's category)
// and returns an empty vector; the form without throws std::system_error
// with the same code and a message naming host and service.
//
// Who may call: co_await the task forms inside a canopy::task (they call
// canopy::run_blocking, which needs a running task of an executor); the
// fiber forms inside a fiber. Cancelling the waiting task abandons the
// lookup (a getaddrinfo already running finishes on its pool thread and
// its result is dropped).
#pragma once

#include <netdb.h>

#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "../coroutine/task.hpp"
#include "endpoint.hpp"

namespace canopy::io {

// getaddrinfo's error numbers (glibc's EAI_* values), as error conditions
// of resolve_category().
enum class resolve_errc {
  host_not_found = EAI_NONAME,
  service_not_found = EAI_SERVICE,
  try_again = EAI_AGAIN,
  failure = EAI_FAIL,
  family_not_supported = EAI_FAMILY,
  socket_type_not_supported = EAI_SOCKTYPE,
  out_of_memory = EAI_MEMORY,
  bad_flags = EAI_BADFLAGS,
  overflow = EAI_OVERFLOW,
#ifdef EAI_NODATA
  no_address = EAI_NODATA,
#endif
#ifdef EAI_ADDRFAMILY
  host_has_no_address_in_family = EAI_ADDRFAMILY,
#endif
};

// name() "canopy.resolve"; message(code) is gai_strerror(code).
[[nodiscard]] const std::error_category& resolve_category() noexcept;

[[nodiscard]] inline std::error_code make_error_code(resolve_errc code) noexcept {
  return {static_cast<int>(code), resolve_category()};
}

// The task forms (co_await inside a canopy::task).
task<std::vector<endpoint>> resolve(std::string host, std::string service, std::error_code& error);
task<std::vector<endpoint>> resolve(std::string host, std::string service);

namespace detail {
// One getaddrinfo call on the calling thread (it blocks): what the task
// and fiber forms run on the blocking pool. Errors as above.
std::vector<endpoint> resolve_now(std::string_view host, std::string_view service,
                                  std::error_code& error);
// The exception the throwing forms raise for `error`.
[[noreturn]] void throw_resolve_error(std::error_code error, std::string_view host,
                                      std::string_view service);
}  // namespace detail

}  // namespace canopy::io

template <>
struct std::is_error_code_enum<canopy::io::resolve_errc> : std::true_type {};
