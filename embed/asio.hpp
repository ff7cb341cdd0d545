// Boost.Asio interop, both directions (docs/embedding.md).
//
// 1. Asio work on Canopy's workers. canopy::asio_context wraps an executor
//    as an Asio execution context; its executor_type meets Asio's executor
//    requirements (Boost 1.74, the standard-executor model), so
//
//      canopy::asio_context context(pool);
//      auto on_canopy = context.get_executor();
//      boost::asio::post(on_canopy, handler);                   // a Canopy task
//      boost::asio::co_spawn(on_canopy, awaitable(), boost::asio::detached);
//      socket.async_read_some(buffer, boost::asio::bind_executor(on_canopy, handler));
//
//    run handlers and awaitables as Canopy tasks: a socket or timer of an
//    io_context completes there, and its handler runs on a Canopy worker.
//    execute() is spawn_detached(): it never runs the handler inline nor
//    waits for it to finish (Asio's blocking.never); exceptions the handler
//    throws go to executor_config::on_detached_exception. Its own errors
//    are spawn_detached's: spawn_error(errc::shut_down) after shutdown
//    began; at capacity (executor_config::max_leaves full) a call
//    from a thread that is not a worker waits for room, one from a worker
//    throws spawn_error(errc::at_capacity) (a worker never waits).
//
// 2. Canopy inside an io_context loop. canopy::asio_host watches the
//    executor's notify descriptor with posix::stream_descriptor::async_wait
//    and calls run_until_idle() on the io_context's thread whenever it is
//    readable — so a host-driven executor (worker_count = 0) runs inside
//    io_context::run(), and with owned workers, tasks posted back with
//    executor::post() or co_await canopy::resume_on_host() continue on the
//    io_context's thread.
//
// Threads and lifetimes: the asio_context must outlive every executor_type
// copy and the Canopy executor must outlive the asio_context. An asio_host
// belongs to an io_context run by one thread at a time; destroy it on that
// thread (or after the io_context stopped), and before the Canopy executor.
#pragma once

#include <unistd.h>

#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/system/error_code.hpp>
#include <cerrno>
#include <memory>
#include <system_error>
#include <utility>

#include "../executor/executor.hpp"

namespace canopy {

class asio_context : public boost::asio::execution_context {
 public:
  class executor_type;

  explicit asio_context(executor& pool) noexcept : pool_(&pool) {}

  [[nodiscard]] executor_type get_executor() noexcept;
  [[nodiscard]] executor& pool() const noexcept { return *pool_; }

 private:
  executor* pool_;
};

class asio_context::executor_type {
 public:
  explicit executor_type(asio_context& context) noexcept : context_(&context) {}

  // Asio's properties: which context, and blocking.never: execute() spawns
  // a task and returns without running or awaiting it (it may wait for
  // room at capacity off a worker: see the top of this file).
  [[nodiscard]] asio_context& query(boost::asio::execution::context_t /*unused*/) const noexcept {
    return *context_;
  }
  static constexpr boost::asio::execution::blocking_t query(
      boost::asio::execution::blocking_t /*unused*/) noexcept {
    return boost::asio::execution::blocking.never;
  }
  [[nodiscard]] executor_type require(
      boost::asio::execution::blocking_t::never_t /*unused*/) const noexcept {
    return *this;
  }

  // Run fn as a Canopy task (spawn_detached).
  template <class Fn>
  void execute(Fn&& fn) const {
    context_->pool().spawn_detached(std::forward<Fn>(fn));
  }

  friend bool operator==(const executor_type& a, const executor_type& b) noexcept {
    return a.context_ == b.context_;
  }
  friend bool operator!=(const executor_type& a, const executor_type& b) noexcept {
    return !(a == b);
  }

 private:
  asio_context* context_;
};

inline asio_context::executor_type asio_context::get_executor() noexcept {
  return executor_type(*this);
}

// Runs a Canopy executor's host work on an io_context's thread, driven by
// the notify descriptor (see the top of this file).
class asio_host {
 public:
  asio_host(boost::asio::io_context& io, executor& pool)
      : state_(std::make_shared<state>(io, pool)) {
    wait_for_work(state_);
  }
  ~asio_host() {
    state_->stopped = true;
    boost::system::error_code ignored;
    state_->descriptor.cancel(ignored);
  }
  asio_host(const asio_host&) = delete;
  asio_host& operator=(const asio_host&) = delete;

  // Task runs made from the io_context so far.
  [[nodiscard]] std::size_t runs() const noexcept { return state_->runs; }

 private:
  struct state {
    state(boost::asio::io_context& io, executor& pool)
        : pool(pool), descriptor(io, duplicate(pool.notify_fd())) {}
    executor& pool;
    // A duplicate of the notify descriptor: the stream_descriptor closes
    // its own, the executor keeps the original.
    boost::asio::posix::stream_descriptor descriptor;
    bool stopped = false;
    std::size_t runs = 0;
  };

  static int duplicate(int fd) {
    const int copy = ::dup(fd);
    if (copy < 0) {
      throw std::system_error(errno, std::system_category(),
                              "canopy::asio_host: dup() of the executor's notify descriptor");
    }
    return copy;
  }

  // The handler holds the state, so a completion after ~asio_host finds it
  // alive and stopped.
  static void wait_for_work(const std::shared_ptr<state>& shared) {
    shared->descriptor.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                                  [shared](const boost::system::error_code& error) {
                                    if (error || shared->stopped) {
                                      return;
                                    }
                                    shared->runs += shared->pool.run_until_idle();
                                    wait_for_work(shared);
                                  });
  }

  std::shared_ptr<state> state_;
};

}  // namespace canopy
