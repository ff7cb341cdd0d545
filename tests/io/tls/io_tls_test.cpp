// canopy::io TLS (tls_context, tls_stream over tcp_stream) on loopback, on
// whichever backend CANOPY_IO_BACKEND names: an in-process client and
// server moving a MiB both ways at once, buffered_reader over TLS, our
// client against `openssl s_server`, `openssl s_client` (SNI, ALPN)
// against our server, and the faults: garbage for a ClientHello, a client
// that stops mid-handshake, a close without close_notify, expired,
// self-signed and wrong-host certificates, an unknown CA, a version
// mismatch, a key that does not match its certificate.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/buffered_reader.hpp"
#include "io/io.hpp"
#include "io/tls/tls_stream.hpp"
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

tls_context server_context(const test_certificates& certs, const std::string& cert = "server.pem",
                           const std::string& key = "server.key",
                           std::vector<std::string> alpn = {}) {
  io::tls_server_options options;
  options.certificate_chain_file = certs.path(cert);
  options.private_key_file = certs.path(key);
  options.alpn = std::move(alpn);
  return tls_context::server(options);
}

tls_context client_context(const test_certificates& certs, std::vector<std::string> alpn = {}) {
  io::tls_client_options options;
  options.ca_file = certs.path("ca.pem");
  options.alpn = std::move(alpn);
  return tls_context::client(options);
}

// The server's side of one connection: the handshake's error (or none).
task<std::error_code> accept_and_handshake(tcp_listener& listener, tls_context context,
                                           std::optional<tls>* kept = nullptr) {
  tcp_stream peer = co_await listener.accept();
  tls stream(std::move(peer), context);
  std::error_code error;
  co_await stream.handshake(error);
  if (kept != nullptr) {
    kept->emplace(std::move(stream));
  }
  co_return error;
}

// The client's side: connect, handshake; the handshake's error.
task<std::error_code> connect_and_handshake(endpoint address, tls_context context,
                                            std::string host) {
  tcp_stream peer = co_await tcp_stream::connect(address);
  tls stream(std::move(peer), context, host);
  std::error_code error;
  co_await stream.handshake(error);
  co_return error;
}

// The client's error against a server presenting `cert`.
std::error_code client_error_against(const test_certificates& certs, const std::string& cert,
                                     const std::string& key, const std::string& host,
                                     tls_context client) {
  loopback net;
  auto server =
      net.pool.spawn(accept_and_handshake(net.listener, server_context(certs, cert, key)));
  const std::error_code error =
      run(net.pool, connect_and_handshake(net.address, client, host), "the client's handshake");
  CHECK(server.wait_for(std::chrono::seconds(10)));
  CHECK(server.get());  // the server fails too: the client's alert
  return error;
}

