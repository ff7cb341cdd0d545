// unix_listener::bind on a path whose socket file exists asks whether a
// server is live there without connecting to a live one: the live server's
// accept queue stays empty (bind used to connect, and the server then
// accepted a peer that sent nothing and closed). The rest of the stale
// file rule holds: a live server's path, named as it bound it or another
// way, is address_in_use; a live socket that does not listen keeps its
// file; a stale file is still removed. The kernel tables the probe reads
// (io/unix_probe.hpp) are checked on their own, the /proc/net/unix
// fallback against a table of that format too. Runs on the backend
// CANOPY_IO_BACKEND names; no descriptor or file is left.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <system_error>

#include "coroutine/coroutine.hpp"
#include "io/io.hpp"
#include "io/unix.hpp"
#include "io/unix_probe.hpp"
#include "tests/io_test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::io::reactor;
using canopy::io::unix_endpoint;
using canopy::io::unix_listener;
using canopy::io::unix_stream;
using canopy::io::detail::listener_answer;
using canopy::testing::io_config;
using canopy::testing::open_fd_count;

namespace {

std::string temp_path(const char* tag) {
  return "/tmp/canopy_unix_probe_" + std::to_string(::getpid()) + "_" + tag + ".sock";
}

bool exists(const std::string& path) {
  struct stat status{};
  return ::lstat(path.c_str(), &status) == 0;
}

// A socket of `type` bound at `path` (listening when `listen_too`), made
// without Canopy, as another process's server would be.
int bound_socket(const std::string& path, int type, bool listen_too) {
  const int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  REQUIRE(fd >= 0);
  const unix_endpoint where = unix_endpoint::path(path);
  REQUIRE(::bind(fd, where.data(), where.size()) == 0);
  if (listen_too) {
    REQUIRE(::listen(fd, 16) == 0);
  }
  return fd;
}

// Nothing waits in `fd`'s accept queue.
bool accept_queue_empty(int fd) {
  const int accepted = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (accepted >= 0) {
    ::close(accepted);
    return false;
  }
  return errno == EAGAIN || errno == EWOULDBLOCK;
}

}  // namespace

TEST_CASE("unix listener: bind on a live server's path leaves its accept queue alone") {
  const canopy::testing::watchdog guard("unix probe live", 30);
  const std::size_t fds_before = open_fd_count();
  const std::string path = temp_path("live");
  ::unlink(path.c_str());
  {
    executor pool(io_config(1));
    reactor& owner = reactor::of(pool);
    std::error_code error;

    // A Canopy server: a second bind fails, and the server has no peer.
    unix_listener server = unix_listener::bind(owner, unix_endpoint::path(path));
    unix_listener second = unix_listener::bind(owner, unix_endpoint::path(path), error);
    CHECK(error == std::errc::address_in_use);
    CHECK_FALSE(second.is_open());
    CHECK_THROWS_AS(unix_listener::bind(owner, unix_endpoint::path(path)), std::system_error);
    const unix_stream queued = server.try_accept(error);
    CHECK(error == std::errc::resource_unavailable_try_again);
    CHECK_FALSE(queued.is_open());
    server.close();
    CHECK_FALSE(exists(path));

    // Another process's server, its path named another way ("/tmp/./x"):
    // the same file, still live, still untouched. Only sock_diag matches
    // a file named another way (by its inode): where the kernel lacks it,
    // the fallback's connect still says "live", but reaches the queue.
    const int other = bound_socket(path, SOCK_STREAM, true);
    struct stat file{};
    REQUIRE(::lstat(path.c_str(), &file) == 0);
    const bool by_inode = canopy::io::detail::listening_by_diag(file) != listener_answer::unknown;
    const std::string other_name = "/tmp/./" + path.substr(std::string("/tmp/").size());
    unix_listener third = unix_listener::bind(owner, unix_endpoint::path(other_name), error);
    CHECK(error == std::errc::address_in_use);
    CHECK(exists(path));
    CHECK(accept_queue_empty(other) == by_inode);
    ::close(other);

    // The file of a live socket that does not listen (a datagram socket)
    // is not stale: address_in_use, and the file stays.
    ::unlink(path.c_str());
    const int datagram = bound_socket(path, SOCK_DGRAM, false);
    unix_listener fourth = unix_listener::bind(owner, unix_endpoint::path(path), error);
    CHECK(error == std::errc::address_in_use);
    CHECK(exists(path));
    ::close(datagram);

    // Now stale (its socket closed, the file left): removed and bound.
    unix_listener fifth = unix_listener::bind(owner, unix_endpoint::path(path), error);
    CHECK_FALSE(error);
    CHECK(fifth.is_open());
  }
  CHECK_FALSE(exists(path));
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("unix listener probe: the kernel's tables of listening sockets") {
  const canopy::testing::watchdog guard("unix probe tables", 30);
  const std::size_t fds_before = open_fd_count();
  const std::string path = temp_path("tables");
  ::unlink(path.c_str());
  const int server = bound_socket(path, SOCK_STREAM, true);
  struct stat file{};
  REQUIRE(::lstat(path.c_str(), &file) == 0);

  // sock_diag, where the kernel has it (unix_diag): by the file's inode.
  const listener_answer live = canopy::io::detail::listening_by_diag(file);
  if (live == listener_answer::unknown) {
    MESSAGE("sock_diag for Unix sockets is not available here; its checks are skipped");
  } else {
    CHECK(live == listener_answer::listening);
  }
  // /proc/net/unix: by the name it bound.
  CHECK(canopy::io::detail::listening_by_table(path) == listener_answer::listening);
  CHECK(accept_queue_empty(server));

  ::close(server);  // the file is now stale
  if (live != listener_answer::unknown) {
    CHECK(canopy::io::detail::listening_by_diag(file) == listener_answer::none);
  }
  CHECK(canopy::io::detail::listening_by_table(path) == listener_answer::unknown);
  CHECK(canopy::io::detail::listening_by_table(path, "/nonexistent/net/unix") ==
        listener_answer::unknown);

  // A table of /proc/net/unix's format: only a listening entry (Flags
  // 00010000) of the same name counts.
  const std::string table = temp_path("table") + ".txt";
  std::FILE* out = std::fopen(table.c_str(), "w");
  REQUIRE(out != nullptr);
  std::fprintf(out, "Num       RefCount Protocol Flags    Type St Inode Path\n");
  std::fprintf(out, "0000000000000000: 00000002 00000000 00000000 0001 01 11 %s\n", path.c_str());
  std::fprintf(out, "0000000000000000: 00000002 00000000 00010000 0001 01 12 %s.other\n",
               path.c_str());
  std::fprintf(out, "0000000000000000: 00000002 00000000 00010000 0001 01 13 @abstract\n");
  std::fclose(out);
  CHECK(canopy::io::detail::listening_by_table(path, table.c_str()) == listener_answer::unknown);
  out = std::fopen(table.c_str(), "a");
  REQUIRE(out != nullptr);
  std::fprintf(out, "0000000000000000: 00000002 00000000 00010000 0001 01 14 %s\n", path.c_str());
  std::fclose(out);
  CHECK(canopy::io::detail::listening_by_table(path, table.c_str()) == listener_answer::listening);
  ::unlink(table.c_str());
  ::unlink(path.c_str());
  CHECK(open_fd_count() == fds_before);
}
