// <canopy/embed/asio.hpp> — Canopy inside a Boost.Asio program and the
// other way round: an Asio executor that runs handlers as Canopy tasks, and
// a Canopy executor driven from an io_context (docs/embedding.md). Needs
// Boost.Asio's headers (libboost-dev; written for Boost 1.74's
// standard-executor model); link canopy.
//
// Reference (namespace canopy):
//   asio_context(executor& pool): wraps `pool` as an Asio execution
//     context. get_executor() -> asio_context::executor_type, pool().
//   asio_context::executor_type: meets Asio's executor requirements, so
//     boost::asio::post(ex, handler), co_spawn(ex, awaitable, detached) and
//     bind_executor(ex, handler) run handlers and awaitables as Canopy
//     tasks on the pool's workers (an io_context's socket or timer
//     completes there, its handler runs on a Canopy worker). execute(fn)
//     is pool.spawn_detached(fn): it never runs fn inline (query(blocking)
//     answers never), but at capacity it waits for a free slot off a
//     worker and throws spawn_error(errc::at_capacity) on one, as
//     spawn_detached does; after the pool's shutdown began,
//     spawn_error(errc::shut_down). fn's exception goes to
//     executor_config::on_detached_exception. Copies compare equal when
//     they name the same context.
//   asio_host(boost::asio::io_context& io, executor& pool): watches the
//     executor's notify_fd() (a dup of it) with an async_wait on `io`, and
//     calls pool.run_until_idle() on the io_context's thread whenever it is
//     readable. So a host-driven executor (worker_count = 0) runs inside
//     io.run(); with owned workers, tasks posted with executor::post() or
//     continued with co_await canopy::resume_on_host() run on the
//     io_context's thread. runs() -> task runs made so far. Not copyable.
//     The constructor throws std::system_error if dup() fails.
// Threads and lifetimes: the asio_context must outlive every executor_type
// copy, and the Canopy executor the asio_context. An asio_host belongs to an
// io_context run by one thread at a time: destroy it on that thread (or
// after the io_context stopped), and before the Canopy executor. The
// host-role rules (one host thread at a time) are the executor's
// (<canopy/executor.hpp>, docs/embedding.md).
#pragma once

#include "../canopy.hpp"
#include "../detail/embed/asio.hpp"
