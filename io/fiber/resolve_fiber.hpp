// The fiber forms of canopy::io::resolve (io/resolve.hpp has the contract):
// the fiber switches out while getaddrinfo runs on a blocking-pool thread.
//
//   std::vector<canopy::io::endpoint> found = canopy::this_fiber::resolve("localhost", "80");
//
// Only inside a fiber (std::logic_error otherwise). Errors as the task forms.
#pragma once

#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "../../blocking/blocking_fiber.hpp"
#include "../resolve.hpp"

namespace canopy::this_fiber {

inline std::vector<io::endpoint> resolve(std::string_view host, std::string_view service,
                                         std::error_code& error) {
  error.clear();
  std::error_code found_error;
  auto lookup = [host = std::string(host), service = std::string(service), &found_error] {
    return io::detail::resolve_now(host, service, found_error);
  };
  try {
    std::vector<io::endpoint> found = run_blocking(std::move(lookup));
    error = found_error;
    return found;
  } catch (const std::system_error& refused) {  // the pool's at_capacity / shut_down
    error = refused.code();
    return {};
  }
}

inline std::vector<io::endpoint> resolve(std::string_view host, std::string_view service) {
  std::error_code error;
  std::vector<io::endpoint> found = resolve(host, service, error);
  if (error) {
    io::detail::throw_resolve_error(error, host, service);
  }
  return found;
}

}  // namespace canopy::this_fiber

namespace canopy::io {
// The name these forms had before they joined canopy::this_fiber (fiber_io.hpp).
namespace this_fiber = canopy::this_fiber;
}  // namespace canopy::io
