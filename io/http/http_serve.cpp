// serve(): the accept loop, and the drain that ends it (http_server.hpp).
#include <exception>
#include <stop_token>
#include <utility>

#include "../../coroutine/race.hpp"
#include "../../coroutine/spawn.hpp"
#include "../../coroutine/stop_wait.hpp"
#include "../../task_group/task_group.hpp"
#include "../timer/timer_wait.hpp"
#include "http_server.hpp"

namespace canopy::io::http {

namespace {

// A detached task that ends with `failure`: the executor reports it as it
// reports any detached task's exception.
task<void> rethrown(std::exception_ptr failure) {
  std::rethrow_exception(std::move(failure));
  co_return;
}

// A connection task's exception (a handler's) goes where a detached task's
// would, as it happens: the group keeps none, so it stays flat, and the
// report does not wait for the accept loop to look. Where no task can be
// spawned (the executor shutting down) the group keeps it instead.
task<void> reported(task<void> connection) {
  std::exception_ptr failure;
  try {
    co_await std::move(connection);
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) {
    try {
      canopy::spawn_detached(rethrown(failure));
    } catch (...) {
      std::rethrow_exception(failure);
    }
  }
}

bool transient(std::error_code error) noexcept {
  return error == std::errc::too_many_files_open ||
         error == std::errc::too_many_files_open_in_system || error == std::errc::no_buffer_space ||
         error == std::errc::connection_aborted;
}

}  // namespace

task<std::error_code> serve(tcp_listener& listener, server_options options, handler respond,
                            std::stop_token stop) {
  detail::check_serving(options, respond);
  // One call of the maker per connection; the requests see none of it. A
  // named local, not a temporary inside the co_await: GCC 12 destroys such
  // temporaries' captures twice.
  detail::connection_maker connection = [options, respond](tcp_stream stream,
                                                           std::stop_token drain) {
    return serve_connection(std::move(stream), options, respond, std::move(drain));
  };
  co_return co_await detail::serve_with(listener, options, std::move(connection), std::move(stop));
}

task<std::error_code> detail::serve_with(tcp_listener& listener, server_options options,
                                         connection_maker connection, std::stop_token stop) {
  // The connections watch a source of serve's own, so that an accept error
  // drains them as a stop does; the caller's stop is forwarded to it (the
  // callback may run on any thread: request_stop() is thread-safe).
  std::stop_source drain;
  const auto forward = [&drain]() noexcept { drain.request_stop(); };
  const std::stop_callback<decltype(forward)> forwarding(stop, forward);
  task_group<void> connections;
  std::error_code failed;
  while (!stop.stop_requested()) {
    std::error_code error;
    tcp_stream stream;
    if (stop.stop_possible()) {
      // A race costs two child tasks per accept; a server that cannot be
      // stopped accepts without it.
      auto got = co_await canopy::race(listener.accept(error), canopy::stopped(stop));
      if (!got.has_value<0>()) {
        break;  // stopped
      }
      stream = std::move(got.get<0>());
    } else {
      stream = co_await listener.accept(error);
    }
    if (error) {
      if (transient(error)) {
        co_await canopy::sleep_for(std::chrono::milliseconds(10));  // let connections close
        continue;
      }
      failed = error;
      break;
    }
    connections.spawn_detached(reported(connection(std::move(stream), drain.get_token())));
  }
  drain.request_stop();
  auto ended = connections.all_ended();
  if (!co_await canopy::with_timeout(options.drain_timeout, ended)) {
    connections.cancel();  // past the deadline: the rest are closed
  }
  co_await connections.close();  // waits for the cancelled ones to end
  co_return failed;
}

}  // namespace canopy::io::http
