// canopy::io — I/O on the executor: the reactor, readiness waits for tasks
// and callbacks, TCP, UDP, Unix-domain streams, signals (signalfd), and
// timers (sleep_for, with_timeout; reactor_timers). Every socket operation
// runs on one readiness helper (io/readiness.hpp); on the io_uring backend
// the TCP operations are completion requests instead (io/stream_op.hpp
// picks, once per registration). The fibers' forms are in io/fiber/fiber_io.hpp.
// docs/io.md is the guide.
//
// Layout: io/reactor.hpp is a thin reactor (the registrations, the choice
// of backend, the idle_driver members) that owns one backend:
// io/epoll_backend.hpp (the epoll set and the eventfd) or
// io/uring/uring_backend.hpp (the ring, plus an epoll_backend of its own
// for the waits that stay on readiness). No io/ header that io/uring/
// includes includes io/uring/ back: the backend needs only
// io/reactor_types.hpp (the backends' shared vocabulary),
// io/epoll_backend.hpp and the slab.
//
// Internals are in canopy::io::detail: the helper, the registration slab
// (io/registration_slab.hpp), the two backends, owned_socket, the socket
// steps (io/socket_ops.hpp).
#pragma once

#include "callback.hpp"
#include "endpoint.hpp"
#include "reactor.hpp"
#include "registration.hpp"
#include "signal.hpp"
#include "tcp.hpp"
#include "timer/timer_binding.hpp"
#include "timer/timer_error.hpp"
#include "timer/timer_thread.hpp"
#include "timer/timer_wait.hpp"
#include "udp.hpp"
#include "unix.hpp"
