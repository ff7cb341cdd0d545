// Certificates for the TLS tests, made at run time by the openssl CLI in a
// temporary folder (removed afterwards; no key is ever committed): a CA, a
// server certificate for localhost and 127.0.0.1 signed by it, an expired
// one, a self-signed one, one for another host, and a key that matches
// none of them. EC P-256 keys: each takes milliseconds. Also what both TLS
// tests use to run a connection: a pool with a listener on 127.0.0.1, a
// bounded wait for a task, bytes of a string.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "coroutine/coroutine.hpp"
#include "io/tcp.hpp"
#include "tests/child_process.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"

namespace canopy::testing {

class test_certificates {
 public:
  test_certificates() {
    char pattern[] = "/tmp/canopy-tls-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    dir_ = pattern;
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
    const std::string sign = " -CA ca.pem -CAkey ca.key -CAcreateserial ";
    const std::string script =
        "set -e; cd '" + dir_ +
        "'\n"
        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.cnf\n"
        "printf 'subjectAltName=DNS:other.example\\n' > other.cnf\n"
        "openssl req -x509" +
        ec +
        "-keyout ca.key -out ca.pem -days 2 -subj /CN=canopy-test-ca\n"
        "openssl req -new" +
        ec +
        "-keyout server.key -out server.csr -subj /CN=localhost\n"
        "openssl x509 -req -in server.csr" +
        sign +
        "-out server.pem -days 2 -extfile san.cnf\n"
        "openssl x509 -req -in server.csr" +
        sign +
        "-out expired.pem -days -1 -extfile san.cnf\n"
        "openssl x509 -req -in server.csr" +
        sign +
        "-out other.pem -days 2 -extfile other.cnf\n"
        "openssl req -x509" +
        ec +
        "-keyout self.key -out self.pem -days 2 -subj /CN=localhost"
        " -addext subjectAltName=DNS:localhost,IP:127.0.0.1\n"
        "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out stray.key\n";
    // Fails, not skips, without openssl: ./run.sh installs it.
    child_process make({"sh", "-c", script});
    const int status = make.wait(60);
    INFO("openssl said:\n", make.output());
    REQUIRE_MESSAGE(status == 0, "making the test certificates failed (is openssl installed?)");
  }
  ~test_certificates() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  test_certificates(const test_certificates&) = delete;
  test_certificates& operator=(const test_certificates&) = delete;

  [[nodiscard]] std::string path(const std::string& name) const { return dir_ + "/" + name; }
  [[nodiscard]] std::string text(const std::string& name) const {
    std::ifstream in(path(name));
    std::stringstream all;
    all << in.rdbuf();
    return all.str();
  }

 private:
  std::string dir_;
};

inline std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

// A pool with a reactor (timers included) and a listener on 127.0.0.1.
struct loopback {
  executor pool{io_config(2)};
  io::tcp_listener listener =
      io::tcp_listener::bind(io::reactor::of(pool), io::endpoint::loopback_v4(0));
  io::endpoint address = listener.local_endpoint();
  ~loopback() {
    pool.shutdown();
    listener.close();
  }
};

// Runs `work` on `pool` and returns its value; fails the test if it has not
// finished in 30 s (scaled).
template <class T>
T run(executor& pool, task<T> work, const char* what) {
  auto handle = pool.spawn(std::move(work));
  REQUIRE_MESSAGE(
      handle.wait_for(std::chrono::milliseconds(static_cast<long>(30'000 * timeout_scale()))), what,
      " did not finish in time");
  return handle.get();
}

}  // namespace canopy::testing
