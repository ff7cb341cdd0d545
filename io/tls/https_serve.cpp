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

#include "../../coroutine/spawn.hpp"
#include "../http/http_connection_loop.hpp"
#include "../timer/timer_wait.hpp"
#include "https.hpp"

namespace canopy::io::http {

namespace {

using clock = std::chrono::steady_clock;
using detail::flush_outcome;

constexpr auto unbounded = std::chrono::milliseconds::max();

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

// The time left until `deadline`; time_point::max() (steady_deadline_after
// of a request_timeout of milliseconds::max()) is no limit.
std::chrono::milliseconds left_until(clock::time_point deadline) {
  if (deadline == clock::time_point::max()) {
    return unbounded;
  }
  return std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now());
}

// One read: the loop's receive() operation. Never ready before its wait:
// the TLS stream decides when bytes are there.
struct tls_read {
  std::span<std::byte> room;
  io::detail::io_result got;
  [[nodiscard]] static bool ready() noexcept { return false; }
  [[nodiscard]] io::detail::io_result result() const noexcept { return got; }
};

task<void> read_into(tls_stream<tcp_stream>& from, tls_read& read) {
  read.got.count = co_await from.read_some(read.room, read.got.error);
}

// The connection loop's link over TLS: every end the stream survived (an
// answer with close, an idle close, a stop, the client's close_notify)
// sends close_notify, so the client sees a clean end rather than a
// truncation; after an error or a write cut short the stream is unusable
// and the close is all there is. No lingering: close_notify ends the
// connection for the client.
class tls_link {
 public:
  using stream_type = tls_stream<tcp_stream>;
  static constexpr bool lingers = false;

  tls_link(stream_type& stream, const server_options& options) noexcept
      : stream_(&stream), options_(&options) {}

  [[nodiscard]] int fd() const noexcept { return stream_->next_layer().native_handle(); }

  // The handshake, bounded by request_timeout; a failed or late one closes
  // the connection quietly.
  task<bool> start() {
    std::error_code error;
    if (!co_await within(options_->request_timeout, stream_->handshake(error)) || error) {
      stream_->close();
      co_return false;
    }
    co_return true;
  }

  // Bounded as a whole by write_timeout (a TLS write is one task).
  task<flush_outcome> flush(std::string& out) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(out.data()),
                                           out.size());
    std::error_code error;
    if (!co_await within(options_->write_timeout, stream_->write_all(bytes, error))) {
      co_return flush_outcome::stalled;
    }
    if (error) {
      co_return flush_outcome::failed;
    }
    out.clear();
    co_return flush_outcome::sent;
  }

  [[nodiscard]] static tls_read receive(std::span<std::byte> room) noexcept {
    return {.room = room, .got = {}};
  }
  task<bool> wait(clock::time_point deadline, tls_read& read) {
    return within(left_until(deadline), read_into(*stream_, read));
  }

  task<void> end(bool /*reset*/, bool /*write_shut*/) {
    if (stream_->usable()) {
      std::error_code error;
      co_await within(options_->write_timeout, stream_->shutdown(error));
    }
    stream_->next_layer().shutdown(SHUT_WR);
    stream_->close();
  }

 private:
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
