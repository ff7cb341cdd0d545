// canopy::io TLS against real peers and bad clients, on loopback, on
// whichever backend CANOPY_IO_BACKEND names: our client against `openssl
// s_server`; `openssl s_client` (SNI, ALPN, a context chosen by name)
// against our server; curl --cacert against HTTPS (TLS 1.2 and 1.3,
// keep-alive); garbage for a ClientHello; a client that stops
// mid-handshake (ended by a timeout; the stream is unusable after).
// Fails, not skips, without openssl or curl: ./run.sh installs both.
// Through the public header, with docs/tls.md's two examples.
#include <doctest/doctest.h>
#include <sys/socket.h>

#include <atomic>
#include <canopy/io/tls.hpp>
#include <chrono>
#include <cstddef>
#include <fstream>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "tests/child_process.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/tls_test_support.hpp"
#include "tests/watchdog.hpp"

namespace canopy::testing {
namespace {

using namespace std::chrono_literals;
using io::endpoint;
using io::reactor;
using io::tcp_listener;
using io::tcp_stream;
using io::tls_context;
using io::tls_errc;
using tls = io::tls_stream<tcp_stream>;
namespace http = io::http;

tls_context server_context(const test_certificates& certs, const std::string& cert = "server.pem",
                           std::vector<std::string> alpn = {}) {
  io::tls_server_options options;
  options.certificate_chain_file = certs.path(cert);
  options.private_key_file = certs.path("server.key");
  options.alpn = std::move(alpn);
  return tls_context::server(options);
}

TEST_CASE("tls peers: our client against openssl s_server") {
  const watchdog guard("tls s_server", 60 * timeout_scale());
  const test_certificates certs;
  child_process server({"openssl", "s_server", "-accept", "127.0.0.1:0", "-cert",
                        certs.path("server.pem"), "-key", certs.path("server.key"), "-www"});
  REQUIRE(server.read_until("ACCEPT 127.0.0.1:", 20));
  REQUIRE(server.read_until("\n", 5));
  const std::string& said = server.output();
  const std::size_t at = said.find("ACCEPT 127.0.0.1:") + 17;
  const auto port = static_cast<std::uint16_t>(std::stoi(said.substr(at)));
  executor pool(io_config(2));
  io::tls_client_options options;
  options.ca_file = certs.path("ca.pem");
  const auto [page, error] = run(
      pool,
      [](endpoint address, tls_context context) -> task<std::pair<std::string, std::error_code>> {
        tls stream(co_await tcp_stream::connect(address), context, "localhost");
        co_await stream.handshake();
        co_await stream.write_all(bytes_of("GET / HTTP/1.0\r\n\r\n"));
        std::string page;
        std::error_code error;
        std::byte buffer[4096];
        while (const std::size_t got = co_await stream.read_some(buffer, error)) {
          page.append(reinterpret_cast<const char*>(buffer), got);
        }
        co_return std::pair{page, error};
      }(endpoint::loopback_v4(port), tls_context::client(options)),
      "the client");
  INFO("page:\n", page);
  CHECK(page.starts_with("HTTP/1.0 200 ok"));
  CHECK(page.find("TLSv1.3") != std::string::npos);  // s_server's report of the session
  CHECK(!error);                                     // s_server ends with close_notify
  pool.shutdown();
}

// A server that handshakes every connection and records what it saw.
task<void> record_handshakes(tcp_listener& listener, tls_context context, int count,
                             std::vector<std::string>* seen) {
  for (int i = 0; i < count; ++i) {
    tls stream(co_await listener.accept(), context);
    std::error_code error;
    co_await stream.handshake(error);
    seen->push_back(error ? error.message()
                          : std::string(stream.server_name()) + " " + std::string(stream.alpn()));
    std::byte buffer[256];
    while (co_await stream.read_some(buffer, error) > 0) {
    }
  }
}

TEST_CASE("tls peers: openssl s_client with SNI and ALPN; a context chosen by name") {
  const watchdog guard("tls s_client", 60 * timeout_scale());
  const test_certificates certs;
  loopback net;
  tls_context main = server_context(certs, "server.pem", {"x-other", "http/1.1"});
  main.add_server_name("other.example", server_context(certs, "other.pem", {"http/1.1"}));
  std::vector<std::string> seen;
  auto server = net.pool.spawn(record_handshakes(net.listener, main, 2, &seen));
  const std::string port = std::to_string(net.address.port());
  for (const std::string name : {"localhost", "other.example"}) {
    CAPTURE(name);
    child_process client({"openssl", "s_client", "-connect", "127.0.0.1:" + port, "-servername",
                          name, "-verify_hostname", name, "-alpn", "http/1.1", "-CAfile",
                          certs.path("ca.pem"), "-verify_return_error"});
    CHECK(client.wait(20) == 0);
    INFO("s_client said:\n", client.output());
    CHECK(client.output().find("Verify return code: 0 (ok)") != std::string::npos);
    CHECK(client.output().find("ALPN protocol: http/1.1") != std::string::npos);
  }
  REQUIRE(server.wait_for(10s));
  server.get();
  CHECK(seen == std::vector<std::string>{"localhost http/1.1", "other.example http/1.1"});
}

// HTTPS on a stop source, on two workers.
struct https_server {
  loopback net;
  std::stop_source stop;
  join_handle<std::error_code> serving;
  explicit https_server(const tls_context& context, http::server_options options = {})
      : serving(net.pool.spawn(http::serve(
            net.listener, context, options,
            [](const http::request& req) { return "you asked for " + std::string(req.target); },
            stop.get_token()))) {}
  ~https_server() {
    stop.request_stop();
    CHECK(serving.wait_for(10s));
  }
};

TEST_CASE(
    "tls peers: curl --cacert against HTTPS, TLS 1.2 and 1.3, two requests on one connection") {
  const watchdog guard("tls curl", 90 * timeout_scale());
  const test_certificates certs;
  https_server server(server_context(certs));
  const std::string base = "https://localhost:" + std::to_string(server.net.address.port());
  for (const auto& versions : {std::vector<std::string>{"--tlsv1.2", "--tls-max", "1.2"},
                               std::vector<std::string>{"--tlsv1.3"}}) {
    CAPTURE(versions[0]);
    std::vector<std::string> argv{"curl",
                                  "--silent",
                                  "--show-error",
                                  "--max-time",
                                  "20",
                                  "--cacert",
                                  certs.path("ca.pem"),
                                  "--write-out",
                                  " %{http_code} %{num_connects}\n"};
    argv.insert(argv.end(), versions.begin(), versions.end());
    argv.push_back(base + "/one");
    argv.push_back(base + "/two");
    child_process curl(argv);
    CHECK(curl.wait(30) == 0);
    CHECK(curl.output() == "you asked for /one 200 1\nyou asked for /two 200 0\n");
  }
}

TEST_CASE("tls peers: garbage for a ClientHello is a clear error, and the server goes on") {
  const watchdog guard("tls garbage", 60 * timeout_scale());
  const test_certificates certs;
  loopback net;
  std::vector<std::string> seen;
  auto server = net.pool.spawn(record_handshakes(net.listener, server_context(certs), 3, &seen));
  auto send_raw = [](endpoint address, std::string text) -> task<std::string> {
    tcp_stream peer = co_await tcp_stream::connect(address);
    co_await peer.write_all(bytes_of(text));
    std::string back;
    std::error_code error;
    std::byte buffer[512];
    while (const std::size_t got = co_await peer.read_some(buffer, error)) {
      back.append(reinterpret_cast<const char*>(buffer), got);
    }
    co_return back;
  };
  // Each ends: the server closes the connection (OpenSSL sends no alert
  // to a peer that does not speak TLS at all).
  CHECK(run(net.pool, send_raw(net.address, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "http").empty());
  run(net.pool, send_raw(net.address, std::string(300, '\x16') + "nonsense"), "bytes");
  // A third connection, well formed: the server still serves.
  child_process client({"openssl", "s_client", "-connect",
                        "127.0.0.1:" + std::to_string(net.address.port()), "-CAfile",
                        certs.path("ca.pem"), "-verify_return_error", "-brief"});
  CHECK(client.wait(20) == 0);
  REQUIRE(server.wait_for(10s));
  server.get();
  REQUIRE(seen.size() == 3);
  CHECK(seen[0] == "TLS: http request");
  INFO("garbage bytes gave: ", seen[1]);
  CHECK(seen[1].starts_with("TLS: "));
  CHECK(seen[1] != io::make_error_code(tls_errc::handshake_failed).message());  // names the cause
  CHECK(seen[2] == " ");  // no SNI, no ALPN: handshaken
}

TEST_CASE(
    "tls peers: a client that stops mid-handshake is ended by a timeout; the stream is unusable") {
  const watchdog guard("tls stalled handshake", 60 * timeout_scale());
  const test_certificates certs;
  loopback net;
  auto server = net.pool.spawn(
      [](tcp_listener& listener, tls_context context) -> task<std::pair<bool, std::error_code>> {
        tls stream(co_await listener.accept(), context);
        std::error_code error;
        const auto finished = co_await canopy::with_timeout(200ms, stream.handshake(error));
        std::byte buffer[16];
        std::error_code later;
        co_await stream.read_some(buffer, later);
        co_return std::pair{static_cast<bool>(finished) || stream.usable(), later};
      }(net.listener, server_context(certs)));
  // The client sends half a ClientHello, then nothing.
  run(
      net.pool,
      [](endpoint address) -> task<bool> {
        tcp_stream peer = co_await tcp_stream::connect(address);
        co_await peer.write_all(
            bytes_of(std::string_view("\x16\x03\x01\x01\x00\x01\x00\x00\xfc", 9)));
        co_await canopy::sleep_for(600ms);
        co_return true;
      }(net.address),
      "the stalled client");
  REQUIRE(server.wait_for(10s));
  const auto [finished_or_usable, later] = server.get();
  CHECK_FALSE(finished_or_usable);
  CHECK(later == tls_errc::unusable);
  CHECK(later.message().find("unusable") != std::string::npos);
}

TEST_CASE("tls peers: HTTPS lingers after a 413, so a client still sending its body reads it") {
  const watchdog guard("tls https 413", 60 * timeout_scale());
  const test_certificates certs;
  http::server_options options;
  options.limits.max_body_bytes = 1024;
  https_server server(server_context(certs), options);
  io::tls_client_options client_options;
  client_options.ca_file = certs.path("ca.pem");
  // A client that sends on before it looks for an answer, as curl does: a
  // server that closes with the body's rest unread resets the connection,
  // the client's next send fails and the 413 is never read.
  const auto [answer, send_error] = run(
      server.net.pool,
      [](endpoint address, tls_context context) -> task<std::pair<std::string, std::error_code>> {
        tls stream(co_await tcp_stream::connect(address), context, "localhost");
        co_await stream.handshake();
        const std::string part(64 * 1024, 'x');
        co_await stream.write_all(
            bytes_of("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n" + part));
        co_await canopy::sleep_for(300ms);  // the 413 went out, the server closed meanwhile
        std::error_code sent;
        co_await stream.write_all(bytes_of(part), sent);
        std::string answer;
        std::error_code error;
        std::byte buffer[1024];
        while (const std::size_t got = co_await stream.read_some(buffer, error)) {
          answer.append(reinterpret_cast<const char*>(buffer), got);
        }
        co_return std::pair{answer, sent};
      }(server.net.address, tls_context::client(client_options)),
      "the client");
  CHECK(!send_error);
  CHECK(answer.starts_with("HTTP/1.1 413 Content Too Large\r\n"));
  // curl, sending a body over the limit, reads the 413 (it failed with
  // "Failed sending data to the peer" now and then without the linger).
  const std::string body = certs.path("body.bin");
  {
    std::ofstream out(body, std::ios::binary);
    out << std::string(std::size_t{8} << 20, 'x');
  }
  const std::string url = "https://localhost:" + std::to_string(server.net.address.port()) + "/";
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    child_process curl({"curl", "--silent", "--show-error", "--max-time", "20", "--cacert",
                        certs.path("ca.pem"), "--header", "Expect:", "--data-binary", "@" + body,
                        "--output", "/dev/null", "--write-out", "%{http_code}", url});
    CHECK(curl.wait(30) == 0);
    CHECK(curl.output() == "413");
  }
}

TEST_CASE(
    "tls peers: HTTPS closes an idle connection, and answers a partial request with 408, "
    "each with close_notify") {
  const watchdog guard("tls https timeouts", 60 * timeout_scale());
  const test_certificates certs;
  http::server_options options;
  options.request_timeout = 300ms;
  https_server server(server_context(certs), options);
  io::tls_client_options client_options;
  client_options.ca_file = certs.path("ca.pem");
  for (const std::string sent : {"", "GET / HTTP/1.1\r\nHost: x\r\n"}) {
    CAPTURE(sent);
    const auto started = std::chrono::steady_clock::now();
    const auto [answer, error] = run(
        server.net.pool,
        [](endpoint address, tls_context context,
           std::string sent) -> task<std::pair<std::string, std::error_code>> {
          tls stream(co_await tcp_stream::connect(address), context, "localhost");
          co_await stream.handshake();
          if (!sent.empty()) {
            co_await stream.write_all(bytes_of(sent));
          }
          std::string answer;
          std::error_code error;
          std::byte buffer[1024];
          while (const std::size_t got = co_await stream.read_some(buffer, error)) {
            answer.append(reinterpret_cast<const char*>(buffer), got);
          }
          co_return std::pair{answer, error};
        }(server.net.address, tls_context::client(client_options), sent),
        "the client");
    const auto waited = std::chrono::steady_clock::now() - started;
    CHECK(waited >= 250ms);
    CHECK(!error);  // close_notify, not a truncation
    if (sent.empty()) {
      CHECK(answer.empty());
    } else {
      CHECK(answer.starts_with("HTTP/1.1 408 Request Timeout\r\n"));
    }
  }
}

// docs/tls.md's examples, as written there.
canopy::task<std::string> fetch(canopy::io::endpoint peer, canopy::io::tls_context context) {
  namespace io = canopy::io;
  io::tls_stream<io::tcp_stream> tls(co_await io::tcp_stream::connect(peer), context,
                                     "localhost");  // SNI and the name checked
  co_await tls.handshake();
  const std::string_view request = "GET / HTTP/1.0\r\n\r\n";
  co_await tls.write_all(std::as_bytes(std::span(request)));
  std::string page;
  std::byte buffer[4096];
  while (const std::size_t got = co_await tls.read_some(buffer)) {  // 0: close_notify
    page.append(reinterpret_cast<const char*>(buffer), got);
  }
  co_return page;
}

canopy::task<std::error_code> serve_https(canopy::io::tcp_listener& listener,
                                          canopy::io::tls_context context, std::stop_token stop) {
  namespace http = canopy::io::http;
  co_return co_await http::serve(
      listener, context, {},
      [](const http::request& req) { return "hello over TLS, " + std::string(req.target); }, stop);
}

TEST_CASE("tls peers: docs/tls.md examples: the client fetches from the HTTPS server") {
  const watchdog guard("tls docs examples", 60 * timeout_scale());
  const test_certificates certs;
  loopback net;
  std::stop_source stop;
  auto server = net.pool.spawn(serve_https(net.listener, server_context(certs), stop.get_token()));
  io::tls_client_options options;
  options.ca_file = certs.path("ca.pem");
  const std::string page =
      run(net.pool, fetch(net.address, tls_context::client(options)), "the docs' client");
  CHECK(page.starts_with("HTTP/1.1 200 OK\r\n"));
  CHECK(page.ends_with("\r\n\r\nhello over TLS, /"));
  stop.request_stop();
  REQUIRE(server.wait_for(10s));
  CHECK(!server.get());
}

}  // namespace
}  // namespace canopy::testing
