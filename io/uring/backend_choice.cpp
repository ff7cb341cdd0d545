// Which backend a reactor runs (io/reactor.hpp, docs/io.md "Choosing"):
// reactor_options::backend, overridden by CANOPY_IO_BACKEND. The reactor
// then makes its epoll_backend or its uring_backend (whose constructor, in
// a build without io_uring, throws the error that says so).
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "../reactor_types.hpp"

namespace canopy::io {

io_backend detail::chosen_backend(io_backend configured) {
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

}  // namespace canopy::io
