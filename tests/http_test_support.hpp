// Helpers for the HTTP server tests: a server on a free port of 127.0.0.1
// for one test case, and a blocking raw-socket client.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <canopy/io.hpp>
#include <canopy/io/http.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>

#include "tests/io_test_support.hpp"
#include "tests/watchdog.hpp"

namespace canopy::testing {

// Server options with default limits but for the body's.
inline io::http::server_options with_body_limit(std::size_t max_body_bytes) {
  io::http::server_options options;
  options.limits.max_body_bytes = max_body_bytes;
  return options;
}

// `respond` serving on a free port of 127.0.0.1 with `options`, on two
// workers with a reactor and its timers, until the test case ends. When it
// is gone, so is every descriptor opened since it was made (the clients of
// a test are made after it, so they are gone too).
class http_test_server {
 public:
  http_test_server(const io::http::server_options& options, io::http::handler respond)
      : pool_(io_config(2)), timers_(pool_) {
    listener_ = io::tcp_listener::bind(io::reactor::of(pool_), io::endpoint::loopback_v4(0));
    port_ = listener_.local_endpoint().port();
    server_ = pool_.spawn(io::http::serve(listener_, options, respond));
  }
  ~http_test_server() {
    server_.cancel();
    pool_.shutdown();
    listener_.close();
  }
  http_test_server(const http_test_server&) = delete;
  http_test_server& operator=(const http_test_server&) = delete;

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }

 private:
  // First, so that it is destroyed last: after the executor and the
  // listener have closed theirs.
  struct descriptor_check {
    std::size_t before = open_fd_count();
    descriptor_check() = default;
    descriptor_check(const descriptor_check&) = delete;
    descriptor_check& operator=(const descriptor_check&) = delete;
    ~descriptor_check() { CHECK(open_fd_count() == before); }
  } descriptors_;
  executor pool_;
  io::reactor_timers timers_;
  io::tcp_listener listener_;
  std::uint16_t port_ = 0;
  join_handle<std::error_code> server_;
};

// serve() with a stop source, on two workers with a reactor and its timers.
class stoppable_server {
 public:
  stoppable_server(const io::http::server_options& options, io::http::handler respond,
                   executor_config config = io_config(2))
      : pool_(std::move(config)), timers_(pool_) {
    listener_ = io::tcp_listener::bind(io::reactor::of(pool_), io::endpoint::loopback_v4(0));
    port_ = listener_.local_endpoint().port();
    server_ =
        pool_.spawn(io::http::serve(listener_, options, std::move(respond), stop_.get_token()));
  }
  ~stoppable_server() {
    server_.cancel();
    pool_.shutdown();
    listener_.close();
  }
  stoppable_server(const stoppable_server&) = delete;
  stoppable_server& operator=(const stoppable_server&) = delete;

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  void stop() { stop_.request_stop(); }
  // Whether serve() returned within `limit` (with no error).
  bool returned_within(std::chrono::milliseconds limit) {
    return server_.wait_for(limit) && !server_.get();
  }

 private:
  executor pool_;
  io::reactor_timers timers_;
  io::tcp_listener listener_;
  std::uint16_t port_ = 0;
  std::stop_source stop_;
  join_handle<std::error_code> server_;
};

// A blocking client with a receive timeout, so that a server that never
// answers fails the test instead of hanging it; no delay on its sends, so
// the server sees a body in the pieces it was sent in.
class raw_client {
 public:
  explicit raw_client(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd_ >= 0);
    timeval timeout{static_cast<time_t>(10 * timeout_scale()), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    const int on = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  }
  ~raw_client() { close(); }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  void send(std::string_view data) const {
    while (!data.empty()) {
      const ssize_t sent = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      REQUIRE(sent > 0);
      data.remove_prefix(static_cast<std::size_t>(sent));
    }
  }
  // Reads until `text` has arrived (true) or the connection ends or times out.
  bool read_until(std::string_view text) {
    while (received.find(text) == std::string::npos) {
      char buffer[4096];
      const ssize_t got = ::recv(fd_, buffer, sizeof buffer, 0);
      if (got <= 0) {
        return false;
      }
      received.append(buffer, static_cast<std::size_t>(got));
    }
    return true;
  }
  // Reads what comes next (true), or false at EOF, an error or the timeout.
  bool read_some() {
    char buffer[4096];
    const ssize_t got = ::recv(fd_, buffer, sizeof buffer, 0);
    if (got <= 0) {
      return false;
    }
    received.append(buffer, static_cast<std::size_t>(got));
    return true;
  }
  // The receive timeout, shorter than the default's for a wait expected to
  // find nothing.
  void receive_timeout(std::chrono::milliseconds limit) const {
    timeval timeout{static_cast<time_t>(limit.count() / 1000),
                    static_cast<suseconds_t>(limit.count() % 1000 * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }
  // Reads until the server closes (true) or the receive times out (false).
  bool read_to_eof() {
    for (;;) {
      char buffer[4096];
      const ssize_t got = ::recv(fd_, buffer, sizeof buffer, 0);
      if (got == 0) {
        return true;
      }
      if (got < 0) {
        return errno == ECONNRESET;
      }
      received.append(buffer, static_cast<std::size_t>(got));
    }
  }
  void close() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

  [[nodiscard]] int fd() const noexcept { return fd_; }

  std::string received;

 private:
  int fd_;
};

}  // namespace canopy::testing
