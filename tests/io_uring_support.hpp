// Shared by the io_uring tests (io_uring_test, io_uring_ownership_test):
// the backends a case runs on, an executor on a given backend, and what a
// case does where io_uring cannot run (fail, unless
// CANOPY_IO_URING_UNAVAILABLE_OK=1, which run.sh sets only when its probe
// found io_uring unusable on the machine).
#pragma once

#include <doctest/doctest.h>
#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/io.hpp"
#include "tests/test_support.hpp"

namespace canopy::testing {

// Sets (or, with nullptr, unsets) an environment variable for a scope.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
    }
    if (value == nullptr) {
      ::unsetenv(name);
    } else {
      ::setenv(name, value, 1);
    }
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;
  ~scoped_env() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

inline bool unavailable_ok() {
  const char* value = std::getenv("CANOPY_IO_URING_UNAVAILABLE_OK");
  return value != nullptr && std::string(value) == "1";
}

// io_uring could not start here: a failure, or a note where that is expected.
inline void report_unavailable(const std::system_error& failure) {
  CHECK(std::string(failure.what()).find("io_uring") != std::string::npos);
  if (unavailable_ok()) {
    MESSAGE(
        "io_uring unavailable here, as run.sh's probe found (CANOPY_IO_URING_UNAVAILABLE_OK=1): "
        << failure.what());
  } else {
    FAIL("io_uring is unavailable on this machine: "
         << failure.what()
         << " (set CANOPY_IO_URING_UNAVAILABLE_OK=1 only where that is expected)");
  }
}

// The backends the ownership cases run on: the one CANOPY_IO_BACKEND forces,
// else both.
inline std::vector<io::io_backend> backends_under_test() {
  const char* forced = std::getenv("CANOPY_IO_BACKEND");
  const std::string name = forced == nullptr ? "" : forced;
  if (name == "epoll") {
    return {io::io_backend::epoll};
  }
  if (name == "io_uring") {
    return {io::io_backend::io_uring};
  }
  return {io::io_backend::epoll, io::io_backend::io_uring};
}

// An executor config whose reactor runs `backend`; empty (reported) where
// io_uring cannot run.
inline std::optional<executor_config> config_for(io::io_backend backend, std::size_t workers = 2) {
  executor_config config = config_with(workers);
  try {
    return io::with_reactor(config, io::reactor_options{backend});
  } catch (const std::system_error& failure) {
    if (backend != io::io_backend::io_uring) {
      throw;
    }
    report_unavailable(failure);
    return std::nullopt;
  }
}

// A blocking client socket connected to `server` (the test thread's peer).
inline int connect_raw(const io::endpoint& server) {
  const int fd = ::socket(server.data()->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  REQUIRE(::connect(fd, server.data(), server.size()) == 0);
  return fd;
}

// Connect to `server`, send `text`, and read as many bytes back (an echo).
inline task<std::string> ask(io::reactor* owner, io::endpoint server, std::string text) {
  io::tcp_stream stream = co_await io::tcp_stream::connect(*owner, server);
  co_await stream.write_all(std::as_bytes(std::span(text.data(), text.size())));
  std::array<std::byte, 256> buffer{};
  std::string answer;
  while (answer.size() < text.size()) {
    const std::size_t got = co_await stream.read_some(buffer);
    if (got == 0) {
      break;
    }
    answer.append(reinterpret_cast<const char*>(buffer.data()), got);
  }
  co_return answer;
}

}  // namespace canopy::testing
