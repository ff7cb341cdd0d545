// Streamed answers (response_writer) over HTTPS, on loopback, on whichever
// backend CANOPY_IO_BACKEND names: the head and the first piece reach our
// TLS client while the handler still runs, the chunked body arrives intact
// (pieces larger than a TLS record too) with the request pipelined behind
// it answered after; curl --cacert decodes such an answer. Fails, not
// skips, without openssl or curl: ./run.sh installs both.
#include <doctest/doctest.h>

#include <atomic>
#include <canopy/io.hpp>
#include <canopy/io/http.hpp>
#include <canopy/io/tls.hpp>
#include <chrono>
#include <cstddef>
#include <stop_token>
#include <string>
#include <string_view>
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

// The pieces /pieces streams: small ones, and two larger than a TLS record.
std::vector<std::string> pieces() {
  std::vector<std::string> all;
  for (int i = 0; i < 200; ++i) {
    all.push_back("piece " + std::to_string(i) + "\n");
  }
  all.emplace_back(40000, 'x');
  all.emplace_back(17000, 'y');
  return all;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string all;
  for (const auto& part : parts) {
    all += part;
  }
  return all;
}

// /stream: "first", then waits (bounded) until the client says it has read
// it, then the pieces; "late" marks a client that never saw "first" while
// the handler ran (a body collected and sent whole). /pieces: the pieces at
// once. Anything else: a complete answer "after".
struct stream_server {
  loopback net;
  std::atomic<bool> client_saw_first{false};
  std::stop_source stop;
  join_handle<std::error_code> serving;

  explicit stream_server(const tls_context& context)
      : serving(net.pool.spawn(http::serve(
            net.listener, context, http::server_options{},
            [this](const http::request& req, http::response_writer& body) -> task<void> {
              if (req.target == "/stream") {
                if (!co_await body.write("first")) {
                  co_return;
                }
                const auto give_up =
                    std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<long>(5000 * timeout_scale()));
                // Acquire: pairs with the client's release store; nothing
                // else is read through it, the order is for the reader.
                while (!client_saw_first.load(std::memory_order_acquire) &&
                       std::chrono::steady_clock::now() < give_up) {
                  co_await canopy::sleep_for(5ms);
                }
                if (!client_saw_first.load(std::memory_order_acquire) &&
                    !co_await body.write("late")) {
                  co_return;
                }
              } else if (req.target != "/pieces") {
                body.head().body = "after";
                co_return;
              }
              for (const auto& piece : pieces()) {
                if (!co_await body.write(piece)) {
                  co_return;
                }
              }
            },
            stop.get_token()))) {}
  ~stream_server() {
    stop.request_stop();
    CHECK(serving.wait_for(10s));
  }
};

// Over TLS: sends `requests`, reads until `mark` has arrived, says so
// (`saw`), then reads to the server's close_notify; all it read.
task<std::string> fetch(io::endpoint address, tls_context context, std::string requests,
                        std::string mark, std::atomic<bool>* saw) {
  tls stream(co_await tcp_stream::connect(address), context, "localhost");
  co_await stream.handshake();
  co_await stream.write_all(bytes_of(requests));
  std::string got;
  std::byte buffer[16384];
  for (;;) {
    std::error_code error;
    const std::size_t count = co_await stream.read_some(buffer, error);
    REQUIRE_MESSAGE(!error, error.message());
    if (count == 0) {
      break;
    }
    got.append(reinterpret_cast<const char*>(buffer), count);
    if (saw != nullptr && got.find(mark) != std::string::npos) {
      saw->store(true, std::memory_order_release);  // pairs with the handler's acquire
      saw = nullptr;
    }
  }
  stream.close();
  co_return got;
}

// The body of a chunked answer at the front of `text` (its head already
// removed); the rest of `text` is left in `text`. Fails the test on bad
// framing.
std::string dechunk(std::string& text) {
  std::string body;
  for (;;) {
    const std::size_t line_end = text.find("\r\n");
    REQUIRE(line_end != std::string::npos);
    const std::size_t size = std::stoul(text.substr(0, line_end), nullptr, 16);
    REQUIRE(text.size() >= line_end + 2 + size + 2);
    body.append(text, line_end + 2, size);
    REQUIRE(text.compare(line_end + 2 + size, 2, "\r\n") == 0);
    text.erase(0, line_end + 2 + size + 2);
    if (size == 0) {
      return body;
    }
  }
}

TEST_CASE("https stream: pieces reach the client while the handler runs; the body is intact") {
  const watchdog guard("https stream", 60 * timeout_scale());
  const test_certificates certs;
  stream_server server(server_context(certs));
  std::string got = run(server.net.pool,
                        fetch(server.net.address, client_context(certs),
                              "GET /stream HTTP/1.1\r\nHost: localhost\r\n\r\n"
                              "GET /after HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                              "first", &server.client_saw_first),
                        "the HTTPS fetch");
  const std::size_t head_end = got.find("\r\n\r\n");
  REQUIRE(head_end != std::string::npos);
  const std::string head = got.substr(0, head_end + 4);
  CAPTURE(head);
  CHECK(head.starts_with("HTTP/1.1 200 OK\r\n"));
  CHECK(head.find("\r\nTransfer-Encoding: chunked\r\n") != std::string::npos);
  CHECK(head.find("Content-Length") == std::string::npos);
  got.erase(0, head_end + 4);
  const std::string body = dechunk(got);
  CHECK(body.size() == 5 + joined(pieces()).size());
  CHECK(body == "first" + joined(pieces()));  // no "late": "first" came while the handler ran
  // The request pipelined behind it, answered after its last chunk.
  CHECK(got.starts_with("HTTP/1.1 200 OK\r\n"));
  CHECK(got.ends_with("\r\n\r\nafter"));
}

TEST_CASE("https stream: curl --cacert decodes a streamed chunked answer") {
  const watchdog guard("https stream curl", 90 * timeout_scale());
  const test_certificates certs;
  stream_server server(server_context(certs));
  const std::string base = "https://localhost:" + std::to_string(server.net.address.port());
  child_process curl({"curl", "--silent", "--show-error", "--max-time", "20", "--include",
                      "--cacert", certs.path("ca.pem"), base + "/pieces"});
  REQUIRE(curl.wait(30) == 0);
  const std::string out = curl.output();
  const std::size_t head_end = out.find("\r\n\r\n");
  REQUIRE(head_end != std::string::npos);
  CAPTURE(out.substr(0, head_end));
  CHECK(out.starts_with("HTTP/1.1 200 OK\r\n"));
  CHECK(out.find("\r\nTransfer-Encoding: chunked\r\n") != std::string::npos);
  CHECK(out.substr(head_end + 4) == joined(pieces()));
}

}  // namespace
}  // namespace canopy::testing
