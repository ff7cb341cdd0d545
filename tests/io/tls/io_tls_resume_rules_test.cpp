// canopy::io TLS session resumption's rules on loopback, on whichever
// backend CANOPY_IO_BACKEND names: a TLS 1.2 client that takes no tickets
// resumes from the server's session cache (`openssl s_client -no_ticket`,
// and our client told so through native_handle()), and not when
// session_resumption is off; a client offers a session only to the host
// it came from, on a stream of the client context that made it. Fails,
// not skips, without openssl: ./run.sh installs it.
#include <doctest/doctest.h>
#include <openssl/ssl.h>

#include <canopy/io/tls.hpp>
#include <chrono>
#include <cstddef>
#include <string>
#include <system_error>

#include "tests/child_process.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/tls_test_support.hpp"
#include "tests/watchdog.hpp"

namespace canopy::testing {
namespace {

using io::endpoint;
using io::tcp_listener;
using io::tcp_stream;
using io::tls_context;
using io::tls_session;
using io::tls_version;
using tls = io::tls_stream<tcp_stream>;

// Adds both.pem to `certs`' folder: server.key's certificate for
// localhost, 127.0.0.1 and other.example, so that one server serves
// either name.
void make_both_certificate(const test_certificates& certs) {
  const std::string script =
      "set -e; cd '" + certs.path("") +
      "'\nprintf 'subjectAltName=DNS:localhost,DNS:other.example,IP:127.0.0.1\\n' > both.cnf\n"
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial"
      " -out both.pem -days 2 -extfile both.cnf\n";
  child_process make({"sh", "-c", script});
  const int status = make.wait(60);
  INFO("openssl said:\n", make.output());
  REQUIRE(status == 0);
}

tls_context server_context(const test_certificates& certs, const std::string& certificate,
                           tls_version version, bool resumption = true) {
  io::tls_server_options options;
  options.certificate_chain_file = certs.path(certificate);
  options.private_key_file = certs.path("server.key");
  options.min_version = version;
  options.max_version = version;
  options.session_resumption = resumption;
  return tls_context::server(options);
}

tls_context client_context(const test_certificates& certs) {
  io::tls_client_options options;
  options.ca_file = certs.path("ca.pem");
  return tls_context::client(options);
}

// Serves `count` connections one after another (handshake, "hello\n",
// close_notify); how many resumed.
task<int> serve_resumed(tcp_listener& listener, tls_context context, int count) {
  int resumed = 0;
  for (int i = 0; i < count; ++i) {
    tls stream(co_await listener.accept(), context);
    std::error_code error;
    co_await stream.handshake(error);
    if (error) {
      continue;
    }
    resumed += stream.resumed() ? 1 : 0;
    co_await stream.write_all(bytes_of("hello\n"), error);
    co_await stream.shutdown(error);
  }
  co_return resumed;
}

struct client_view {
  bool resumed = false;
  tls_session session;
};

// One client connection to `host` offering `offer`: what it saw.
task<client_view> visit(endpoint address, tls_context context, std::string host,
                        tls_session offer) {
  tls stream(co_await tcp_stream::connect(address), context, host);
  stream.offer_session(offer);
  co_await stream.handshake();
  client_view view;
  view.resumed = stream.resumed();
  std::byte buffer[16];
  std::error_code error;
  while (co_await stream.read_some(buffer, error) != 0) {
  }
  view.session = stream.session();
  // OpenSSL makes the session of a stream freed without close_notify sent
  // unresumable; the server may have gone already (the error is moot).
  co_await stream.shutdown(error);
  co_return view;
}

// `session` written out in DER and read back: a new SSL_SESSION.
tls_session read_back(const tls_session& session) {
  auto* native = static_cast<SSL_SESSION*>(session.native_handle());
  std::string der(static_cast<std::size_t>(i2d_SSL_SESSION(native, nullptr)), '\0');
  auto* out = reinterpret_cast<unsigned char*>(der.data());
  REQUIRE(i2d_SSL_SESSION(native, &out) == static_cast<int>(der.size()));
  const auto* in = reinterpret_cast<const unsigned char*>(der.data());
  SSL_SESSION* copy = d2i_SSL_SESSION(nullptr, &in, static_cast<long>(der.size()));
  REQUIRE(copy != nullptr);
  return tls_session::adopt(copy);  // takes over the reference d2i gave
}

void wait_for_server(auto& server) {
  REQUIRE(server.wait_for(std::chrono::seconds(static_cast<long>(10 * timeout_scale()))));
}

TEST_CASE("tls resume: a TLS 1.2 s_client without tickets resumes from the server's cache") {
  const watchdog guard("tls s_client no_ticket", 120 * timeout_scale());
  const test_certificates certs;
  const std::string saved = certs.path("session.pem");
  for (const bool resumption : {true, false}) {
    CAPTURE(resumption);
    loopback net;
    auto server = net.pool.spawn(serve_resumed(
        net.listener, server_context(certs, "server.pem", tls_version::v1_2, resumption), 2));
    const auto s_client = [&](const char* option) {
      child_process client({"openssl", "s_client", "-connect",
                            "127.0.0.1:" + std::to_string(net.address.port()), "-CAfile",
                            certs.path("ca.pem"), "-verify_return_error", "-ign_eof", "-tls1_2",
                            "-no_ticket", option, saved});
      CHECK(client.wait(30) == 0);
      return client.output();
    };
    const std::string first = s_client("-sess_out");
    INFO("first s_client said:\n", first);
    CHECK(first.find("New, TLSv1.2") != std::string::npos);
    CHECK(first.find("TLS session ticket:") == std::string::npos);  // none was sent
    const std::string second = s_client("-sess_in");
    INFO("second s_client said:\n", second);
    CHECK(second.find(resumption ? "Reused, TLSv1.2" : "New, TLSv1.2") != std::string::npos);
    wait_for_server(server);
    CHECK(server.get() == (resumption ? 1 : 0));
  }
}

TEST_CASE("tls resume: our TLS 1.2 client told to take no tickets resumes from the cache") {
  const watchdog guard("tls no_ticket client", 60 * timeout_scale());
  const test_certificates certs;
  const tls_context client = client_context(certs);
  SSL_CTX_set_options(static_cast<SSL_CTX*>(client.native_handle()), SSL_OP_NO_TICKET);
  loopback net;
  auto server = net.pool.spawn(
      serve_resumed(net.listener, server_context(certs, "server.pem", tls_version::v1_2), 2));
  const client_view first =
      run(net.pool, visit(net.address, client, "localhost", {}), "the first client");
  CHECK_FALSE(first.resumed);
  REQUIRE(first.session.valid());
  CHECK(SSL_SESSION_has_ticket(static_cast<SSL_SESSION*>(first.session.native_handle())) == 0);
  const client_view second =
      run(net.pool, visit(net.address, client, "localhost", first.session), "the second client");
  CHECK(second.resumed);
  wait_for_server(server);
  CHECK(server.get() == 1);
}

TEST_CASE("tls resume: a session is offered only to its own host, from its own context") {
  const watchdog guard("tls offer rules", 60 * timeout_scale());
  const test_certificates certs;
  make_both_certificate(certs);
  const tls_context client = client_context(certs);
  const tls_context other_client = client_context(certs);  // the same options, another context
  for (const tls_version version : {tls_version::v1_2, tls_version::v1_3}) {
    CAPTURE(version == tls_version::v1_3);
    loopback net;
    // One server serves both names with one certificate, and would resume
    // any session it issued, whatever name the client asks for.
    auto server =
        net.pool.spawn(serve_resumed(net.listener, server_context(certs, "both.pem", version), 7));
    const auto visit_with = [&](const tls_context& context, const char* host, tls_session offer) {
      return run(net.pool, visit(net.address, context, host, std::move(offer)), host);
    };
    const client_view first = visit_with(client, "localhost", {});
    REQUIRE(first.session.valid());
    CHECK_FALSE(visit_with(client, "other.example", first.session).resumed);
    CHECK_FALSE(visit_with(other_client, "localhost", first.session).resumed);
    CHECK(visit_with(client, "localhost", first.session).resumed);  // it was resumable
    CHECK(visit_with(client, "localhost", first.session).resumed);  // and stays so
    // A session read back from its bytes (as from a file) carries only
    // the host name OpenSSL recorded.
    const tls_session adopted = read_back(first.session);
    CHECK_FALSE(visit_with(client, "other.example", adopted).resumed);
    CHECK(visit_with(other_client, "localhost", adopted).resumed);
    wait_for_server(server);
    CHECK(server.get() == 3);
  }
}

}  // namespace
}  // namespace canopy::testing
