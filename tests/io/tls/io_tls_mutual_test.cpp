// canopy::io mutual TLS on loopback, on whichever backend
// CANOPY_IO_BACKEND names: a server with verify_client accepts a client
// whose certificate its CA signed (and sees whom), refuses a client
// without a certificate and one from an unknown CA, each side saying why;
// the options' own errors. The client certificates are made at run time
// beside the shared test certificates (tests/tls_test_support.hpp).
#include <doctest/doctest.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "coroutine/coroutine.hpp"
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
using io::tcp_listener;
using io::tcp_stream;
using io::tls_context;
using io::tls_errc;
using io::tls_version;
using tls = io::tls_stream<tcp_stream>;

// Adds client.pem/client.key (signed by the test CA, CN=canopy-client)
// and rogue.pem/rogue.key (self-signed) to `certs`' folder.
void make_client_certificates(const test_certificates& certs) {
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
  const std::string script =
      "set -e; cd '" + certs.path("") + "'\nopenssl req -new" + ec +
      "-keyout client.key -out client.csr -subj /CN=canopy-client\n"
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial"
      " -out client.pem -days 2\n"
      "openssl req -x509" +
      ec + "-keyout rogue.key -out rogue.pem -days 2 -subj /CN=rogue\n";
  child_process make({"sh", "-c", script});
  const int status = make.wait(60);
  INFO("openssl said:\n", make.output());
  REQUIRE(status == 0);
}

// `pem`: the client CA given as text (client_ca_pem), else as a file.
tls_context server_context(const test_certificates& certs, tls_version max, bool pem = false) {
  io::tls_server_options options;
  options.certificate_chain_file = certs.path("server.pem");
  options.private_key_file = certs.path("server.key");
  options.max_version = max;
  options.verify_client = true;
  if (pem) {
    options.client_ca_pem = certs.text("ca.pem");
  } else {
    options.client_ca_file = certs.path("ca.pem");
  }
  return tls_context::server(options);
}

// The CA names a client received in the server's certificate request,
// RFC 2253, separated by ';'.
std::string requested_ca_names(void* native) {
  const STACK_OF(X509_NAME)* names = SSL_get_client_CA_list(static_cast<SSL*>(native));
  std::string joined;
  for (int i = 0; names != nullptr && i < sk_X509_NAME_num(names); ++i) {
    BIO* text = BIO_new(BIO_s_mem());
    X509_NAME_print_ex(text, sk_X509_NAME_value(names, i), 0, XN_FLAG_RFC2253);
    char* data = nullptr;
    const long size = BIO_get_mem_data(text, &data);
    joined += (joined.empty() ? "" : ";") + std::string(data, static_cast<std::size_t>(size));
    BIO_free(text);
  }
  return joined;
}

// `who`: "client" or "rogue" (a certificate and key of that name), or ""
// (none).
tls_context client_context(const test_certificates& certs, const std::string& who) {
  io::tls_client_options options;
  options.ca_file = certs.path("ca.pem");
  if (!who.empty()) {
    options.certificate_chain_file = certs.path(who + ".pem");
    options.private_key_pem = certs.text(who + ".key");  // the memory form too
  }
  return tls_context::client(options);
}

struct side {
  std::error_code error;  // the handshake's, else the first read's
  bool verified = false;
  std::string subject;
  std::string text;
  std::string ca_names;  // the client's: what the certificate request named
};

// The server: handshake; then what it learnt of the client, "hi", close_notify.
task<side> serve_one(tcp_listener& listener, tls_context context) {
  tls stream(co_await listener.accept(), context);
  side seen;
  co_await stream.handshake(seen.error);
  seen.verified = stream.peer_verified();
  seen.subject = stream.peer_subject();
  if (!seen.error) {
    co_await stream.write_all(bytes_of("hi"), seen.error);
    co_await stream.shutdown(seen.error);
  }
  co_return seen;
}

// The client: handshake, then read until the end (under TLS 1.3 a refusal
// arrives after the client's handshake has finished).
task<side> connect_one(endpoint address, tls_context context) {
  tls stream(co_await tcp_stream::connect(address), context, "localhost");
  side seen;
  co_await stream.handshake(seen.error);
  seen.verified = stream.peer_verified();
  seen.subject = stream.peer_subject();
  seen.ca_names = requested_ca_names(stream.native_handle());
  std::byte buffer[16];
  while (!seen.error) {
    const std::size_t got = co_await stream.read_some(buffer, seen.error);
    if (got == 0) {
      break;
    }
    seen.text.append(reinterpret_cast<const char*>(buffer), got);
  }
  co_return seen;
}

