// <canopy/io.hpp> — readiness I/O and timers on a Canopy executor, for
// coroutine tasks and plain callbacks.
//
//   canopy::executor pool(canopy::io::with_reactor(config));   // timers included
//   auto listener = canopy::io::tcp_listener::bind(canopy::io::reactor::of(pool),
//                                                  canopy::io::endpoint::loopback_v4(0));
//   canopy::io::tcp_stream peer = co_await listener.accept();   // inside a task
//   co_await canopy::sleep_for(5ms);
//
// Every operation has two forms: one taking a std::error_code& that never
// throws for I/O errors, and one that throws std::system_error with the same
// code; EAGAIN and EINTR never surface; EOF is a read of 0 bytes
// (docs/io.md, "Error convention"). Threads: one operation per direction at
// a time on a stream; close() from any thread. A read waiting on a TCP or
// Unix stream may be ended from another task: shutdown(SHUT_RD) makes it
// return 0, close() makes it end with errc::operation_canceled (or race it
// against canopy::stopped(token), <canopy/race.hpp>). The full contracts
// are at the top of each header under detail/io/. The fibers' forms are in
// <canopy/io/fiber.hpp>, the HTTP/1.1 server the examples use in
// <canopy/io/http.hpp>. UDP, Unix-domain streams and signals have public
// headers of their own, included here: <canopy/io/udp.hpp>,
// <canopy/io/unix.hpp>, <canopy/io/signal.hpp> (signals have a rule about
// blocking them in every thread: read its contract); name resolution
// (co_await canopy::io::resolve(host, service)) in <canopy/io/resolve.hpp>;
// buffered reads (lines, exact counts, frames) in <canopy/io/buffered.hpp>.
// Link canopy.
//
// Reference (what is here; each call's full contract is in the header named):
//   executor_config with_reactor(config = {}, reactor_options = {})
//       an executor config whose driver is a fresh reactor (io/reactor.hpp);
//       reactor_options: backend (automatic = epoll, epoll, io_uring),
//       ring_entries, timers (true: sleep_for / with_timeout work at once).
//       reactor::of(pool), reactor::current() (in a task), .backend().
//   endpoint (io/endpoint.hpp): loopback_v4(port), loopback_v6(port),
//       any_v4(port), any_v6(port), parse(text, port[, error]),
//       .port(), .family(), .to_string().
//   tcp_listener (io/tcp.hpp): bind(reactor, endpoint[, error], backlog,
//       reuse_port); co_await accept([error]) -> tcp_stream; try_accept;
//       local_endpoint(), close(), is_open(), native_handle().
//   tcp_stream (io/tcp.hpp): co_await connect([reactor,] endpoint[, error]);
//       co_await read_some(buffer[, error]) -> bytes (0: EOF; cancel-safe);
//       co_await write_all(bytes[, error]), write_all(span of buffers[, error])
//       (gathered, sendmsg); try_read_some, try_write_some; shutdown(how);
//       close(); local_endpoint(), remote_endpoint(), native_handle().
//   sleep_for(d), sleep_until(t), with_timeout(d, task or wait source),
//       with_deadline(t, wait source) (io/timer/timer_wait.hpp):
//       io::timeout_result<T>, the value or io::errc::timed_out.
//   registration, readiness_wait (io/registration.hpp) and
//       callback_registration (io/callback.hpp) for descriptors of your own.
//   timer_thread(pool) (io/timer/timer_thread.hpp): timers for an executor
//       without a reactor.
//   TLS and HTTPS (not included here: <canopy/io/tls.hpp>, link canopy-tls;
//       docs/tls.md): tls_context, tls_stream<tcp_stream> (handshake,
//       read_some, write_all, shutdown), http::serve(listener, tls_context, ...).
#pragma once

#include "canopy.hpp"
#include "detail/io/io.hpp"
#include "io/buffered.hpp"
#include "io/resolve.hpp"
#include "io/signal.hpp"
#include "io/udp.hpp"
#include "io/unix.hpp"
