// <canopy/io/unix.hpp> — Unix-domain stream sockets on a Canopy executor's
// reactor: canopy::io::unix_listener, canopy::io::unix_stream (the
// operations of tcp_listener and tcp_stream) and canopy::io::unix_endpoint
// (a path, or a Linux abstract name).
//
//   auto where = canopy::io::unix_endpoint::path("/run/app.sock");
//   auto listener = canopy::io::unix_listener::bind(canopy::io::reactor::of(pool), where);
//   canopy::io::unix_stream peer = co_await listener.accept();     // inside a task
//
// Who may call, threads and errors: as TCP's (<canopy/io.hpp>): task forms
// awaited inside a task, fiber forms in <canopy/io/fiber.hpp>, a
// std::error_code& form and a throwing form of each operation. Bad names
// (empty, too long for sockaddr_un, a NUL in a path) are errors, not
// truncations. shutdown(SHUT_RD) from another task while a read waits
// makes it return 0; close() makes it end with errc::operation_canceled.
// The stale socket file rule: bind() removes an existing
// socket file nobody accepts on; a live server's file, or a file that is
// not a socket, makes it fail with errc::address_in_use; a listener
// removes its own file when closed. The full contract is at the top of
// detail/io/unix.hpp. Link canopy.
#pragma once

#include "../detail/io/unix.hpp"
#include "../io.hpp"
