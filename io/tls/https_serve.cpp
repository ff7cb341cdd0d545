// HTTPS: the HTTP/1.1 connection over a tls_stream (https.hpp). The loop is
// the plain connection's (io/http/http_connection_loop.hpp), streamed
// answers included; this link moves its bytes through the TLS stream, each
// wait bounded by with_timeout on its task.
#include <sys/socket.h>

#include <chrono>
#include <span>
#include <stop_token>
#include <string>
#include <system_error>
#include <utility>

#include "../../atomics/atomics.hpp"
#include "../../coroutine/spawn.hpp"
#include "../http/http_connection_loop.hpp"
#include "../timer/timer_wait.hpp"
#include "https.hpp"
#include "tls_engine.hpp"

namespace canopy::io::http {

namespace {

using clock = std::chrono::steady_clock;
using detail::flush_outcome;

constexpr auto unbounded = std::chrono::milliseconds::max();

// What is left until `deadline` (time_point::max(): unbounded; past: zero,
// which within() takes for a timeout).
std::chrono::milliseconds remaining(clock::time_point deadline) noexcept {
  if (deadline == clock::time_point::max()) {
    return unbounded;
  }
  const clock::time_point now = clock::now();
  return deadline <= now ? std::chrono::milliseconds::zero()
                         : std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
}

// `work` within `limit` (unbounded: no timer); false on the timeout, after
// which the stream is unusable if it was mid-record (tls_stream's cancel rule).
template <class T>
task<bool> within(std::chrono::milliseconds limit, task<T> work) {
  if (limit == unbounded) {
    co_await std::move(work);
    co_return true;
  }
  if (limit <= std::chrono::milliseconds::zero()) {
    co_return false;
  }
  const auto done = co_await canopy::with_timeout(limit, std::move(work));
  co_return static_cast<bool>(done);
}

// The connection loop's link over TLS: every end the stream survived (an
// answer with close, an idle close, a stop, the client's close_notify)
// sends close_notify, so the client sees a clean end rather than a
// truncation; after an error or a write cut short the stream is unusable
// and the close is all there is. It lingers as the plain link does:
// close_notify does not keep the kernel from resetting a connection closed
// with input unread, and the reset discards the answer at a client still
// sending (curl sending a body over the limit lost its 413 about every
// other time, failing with "Failed sending data to the peer").
class tls_link {
 public:
  using stream_type = tls_stream<tcp_stream>;
  static constexpr bool lingers = true;

  tls_link(stream_type& stream, const server_options& options) noexcept
      : stream_(&stream), options_(&options) {}

  [[nodiscard]] int fd() const noexcept { return stream_->next_layer().native_handle(); }

  // The handshake, bounded by request_timeout; a failed or late one closes
  // the connection quietly. Until the client's first bytes arrive the
  // connection is idle, as a plain one is between its accept and its
  // first request: the drain's close_if_idle (the loop's stop callback)
  // ends the wait at once, instead of drain_timeout later (a browser's
  // preconnect, a port check). The bytes are the handshake's first.
  task<bool> start(detail::idle_watch& watch, const std::stop_token& stop) {
    const clock::time_point deadline = detail::deadline_after(options_->request_timeout);
    io::detail::tls_engine& engine = stream_->engine_for_fiber_forms();
    watch.idle.store(true, canopy::detail::atomics::relaxed);
    canopy::detail::atomics::fence_seq_cst();  // pairs with close_if_idle's fence
    if (stop.stop_requested()) {
      co_return false;
    }
    std::error_code error;
    const std::size_t got =
        co_await stream_->next_layer().read_some_until(engine.input_room(), deadline, error);
    watch.idle.store(false, canopy::detail::atomics::relaxed);
    if (error || got == 0 || stop.stop_requested()) {
      co_return false;  // late, closed, reset, or shut by the drain
    }
    engine.feed(engine.input_room().first(got));
    co_return co_await within(remaining(deadline), stream_->handshake(error)) && !error;
  }

  // Each wait for the socket bounded by write_timeout, as the plain
  // server's sends are; the stream's own bounded forms race the socket's
  // wait with the time, so a request costs no child task.
  task<void> write(std::span<const std::byte> bytes, std::error_code& error) {
    return stream_->write_all_within(bytes, options_->write_timeout, error);
  }
  task<std::size_t> read(std::span<std::byte> room, clock::time_point deadline,
                         std::error_code& error) {
    return stream_->read_some_until(room, deadline, error);
  }

  [[nodiscard]] bool has_unread_input() const noexcept {
    return detail::has_unread_input(stream_->next_layer());
  }
  // close_notify after the answers, then the plain link's lingering close
  // of the socket under it (what the client still sends is dropped
  // undecrypted).
  task<void> linger() {
    co_await notify_close();
    co_await detail::linger_close(stream_->next_layer());
  }

  // The drain's idle watch shut the socket's reading side under a waiting
  // read, which then met the input's end as a truncation and left the
  // stream unusable; but no record was cut (the read waited between
  // requests), so close_notify can still go: the client sees the drain's
  // close as a clean end, as it sees an idle close (docs/tls.md).
  void after_idle_shut() noexcept {
    (void)stream_->engine_for_fiber_forms().reopen_after_input_end();
  }

  task<void> end(bool reset, bool write_shut) {
    if (reset) {
      // A write that made no progress for write_timeout: reset, as the
      // plain link does, so that the unsent answer is dropped rather than
      // left queued in the kernel (FIN-WAIT-1 with megabytes in Send-Q)
      // for a client that reads nothing. No close_notify: the stream is cut
      // mid-record, and it could not go out past the stalled bytes anyway.
      detail::reset_on_close(fd());
    } else if (!write_shut) {
      co_await notify_close();
      stream_->next_layer().shutdown(SHUT_WR);
    }
    stream_->close();
  }

 private:
  // Bounded by write_timeout; serve()'s drain cancels a connection still
  // here at drain_timeout, which ends this wait too, so it never holds the
  // drain past its deadline.
  task<void> notify_close() {
    if (stream_->usable()) {
      std::error_code error;
      co_await within(options_->write_timeout, stream_->shutdown(error));
    }
  }

  stream_type* stream_;
  const server_options* options_;
};

}  // namespace

task<void> serve_connection(tls_stream<tcp_stream> stream, server_options options, handler respond,
                            std::stop_token stop) {
  return detail::run_connection<tls_link>(std::move(stream), std::move(options), std::move(respond),
                                          std::move(stop));
}

task<std::error_code> serve(tcp_listener& listener, tls_context context, server_options options,
                            handler respond, std::stop_token stop) {
  detail::check_serving(options, respond);
  // A named local, not a temporary inside the co_await (http_serve.cpp).
  detail::connection_maker connection = [options, respond, context](tcp_stream stream,
                                                                    std::stop_token drain) {
    return serve_connection(tls_stream<tcp_stream>(std::move(stream), context), options, respond,
                            std::move(drain));
  };
  co_return co_await detail::serve_with(listener, options, std::move(connection), std::move(stop));
}

}  // namespace canopy::io::http
