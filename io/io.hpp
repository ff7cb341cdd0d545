// canopy::io — readiness I/O on the executor: the epoll reactor, readiness
// waits for tasks and callbacks, TCP, UDP, Unix-domain streams, signals
// (signalfd), and timers (sleep_for, with_timeout; reactor_timers). Every
// socket operation runs on one readiness helper (io/readiness.hpp). The
// fibers' forms are in io/fiber_io.hpp. docs/io.md is the guide.
//
// Internals are in canopy::io::detail: the helper, the registration slab
// (io/registration_slab.hpp), owned_socket, the socket steps
// (io/socket_ops.hpp).
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
