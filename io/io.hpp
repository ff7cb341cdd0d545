// canopy::io — readiness I/O on the executor: the epoll reactor, readiness
// waits for tasks and callbacks, TCP, and timers (sleep_for, with_timeout;
// reactor_timers). The fibers' forms are in io/fiber_io.hpp. docs/io.md is
// the guide.
#pragma once

#include "callback.hpp"
#include "endpoint.hpp"
#include "reactor.hpp"
#include "registration.hpp"
#include "tcp.hpp"
#include "timer/timer_binding.hpp"
#include "timer/timer_error.hpp"
#include "timer/timer_thread.hpp"
#include "timer/timer_wait.hpp"
