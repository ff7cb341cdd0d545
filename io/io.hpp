// canopy::io — readiness I/O on the executor: the epoll reactor, readiness
// waits for tasks, fibers and callbacks, and TCP. docs/io.md is the guide.
#pragma once

#include "callback.hpp"
#include "endpoint.hpp"
#include "reactor.hpp"
#include "registration.hpp"
#include "tcp.hpp"
