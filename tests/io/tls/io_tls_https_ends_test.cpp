// How an HTTPS connection ends, on loopback, on whichever backend
// CANOPY_IO_BACKEND names: a client that reads nothing is reset once a
// write made no progress for write_timeout (a complete answer and a
// streamed one alike), its unsent answer dropped rather than left queued in
// the kernel behind a FIN; a connection idle in keep-alive when serve()'s
// drain begins gets close_notify before the close, as an idle close does;
// one that has sent nothing since the accept closes at once at the drain.
// Certificates are made at run time (tls_test_support.hpp); fails, not
// skips, without openssl: ./run.sh installs it.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <canopy/io.hpp>
#include <canopy/io/http.hpp>
#include <canopy/io/tls.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/tls_test_support.hpp"
#include "tests/watchdog.hpp"

namespace canopy::testing {
namespace {

using namespace std::chrono_literals;
using io::tcp_stream;
using io::tls_context;
using tls = io::tls_stream<tcp_stream>;
namespace http = io::http;

tls_context server_context(const test_certificates& certs) {
  io::tls_server_options options;
  options.certificate_chain_file = certs.path("server.pem");
  options.private_key_file = certs.path("server.key");
  return tls_context::server(options);
}

tls_context client_context(const test_certificates& certs) {
  io::tls_client_options options;
  options.ca_file = certs.path("ca.pem");
  return tls_context::client(options);
}

// More than the server's send buffer and the client's receive buffer hold
// together (the client's is made small below), so a client that reads
// nothing stalls the write.
const std::string& big_body() {
  static const std::string body(16 << 20, 'b');
  return body;
}

// /big: the big body as one answer; /stream: 64 KiB pieces until a write
// fails (bounded); anything else: "hello".
http::router routes() {
  http::router all;
  all.get("/big", [](const http::request&) { return big_body(); })
      .get("/stream",
           [](const http::request&, http::response_writer& body) -> task<void> {
             const std::string piece(64 << 10, 's');
             for (int i = 0; i < 1024; ++i) {
               if (!co_await body.write(piece)) {
                 co_return;
               }
             }
           })
      .get("/*", [](const http::request&) { return std::string("hello"); });
  return all;
}

struct https_server {
  loopback net;
  std::stop_source stop;
  join_handle<std::error_code> serving;

  https_server(const tls_context& context, const http::server_options& options)
      : serving(net.pool.spawn(
            http::serve(net.listener, context, options, routes(), stop.get_token()))) {}
  ~https_server() {
    stop.request_stop();
    CHECK(serving.wait_for(10s));
  }
};

// A TLS client whose receive buffer is small (set after the connect, which
// also stops its growing), that has sent `request`.
task<tls> connect_and_send(io::endpoint address, tls_context context, std::string request,
                           bool small_buffer) {
  tcp_stream tcp = co_await tcp_stream::connect(address);
  if (small_buffer) {
    const int size = 4096;
    REQUIRE(::setsockopt(tcp.native_handle(), SOL_SOCKET, SO_RCVBUF, &size, sizeof size) == 0);
  }
  tls stream(std::move(tcp), context, "localhost");
  co_await stream.handshake();
  co_await stream.write_all(bytes_of(request));
  co_return stream;
}

// The client socket's TCP state (TCP_CLOSE once a reset arrived; a FIN
// queued at the server behind the unsent answer never arrives).
int tcp_state(int fd) {
  tcp_info info{};
  socklen_t size = sizeof info;
  REQUIRE(::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) == 0);
  return info.tcpi_state;
}

TEST_CASE("https ends: a client that reads nothing is reset after write_timeout") {
  const watchdog guard("https write stall", 120 * timeout_scale());
  const test_certificates certs;
  http::server_options options;
  options.write_timeout = 300ms;
  https_server server(server_context(certs), options);
  for (const std::string target : {"/big", "/stream"}) {
    CAPTURE(target);
    const std::uint64_t before = http::counters().write_timeouts;
    tls client =
        run(server.net.pool,
            connect_and_send(server.net.address, client_context(certs),
                             "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n\r\n", true),
            "the client's connect and request");
    // The server gives up on its own: nothing here reads.
    REQUIRE(eventually([&] { return http::counters().write_timeouts > before; }, 20));
    // A reset reaches the client although its receive buffer is full; a
    // close would have queued its FIN behind megabytes nobody reads.
    CHECK(eventually([&] { return tcp_state(client.next_layer().native_handle()) == TCP_CLOSE; },
                     10));
    client.close();
  }
}

TEST_CASE(
    "https ends: the drain closes a keep-alive connection idle between requests with "
    "close_notify") {
  const watchdog guard("https idle drain", 60 * timeout_scale());
  const test_certificates certs;
  http::server_options options;
  options.request_timeout = 30s;  // not the idle close: the drain's
  https_server server(server_context(certs), options);
  const tls_context client = client_context(certs);
  tls stream = run(
      server.net.pool,
      [](io::endpoint address, tls_context context) -> task<tls> {
        tls stream = co_await connect_and_send(address, context,
                                               "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", false);
        std::string answer;
        std::byte buffer[1024];
        while (!answer.ends_with("\r\n\r\nhello")) {
          const std::size_t got = co_await stream.read_some(buffer);
          REQUIRE(got > 0);
          answer.append(reinterpret_cast<const char*>(buffer), got);
        }
        co_return stream;
      }(server.net.address, client),
      "the first request");
  // The connection now waits idle for its next request (the pause lets
  // its read start waiting; the check holds either way).
  std::this_thread::sleep_for(200ms);
  server.stop.request_stop();
  const auto [got, error] = run(
      server.net.pool,
      [](tls& stream) -> task<std::pair<std::size_t, std::error_code>> {
        std::error_code error;
        std::byte buffer[64];
        const std::size_t got = co_await stream.read_some(buffer, error);
        co_return std::pair{got, error};
      }(stream),
      "the client's read");
  CHECK(got == 0);
  CHECK_MESSAGE(!error, error.message());  // close_notify, not a truncation
  CHECK(server.serving.wait_for(10s));
  stream.close();
}

TEST_CASE("https ends: the drain closes at once a connection that has sent nothing yet") {
  // As the plain server closes one idle since its accept (a browser's
  // preconnect, a port check): the handshake has not begun, so serve()
  // does not wait drain_timeout for it.
  const watchdog guard("https drain of a silent connection", 60 * timeout_scale());
  const test_certificates certs;
  http::server_options options;
  options.request_timeout = 30s;
  options.drain_timeout = 20s;
  https_server server(server_context(certs), options);
  const std::uint64_t before = http::counters().connections;
  tcp_stream silent = run(
      server.net.pool,
      [](io::endpoint address) -> task<tcp_stream> {
        co_return co_await tcp_stream::connect(address);
      }(server.net.address),
      "the connect");
  REQUIRE(eventually([before] { return http::counters().connections > before; }));
  std::this_thread::sleep_for(200ms);  // its handshake now waits for the first bytes
  const auto stopped = std::chrono::steady_clock::now();
  server.stop.request_stop();
  CHECK(server.serving.wait_for(5s));  // was drain_timeout (20 s)
  CHECK(std::chrono::steady_clock::now() - stopped < 5s);
  std::byte buffer[16];
  CHECK(run(server.net.pool, silent.read_some(buffer), "the client's read") == 0);  // EOF
  silent.close();
}

}  // namespace
}  // namespace canopy::testing