TEST_CASE("tls: a client and a server move a MiB both ways at once; ALPN; close_notify is EOF") {
  const watchdog guard("tls echo", 120 * timeout_scale());
  const test_certificates certs;
  loopback net;
  constexpr std::size_t total = 1 << 20;
  std::string payload(total, '\0');
  for (std::size_t i = 0; i < total; ++i) {
    payload[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);
  }
  // The server echoes every byte back until the client's close_notify,
  // then sends its own.
  auto server =
      net.pool.spawn([](tcp_listener& listener, tls_context context) -> task<std::string> {
        tls stream(co_await listener.accept(), context);
        co_await stream.handshake();
        const std::string seen =
            std::string(stream.alpn()) + " " + std::string(stream.server_name());
        std::vector<std::byte> buffer(7000);
        for (;;) {
          const std::size_t got = co_await stream.read_some(buffer);
          if (got == 0) {
            break;
          }
          co_await stream.write_all(std::span(buffer).first(got));
        }
        co_await stream.shutdown();
        co_return seen;
      }(net.listener, server_context(certs, "server.pem", "server.key", {"x-canopy", "http/1.1"})));

  auto client = [](endpoint address, tls_context context,
                   const std::string* payload) -> task<std::string> {
    tls stream(co_await tcp_stream::connect(address), context, "localhost");
    co_await stream.handshake();
    CHECK(stream.alpn() == "http/1.1");
    // One task writes while this one reads (one read and one write at once).
    auto writer = canopy::spawn([](tls* to, const std::string* data) -> task<void> {
      for (std::size_t at = 0; at < data->size(); at += 100'000) {
        co_await to->write_all(bytes_of(std::string_view(*data).substr(at, 100'000)));
      }
      co_await to->shutdown();
    }(&stream, payload));
    std::string echoed;
    std::vector<std::byte> buffer(5000);
    for (;;) {
      const std::size_t got = co_await stream.read_some(buffer);  // 0: the server's close_notify
      if (got == 0) {
        break;
      }
      echoed.append(reinterpret_cast<const char*>(buffer.data()), got);
    }
    co_await std::move(writer);
    co_return echoed;
  };
  const std::string echoed = run(
      net.pool, client(net.address, client_context(certs, {"http/1.1"}), &payload), "the client");
  CHECK(echoed.size() == payload.size());
  CHECK(echoed == payload);
  REQUIRE(server.wait_for(10s));
  CHECK(server.get() == "http/1.1 localhost");
}

TEST_CASE("tls: buffered_reader reads lines over a tls_stream") {
  const watchdog guard("tls buffered", 60 * timeout_scale());
  const test_certificates certs;
  loopback net;
  auto server = net.pool.spawn([](tcp_listener& listener, tls_context context) -> task<void> {
    tls stream(co_await listener.accept(), context);
    co_await stream.handshake();
    co_await stream.write_all(bytes_of("first line\nsecond"));
    co_await stream.write_all(bytes_of(" line\nthird\n"));
    co_await stream.shutdown();
  }(net.listener, server_context(certs)));
  auto lines = run(
      net.pool,
      [](endpoint address, tls_context context) -> task<std::vector<std::string>> {
        tls stream(co_await tcp_stream::connect(address), context, "127.0.0.1");
        co_await stream.handshake();
        io::buffered_reader<tls&> reader(stream, 8);
        std::vector<std::string> got;
        while (std::optional<std::string> line = co_await reader.read_line(100)) {
          got.push_back(*line);
        }
        co_return got;
      }(net.address, client_context(certs)),
      "the reader");
  CHECK(lines == std::vector<std::string>{"first line", "second line", "third"});
  REQUIRE(server.wait_for(10s));
  server.get();
}

TEST_CASE("tls: an empty read returns 0 at once, as TCP's does, on an idle stream too") {
  // Such a read used to wait for a byte it could not take (for ever on an
  // idle connection), as a tcp_stream's did before it was made to return
  // at once; now both return 0 at once, taking nothing.
  const watchdog guard("tls empty read", 60 * timeout_scale());
  const test_certificates certs;
  loopback net;
  auto server = net.pool.spawn([](tcp_listener& listener, tls_context context) -> task<void> {
    tls stream(co_await listener.accept(), context);
    co_await stream.handshake();
    std::byte go[2];
    CHECK(co_await stream.read_some(go) > 0);  // the client's go-ahead
    co_await stream.write_all(bytes_of("data"));
    co_await stream.shutdown();
  }(net.listener, server_context(certs)));
  tls client = run(
      net.pool,
      [](endpoint address, tls_context context) -> task<tls> {
        tls stream(co_await tcp_stream::connect(address), context, "localhost");
        co_await stream.handshake();
        co_return stream;
      }(net.address, client_context(certs)),
      "the client's handshake");
  // Nothing has come: 0 at once, no error, and the stream is not at EOF.
  const auto empty_reads = [](tls* stream) -> task<bool> {
    std::error_code error = std::make_error_code(std::errc::io_error);
    const std::size_t got = co_await stream->read_some(std::span<std::byte>(), error);
    std::error_code bounded_error = std::make_error_code(std::errc::io_error);
    const std::size_t bounded = co_await stream->read_some_until(
        std::span<std::byte>(), std::chrono::steady_clock::now() + 60s, bounded_error);
    co_return got == 0 && !error && bounded == 0 && !bounded_error;
  };
  CHECK(run(net.pool, empty_reads(&client), "the empty reads"));
  run(net.pool, client.write_all(bytes_of("go")), "the go-ahead");
  // It took nothing: the data is all there for the next read, then the end.
  std::byte buffer[16];
  const std::size_t got = run(net.pool, client.read_some(buffer), "the read");
  CHECK(std::string(reinterpret_cast<const char*>(buffer), got) == "data");
  CHECK(run(net.pool, client.read_some(buffer), "the read at the end") == 0);
  REQUIRE(server.wait_for(10s));
  server.get();
  // On a closed stream: bad_file_descriptor, as a tcp_stream's.
  client.close();
  const auto closed_read = [](tls* stream) -> task<std::error_code> {
    std::error_code error;
    (void)co_await stream->read_some(std::span<std::byte>(), error);
    co_return error;
  };
  CHECK(run(net.pool, closed_read(&client), "the read on a closed stream") ==
        std::errc::bad_file_descriptor);
}

TEST_CASE("tls: a close without close_notify is truncation, distinct from a clean end") {
  const watchdog guard("tls truncation", 60 * timeout_scale());
  const test_certificates certs;
  for (const bool clean : {false, true}) {
    CAPTURE(clean);
    loopback net;
    auto server =
        net.pool.spawn([](tcp_listener& listener, tls_context context, bool clean) -> task<void> {
          tls stream(co_await listener.accept(), context);
          co_await stream.handshake();
          co_await stream.write_all(bytes_of("hello"));
          if (clean) {
            co_await stream.shutdown();
          }
          stream.close();  // the socket, with or without close_notify before it
        }(net.listener, server_context(certs), clean));
    const auto [text, error] = run(
        net.pool,
        [](endpoint address, tls_context context) -> task<std::pair<std::string, std::error_code>> {
          tls stream(co_await tcp_stream::connect(address), context, "localhost");
          co_await stream.handshake();
          std::string text;
          std::error_code error;
          std::byte buffer[64];
          for (;;) {
            const std::size_t got = co_await stream.read_some(buffer, error);
            if (got == 0) {
              break;
            }
            text.append(reinterpret_cast<const char*>(buffer), got);
          }
          co_return std::pair{text, error};
        }(net.address, client_context(certs)),
        "the client");
    CHECK(text == "hello");
    if (clean) {
      CHECK(!error);
    } else {
      CHECK(error == tls_errc::truncated);
      CHECK(error.message().find("without close_notify") != std::string::npos);
    }
    REQUIRE(server.wait_for(10s));
    server.get();
  }
}

TEST_CASE("tls: refused certificates name the reason") {
  const watchdog guard("tls verify", 60 * timeout_scale());
  const test_certificates certs;
  const tls_context trusting = client_context(certs);
  SUBCASE("expired") {
    const auto error =
        client_error_against(certs, "expired.pem", "server.key", "localhost", trusting);
    CHECK(io::is_certificate_error(error));
    CHECK(error.message().find("certificate has expired") != std::string::npos);
  }
  SUBCASE("self-signed") {
    const auto error = client_error_against(certs, "self.pem", "self.key", "localhost", trusting);
    CHECK(io::is_certificate_error(error));
    CHECK(error.message().find("self") != std::string::npos);
    CHECK(error.message().find("signed certificate") != std::string::npos);
  }
  SUBCASE("wrong host") {
    const auto error =
        client_error_against(certs, "other.pem", "server.key", "localhost", trusting);
    CHECK(io::is_certificate_error(error));
    CHECK(error.message().find("hostname mismatch") != std::string::npos);
  }
  SUBCASE("wrong IP address") {
    const auto error =
        client_error_against(certs, "other.pem", "server.key", "127.0.0.1", trusting);
    CHECK(error.message().find("IP address mismatch") != std::string::npos);
  }
  SUBCASE("a CA the client does not trust (the system's store)") {
    const auto error =
        client_error_against(certs, "server.pem", "server.key", "localhost", tls_context::client());
    CHECK(error.message().find("unable to get local issuer certificate") != std::string::npos);
  }
  SUBCASE("the same certificate, trusted: no error") {
    loopback net;
    auto server = net.pool.spawn(accept_and_handshake(net.listener, server_context(certs)));
    CHECK(!run(net.pool, connect_and_handshake(net.address, trusting, "localhost"), "client"));
    REQUIRE(server.wait_for(10s));
    CHECK(!server.get());
  }
}

TEST_CASE("tls: a version the peer refuses is a protocol-version error on both sides") {
  const watchdog guard("tls version", 60 * timeout_scale());
  const test_certificates certs;
  loopback net;
  io::tls_server_options server_options;
  server_options.certificate_chain_file = certs.path("server.pem");
  server_options.private_key_file = certs.path("server.key");
  server_options.min_version = io::tls_version::v1_3;
  io::tls_client_options client_options;
  client_options.ca_file = certs.path("ca.pem");
  client_options.max_version = io::tls_version::v1_2;
  auto server =
      net.pool.spawn(accept_and_handshake(net.listener, tls_context::server(server_options)));
  const std::error_code error =
      run(net.pool,
          connect_and_handshake(net.address, tls_context::client(client_options), "localhost"),
          "client");
  CHECK(error.category() == io::tls_category());
  CHECK(error.message().find("protocol version") != std::string::npos);
  REQUIRE(server.wait_for(10s));
  const std::error_code refused = server.get();
  CHECK(refused.message().find("unsupported protocol") != std::string::npos);
}

TEST_CASE("tls: a key that does not match the certificate fails the context, file or PEM") {
  const test_certificates certs;
  io::tls_server_options options;
  options.certificate_chain_file = certs.path("server.pem");
  options.private_key_file = certs.path("stray.key");
  try {
    (void)tls_context::server(options);
    FAIL("a mismatched key (file) was accepted");
  } catch (const std::system_error& failure) {
    CHECK(failure.code() == tls_errc::key_mismatch);
    CHECK(std::string(failure.what()).find("does not match") != std::string::npos);
  }
  options.certificate_chain_file.clear();
  options.private_key_file.clear();
  options.certificate_chain_pem = certs.text("server.pem");
  options.private_key_pem = certs.text("stray.key");
  CHECK_THROWS_AS((void)tls_context::server(options), std::system_error);
  options.private_key_pem = certs.text("server.key");
  CHECK(tls_context::server(options).valid());  // the matching key, from memory
  options.private_key_file = certs.path("server.key");
  CHECK_THROWS_AS((void)tls_context::server(options), std::invalid_argument);  // both forms
}

TEST_CASE("tls: a certificate file that cannot be read fails the context with errno and its name") {
  const test_certificates certs;
  io::tls_server_options options;
  options.certificate_chain_file = certs.path("missing.pem");
  options.private_key_file = certs.path("server.key");
  try {
    (void)tls_context::server(options);
    FAIL("a missing certificate file was accepted");
  } catch (const std::system_error& failure) {
    CHECK(failure.code() == std::errc::no_such_file_or_directory);
    CHECK(std::string(failure.what()).find("missing.pem") != std::string::npos);
  }
  io::tls_client_options client;
  client.ca_file = certs.path("no-ca.pem");
  CHECK_THROWS_AS((void)tls_context::client(client), std::system_error);
}

}  // namespace
}  // namespace canopy::testing
