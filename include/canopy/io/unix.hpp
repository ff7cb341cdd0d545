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
// not a socket, makes it fail with errc::address_in_use (the live server
// is not connected to: its accept queue gets nothing, docs/io.md); a
// listener removes its own file when closed.
//
// Reference (namespace canopy::io):
//   unix_endpoint::path(file[, error]), unix_endpoint::abstract(name[,
//     error]): a path address is a file the bind creates; an abstract one
//     (Linux) has no file and vanishes with its last socket. An empty name:
//     errc::invalid_argument; 108 bytes or more: errc::filename_too_long; a
//     NUL in a path: errc::invalid_argument (the throwing forms throw
//     std::system_error). is_abstract(), empty(), to_string().
//   unix_listener::bind(reactor, endpoint[, error], backlog = 1024) (the
//     stale file rule above); co_await accept([error]) -> unix_stream;
//     try_accept(error); close() (removes its path file; idempotent; the
//     destructor closes), is_open(), native_handle().
//   unix_stream::connect([reactor,] endpoint[, error]) -> task<unix_stream>
//     (without a reactor: the running task's). A listener whose backlog is
//     full: errc::resource_unavailable_try_again (nothing to wait for).
//   co_await read_some(buffer[, error]) -> std::size_t (0: EOF);
//   co_await write_all(bytes[, error]), write_all(span of buffers[,
//     error]) (gathered: sendmsg, every byte in order); bounded, as
//     tcp_stream's (<canopy/io.hpp>): co_await read_some_until(buffer,
//     deadline, error) (0 with errc::timed_out, no byte taken, the stream
//     usable), co_await write_all_within(bytes, stall_limit, error)
//     (errc::timed_out after a stall; the stream then unusable); try_read_some,
//     try_write_some (never wait); shutdown(how) -> std::error_code;
//     close(), is_open(), native_handle(). SIGPIPE is never raised.
// One operation per direction at a time (a second one fails at once with
// errc::connection_already_in_progress); close() from any thread, not while
// another thread is inside a call on the object. Link canopy.
#pragma once

#include "../detail/io/unix.hpp"
#include "../io.hpp"
