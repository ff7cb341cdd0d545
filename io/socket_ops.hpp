// socket_ops — the socket steps the task forms (io/tcp.cpp) and the fiber
// forms (io/fiber_io.cpp) of the TCP operations share. Internal.
#pragma once

#include <system_error>

#include "endpoint.hpp"

namespace canopy::io::detail {

// A non-blocking, close-on-exec stream socket of `family`; -1 and `error` set
// on failure.
int open_socket(int family, std::error_code& error) noexcept;
// connect(2) on a fresh non-blocking socket: true when finished (connected,
// or failed with `error` set), false when the caller must wait for
// writability and then read SO_ERROR.
bool start_connect(int fd, const endpoint& peer, std::error_code& error) noexcept;
// TCP_NODELAY on, best effort.
void set_no_delay_on(int fd) noexcept;
// Throw std::system_error(error, what) if `error` is set.
void throw_if(const std::error_code& error, const char* what);

}  // namespace canopy::io::detail
