// canopy::io TLS under faults, on whichever backend CANOPY_IO_BACKEND
// names: a peer that sends part of a record and closes (truncation, told
// apart from a clean close_notify), a TLS 1.2 client that asks to
// renegotiate (refused without a crash or a hang), a key that does not
// match its certificate given in memory.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/io.hpp"
#include "io/tls/tls_stream.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/tls_test_support.hpp"
#include "tests/watchdog.hpp"

namespace canopy::testing {
namespace {

using namespace std::chrono_literals;
using io::endpoint;
using io::tcp_listener;
using io::tcp_stream;
using io::tls_context;
using io::tls_errc;
using tls = io::tls_stream<tcp_stream>;

tls_context server_context(const test_certificates& certs,
                           io::tls_version max = io::tls_version::v1_3) {
  io::tls_server_options options;
  options.certificate_chain_file = certs.path("server.pem");
  options.private_key_file = certs.path("server.key");
  options.max_version = max;
  return tls_context::server(options);
}

tls_context client_context(const test_certificates& certs) {
  io::tls_client_options options;
  options.ca_file = certs.path("ca.pem");
  return tls_context::client(options);
}

// How the server ends its side after the handshake.
enum class ending {
  half_record,   // the first half of a real record's bytes, then the close
  short_header,  // a record header that claims 16 KiB, 10 bytes, the close
  close_notify,  // a whole record, close_notify, the close
};

task<void> serve_then_end(tcp_listener& listener, tls_context context, ending how) {
  tls stream(co_await listener.accept(), context);
  co_await stream.handshake();
  co_await stream.write_all(bytes_of("whole"));
  if (how == ending::close_notify) {
    co_await stream.write_all(bytes_of("last"));
    co_await stream.shutdown();
  } else if (how == ending::half_record) {
    // The record "last" makes, taken from the SSL's output memory BIO (no
    // operation runs meanwhile), sent only in part.
    SSL* ssl = static_cast<SSL*>(stream.native_handle());
    REQUIRE(SSL_write(ssl, "last", 4) == 4);
    BIO* out = SSL_get_wbio(ssl);
    std::vector<std::byte> record(static_cast<std::size_t>(BIO_ctrl_pending(out)));
    REQUIRE(record.size() > 10);
    REQUIRE(BIO_read(out, record.data(), static_cast<int>(record.size())) ==
            static_cast<int>(record.size()));
    co_await stream.next_layer().write_all(std::span(record).first(record.size() / 2));
  } else {
    const unsigned char header[] = {0x17, 0x03, 0x03, 0x40, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    co_await stream.next_layer().write_all(std::as_bytes(std::span(header)));
  }
  stream.close();
}

TEST_CASE(
    "tls faults: part of a record, then the close, is truncation; close_notify is a clean end") {
  const watchdog guard("tls half record", 60 * timeout_scale());
  const test_certificates certs;
  for (const ending how : {ending::half_record, ending::short_header, ending::close_notify}) {
    CAPTURE(static_cast<int>(how));
    loopback net;
    auto server = net.pool.spawn(serve_then_end(net.listener, server_context(certs), how));
    const auto [text, error] = run(
        net.pool,
        [](endpoint address, tls_context context) -> task<std::pair<std::string, std::error_code>> {
          tls stream(co_await tcp_stream::connect(address), context, "localhost");
          co_await stream.handshake();
          std::string text;
          std::error_code error;
          std::byte buffer[64];
          while (const std::size_t got = co_await stream.read_some(buffer, error)) {
            text.append(reinterpret_cast<const char*>(buffer), got);
          }
          co_return std::pair{text, error};
        }(net.address, client_context(certs)),
        "the client");
    if (how == ending::close_notify) {
      CHECK(text == "wholelast");
      CHECK(!error);
    } else {
      CHECK(text == "whole");  // nothing of the cut record surfaces
      CHECK(error == tls_errc::truncated);
      CHECK(error.message().find("without close_notify") != std::string::npos);
    }
    REQUIRE(server.wait_for(10s));
    server.get();
  }
}

// A TLS 1.2 client on a blocking socket (raw OpenSSL): it exchanges one
// message, asks for a renegotiation, then tries one more exchange. What it
// saw, for the test's checks.
struct renegotiating_client {
  bool handshaken = false;
  std::string first_reply;
  int renegotiate_result = 0;
  std::string renegotiate_reason;
  std::string second_reply;
};

renegotiating_client renegotiate_against(const endpoint& server) {
  renegotiating_client seen;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  const timeval limit{static_cast<time_t>(10 * timeout_scale()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server.port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_max_proto_version(context, TLS1_2_VERSION);
  SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nullptr);
  SSL* ssl = SSL_new(context);
  SSL_set_fd(ssl, fd);
  char buffer[64];
  seen.handshaken = SSL_connect(ssl) == 1;
  if (seen.handshaken && SSL_write(ssl, "ping", 4) == 4) {
    const int got = SSL_read(ssl, buffer, sizeof buffer);
    seen.first_reply.assign(buffer, got > 0 ? static_cast<std::size_t>(got) : 0);
    ERR_clear_error();
    seen.renegotiate_result = SSL_renegotiate(ssl) == 1 ? SSL_do_handshake(ssl) : -100;
    if (const unsigned long reason = ERR_peek_last_error(); reason != 0) {
      seen.renegotiate_reason = ERR_reason_error_string(reason) != nullptr
                                    ? ERR_reason_error_string(reason)
                                    : "(no text)";
    }
    ERR_clear_error();
    if (SSL_write(ssl, "again", 5) == 5) {
      const int again = SSL_read(ssl, buffer, sizeof buffer);
      seen.second_reply.assign(buffer, again > 0 ? static_cast<std::size_t>(again) : 0);
    }
    ERR_clear_error();
  }
  SSL_free(ssl);
  SSL_CTX_free(context);
  ::close(fd);
  return seen;
}

TEST_CASE("tls faults: a TLS 1.2 client's renegotiation is refused; no crash, no hang") {
  const watchdog guard("tls renegotiation", 60 * timeout_scale());
  const test_certificates certs;
  loopback net;
  // The server answers each message with "pong" until the end or an
  // error: what it read last, and that error.
  auto server = net.pool.spawn(
      [](tcp_listener& listener, tls_context context) -> task<std::pair<int, std::error_code>> {
        tls stream(co_await listener.accept(), context);
        co_await stream.handshake();
        CHECK(stream.version() == std::string_view("TLSv1.2"));
        int answered = 0;
        std::error_code error;
        std::byte buffer[64];
        while (co_await stream.read_some(buffer, error) > 0) {
          co_await stream.write_all(bytes_of("pong"), error);
          if (error) {
            break;
          }
          ++answered;
        }
        co_return std::pair{answered, error};
      }(net.listener, server_context(certs, io::tls_version::v1_2)));
  renegotiating_client seen;
  std::thread client([&] { seen = renegotiate_against(net.address); });
  client.join();
  REQUIRE(server.wait_for(std::chrono::milliseconds(static_cast<long>(10'000 * timeout_scale()))));
  const auto [answered, error] = server.get();
  INFO("client: renegotiate ", seen.renegotiate_result, " (", seen.renegotiate_reason,
       "), second reply '", seen.second_reply, "'; server: answered ", answered, ", ",
       error.message());
  CHECK(seen.handshaken);
  CHECK(seen.first_reply == "pong");
  // The server refused (OpenSSL's no_renegotiation alert): the client's
  // renegotiation failed, saying so, and no second exchange happened.
  CHECK(seen.renegotiate_result <= 0);
  CHECK(seen.renegotiate_reason == "no renegotiation");
  CHECK(seen.second_reply.empty());
  // The server answered the one message, then its read ended with the
  // client's fatal alert as a TLS error (the stream did not renegotiate).
  CHECK(answered == 1);
  CHECK(error.category() == io::tls_category());
  CHECK(error.message().find("alert") != std::string::npos);
}

TEST_CASE(
    "tls faults: a key given in memory that does not match the certificate names the mismatch") {
  const test_certificates certs;
  io::tls_server_options options;
  options.certificate_chain_pem = certs.text("server.pem");
  options.private_key_pem = certs.text("stray.key");
  try {
    (void)tls_context::server(options);
    FAIL("a mismatched key (PEM) was accepted");
  } catch (const std::system_error& failure) {
    CHECK(failure.code() == tls_errc::key_mismatch);
    CHECK(std::string(failure.what()).find("does not match the certificate") != std::string::npos);
  }
}

}  // namespace
}  // namespace canopy::testing