std::pair<side, side> connect_pair(const test_certificates& certs, tls_version max,
                                   const std::string& who, bool pem = false) {
  loopback net;
  auto server = net.pool.spawn(serve_one(net.listener, server_context(certs, max, pem)));
  const side client =
      run(net.pool, connect_one(net.address, client_context(certs, who)), "the client");
  REQUIRE(server.wait_for(std::chrono::milliseconds(static_cast<long>(10'000 * timeout_scale()))));
  return {server.get(), client};
}

TEST_CASE("mutual tls: a client whose certificate the CA signed is accepted, and seen") {
  const watchdog guard("mutual tls accepted", 60 * timeout_scale());
  const test_certificates certs;
  make_client_certificates(certs);
  for (const bool pem : {false, true}) {
    for (const tls_version max : {tls_version::v1_2, tls_version::v1_3}) {
      CAPTURE(pem);
      CAPTURE(static_cast<int>(max));
      const auto [server, client] = connect_pair(certs, max, "client", pem);
      CHECK(!server.error);
      CHECK(server.verified);
      CHECK(server.subject == "CN=canopy-client");
      CHECK(!client.error);
      CHECK(client.text == "hi");
      CHECK(client.verified);  // the server's certificate, as ever
      CHECK(client.subject == "CN=localhost");
      CHECK(client.ca_names == "CN=canopy-test-ca");  // the request named the CA
    }
  }
}

TEST_CASE("mutual tls: a client without a certificate is refused, both sides saying why") {
  const watchdog guard("mutual tls refused", 60 * timeout_scale());
  const test_certificates certs;
  for (const tls_version max : {tls_version::v1_2, tls_version::v1_3}) {
    CAPTURE(static_cast<int>(max));
    const auto [server, client] = connect_pair(certs, max, "");
    INFO("server: ", server.error.message(), "; client: ", client.error.message());
    CHECK(server.error.category() == io::tls_category());
    CHECK(server.error.message().find("did not return a certificate") != std::string::npos);
    CHECK_FALSE(server.verified);
    CHECK(server.subject.empty());
    CHECK(client.error.category() == io::tls_category());
    CHECK(client.error.message().find(max == tls_version::v1_3
                                          ? "certificate required"
                                          : "handshake failure") != std::string::npos);
    CHECK(client.text.empty());
  }
}

TEST_CASE("mutual tls: a client certificate from an unknown CA is a certificate error") {
  const watchdog guard("mutual tls unknown CA", 60 * timeout_scale());
  const test_certificates certs;
  make_client_certificates(certs);
  const auto [server, client] = connect_pair(certs, tls_version::v1_3, "rogue");
  INFO("server: ", server.error.message(), "; client: ", client.error.message());
  CHECK(io::is_certificate_error(server.error));
  CHECK(server.error.message().find("certificate verify failed") != std::string::npos);
  CHECK_FALSE(server.verified);
  CHECK(client.error.category() == io::tls_category());
  CHECK(client.text.empty());
}

TEST_CASE("mutual tls: options that do not fit together, and a client key that does not match") {
  const test_certificates certs;
  make_client_certificates(certs);
  io::tls_server_options server;
  server.certificate_chain_file = certs.path("server.pem");
  server.private_key_file = certs.path("server.key");
  server.verify_client = true;  // and no CA
  CHECK_THROWS_AS((void)tls_context::server(server), std::invalid_argument);
  server.verify_client = false;
  server.client_ca_file = certs.path("ca.pem");  // a CA, but no verify_client
  CHECK_THROWS_AS((void)tls_context::server(server), std::invalid_argument);
  server.verify_client = true;
  server.client_ca_pem = certs.text("ca.pem");  // both forms
  CHECK_THROWS_AS((void)tls_context::server(server), std::invalid_argument);
  server.client_ca_file.clear();
  CHECK(tls_context::server(server).valid());  // the CA from memory

  io::tls_client_options client;
  client.ca_file = certs.path("ca.pem");
  client.certificate_chain_file = certs.path("client.pem");  // and no key
  CHECK_THROWS_AS((void)tls_context::client(client), std::invalid_argument);
  client.private_key_file = certs.path("stray.key");
  try {
    (void)tls_context::client(client);
    FAIL("a client key that does not match its certificate was accepted");
  } catch (const std::system_error& failure) {
    CHECK(failure.code() == tls_errc::key_mismatch);
    CHECK(std::string(failure.what()).find("does not match the certificate") != std::string::npos);
  }
  client.private_key_file = certs.path("client.key");
  CHECK(tls_context::client(client).valid());
}

}  // namespace
}  // namespace canopy::testing
