// Which backend a reactor runs (io/reactor.hpp, docs/io.md "Choosing"):
// reactor_options::backend, overridden by CANOPY_IO_BACKEND, and the ring
// opened when io_uring is the one (in a build without io_uring, the error
// that says so).
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "../reactor.hpp"
#include "completion_ring.hpp"

namespace canopy::io {

namespace {

// CANOPY_IO_BACKEND, if set, over `configured`.
io_backend chosen_backend(io_backend configured) {
  // Read once per reactor, while it is constructed; Canopy never sets it.
  const char* value = std::getenv("CANOPY_IO_BACKEND");  // NOLINT(concurrency-mt-unsafe)
  if (value == nullptr || *value == '\0') {
    return configured;
  }
  const std::string_view name(value);
  if (name == "auto") {
    return io_backend::automatic;
  }
  if (name == "epoll") {
    return io_backend::epoll;
  }
  if (name == "io_uring") {
    return io_backend::io_uring;
  }
  throw std::invalid_argument("canopy::io::reactor: CANOPY_IO_BACKEND='" + std::string(name) +
                              "' is not a backend (use auto, epoll or io_uring)");
}

}  // namespace

const char* to_string(io_backend backend) noexcept {
  switch (backend) {
    case io_backend::automatic:
      return "auto";
    case io_backend::epoll:
      return "epoll";
    case io_backend::io_uring:
      return "io_uring";
  }
  return "unknown";
}

void reactor::open_ring(io_backend requested, [[maybe_unused]] unsigned entries) {
  // automatic takes epoll: io_uring is chosen only when asked for, until it
  // is at least as fast as epoll in every configuration of the examples as
  // shipped (docs/io.md, "Which is faster").
  if (chosen_backend(requested) != io_backend::io_uring) {
    return;
  }
#if CANOPY_IO_URING
  std::error_code error;
  std::string why;
  ring_ = detail::completion_ring::open(entries, error, why);
  if (ring_ == nullptr) {
    throw std::system_error(error, "canopy::io::reactor: the io_uring backend cannot run here (" +
                                       why + "); use io_backend::epoll or automatic");
  }
  backend_ = io_backend::io_uring;
#else
  // Asked for by name: say why it is missing rather than run epoll quietly.
  throw std::system_error(std::make_error_code(std::errc::function_not_supported),
                          "canopy::io::reactor: this Canopy was built without the io_uring "
                          "backend (-Dio_uring=disabled, or liburing-dev missing when it was "
                          "built); use io_backend::epoll or automatic");
#endif
}

}  // namespace canopy::io
