// canopy::io TCP: round trips on IPv4 and IPv6, EOF, refused connections,
// abrupt resets at scale, a peer that never reads, shutdown with open
// connections. Every case checks that no descriptor leaks (/proc/self/fd).
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/fiber/fiber_io.hpp"
#include "io/io.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::io::endpoint;
using canopy::io::reactor;
using canopy::io::tcp_listener;
using canopy::io::tcp_stream;
using canopy::testing::eventually;
using canopy::testing::io_config;
using canopy::testing::open_fd_count;

namespace {

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

// Echo every byte back until EOF or an error; counts connections served.
task<void> echo_connection(tcp_stream peer, std::atomic<int>* finished) {
  std::array<std::byte, 4096> buffer{};
  for (;;) {
    std::error_code error;
    const std::size_t got = co_await peer.read_some(buffer, error);
    if (error || got == 0) {
      break;
    }
    co_await peer.write_all(std::span(buffer).first(got), error);
    if (error) {
      break;
    }
  }
  if (finished != nullptr) {
    finished->fetch_add(1);
  }
}

task<void> accept_loop(tcp_listener* listener, std::atomic<int>* finished) {
  for (;;) {
    std::error_code error;
    tcp_stream peer = co_await listener->accept(error);
    if (error) {
      if (error == std::errc::operation_canceled || error == std::errc::bad_file_descriptor) {
        co_return;
      }
      continue;  // EMFILE and friends: keep serving
    }
    canopy::spawn_detached(echo_connection(std::move(peer), finished));
  }
}

task<std::string> round_trip(reactor* owner, endpoint server, std::string message) {
  tcp_stream stream = co_await tcp_stream::connect(*owner, server);
  co_await stream.write_all(bytes_of(message));
  std::string answer;
  std::array<std::byte, 1024> buffer{};
  while (answer.size() < message.size()) {
    const std::size_t got = co_await stream.read_some(buffer);
    if (got == 0) {
      break;
    }
    answer.append(reinterpret_cast<const char*>(buffer.data()), got);
  }
  co_return answer;
}

}  // namespace

TEST_CASE("tcp echo round trips over IPv4 and IPv6") {
  const canopy::testing::watchdog guard("tcp echo", 60);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    for (const endpoint& local : {endpoint::loopback_v4(0), endpoint::loopback_v6(0)}) {
      std::error_code error;
      tcp_listener listener = tcp_listener::bind(owner, local, error);
      if (error && local.family() == AF_INET6) {
        MESSAGE("IPv6 loopback unavailable here: " << error.message());
        continue;
      }
      REQUIRE_FALSE(error);
      const endpoint server = listener.local_endpoint();
      CHECK(server.port() != 0);
      std::atomic<int> finished{0};
      pool.spawn_detached(accept_loop(&listener, &finished));
      std::vector<canopy::join_handle<std::string>> clients;
      for (int index = 0; index < 20; ++index) {
        clients.push_back(pool.spawn(round_trip(&owner, server, "hello " + std::to_string(index))));
      }
      for (int index = 0; index < 20; ++index) {
        CHECK(clients[static_cast<std::size_t>(index)].get() == "hello " + std::to_string(index));
      }
      CHECK(eventually([&] { return finished.load() == 20; }));
      listener.close();  // the accept loop ends with operation_canceled
    }
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("an IPv6 listener keeps the system's IPV6_V6ONLY default: on a v4-mapped address it takes IPv4") {
  // A listener on :: takes IPv4 exactly when the socket is not v6-only,
  // which the public contract says it is not unless net.ipv6.bindv6only
  // says so. Tests listen on loopback only: the v4-mapped loopback
  // (::ffff:127.0.0.1) binds only on a socket that is not v6-only, and then
  // takes IPv4 connections to 127.0.0.1, as :: would.
  const canopy::testing::watchdog guard("tcp v6only", 30);
  std::ifstream setting("/proc/sys/net/ipv6/bindv6only");
  int system_default = -1;
  setting >> system_default;
  if (system_default < 0) {
    MESSAGE("no /proc/sys/net/ipv6/bindv6only here: IPv6 is off, nothing to check");
    return;
  }
  executor pool(io_config(2));
  reactor& owner = reactor::of(pool);
  std::error_code error;
  const endpoint mapped = endpoint::parse("::ffff:127.0.0.1", 0, error);
  REQUIRE_FALSE(error);
  tcp_listener listener = tcp_listener::bind(owner, mapped, error);
  if (system_default != 0) {
    CHECK(error == std::errc::invalid_argument);  // v6-only: no IPv4 address to bind
    return;
  }
  REQUIRE_FALSE(error);
  std::atomic<int> finished{0};
  pool.spawn_detached(accept_loop(&listener, &finished));
  const endpoint over_v4 = endpoint::loopback_v4(listener.local_endpoint().port());
  CHECK(pool.spawn(round_trip(&owner, over_v4, "mapped")).get() == "mapped");
  CHECK(eventually([&] { return finished.load() == 1; }));
  listener.close();
}

TEST_CASE("reading after the peer closed gives EOF; connecting to a closed port ECONNREFUSED") {
  const canopy::testing::watchdog guard("tcp eof", 60);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
    const endpoint server = listener.local_endpoint();
    auto outcome = pool.spawn(
        [](reactor* owner, tcp_listener* listener, endpoint server) -> task<std::size_t> {
          tcp_stream client = co_await tcp_stream::connect(*owner, server);
          tcp_stream accepted = co_await listener->accept();
          co_await client.write_all(bytes_of("bye"));
          client.close();
          std::array<std::byte, 16> buffer{};
          std::size_t total = 0;
          for (;;) {
            const std::size_t got = co_await accepted.read_some(buffer);
            if (got == 0) {
              break;  // EOF after the three bytes
            }
            total += got;
          }
          // EOF again, and a write to the closed peer fails without SIGPIPE.
          CHECK(co_await accepted.read_some(buffer) == 0);
          co_return total;
        }(&owner, &listener, server));
    CHECK(outcome.get() == 3);

    listener.close();  // nothing listens on `server` any more
    auto refused = pool.spawn([](reactor* owner, endpoint server) -> task<std::error_code> {
      std::error_code error;
      tcp_stream stream = co_await tcp_stream::connect(*owner, server, error);
      CHECK_FALSE(stream.is_open());
      co_return error;
    }(&owner, server));
    CHECK(refused.get() == std::errc::connection_refused);

    // The throwing form says the same with an exception.
    auto thrown = pool.spawn([](reactor* owner, endpoint server) -> task<bool> {
      try {
        co_await tcp_stream::connect(*owner, server);
      } catch (const std::system_error& failure) {
        co_return failure.code() == std::errc::connection_refused;
      }
      co_return false;
    }(&owner, server));
    CHECK(thrown.get());
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("a write to a reset peer gives EPIPE or ECONNRESET, not SIGPIPE") {
  const canopy::testing::watchdog guard("tcp epipe", 60);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
    const endpoint server = listener.local_endpoint();
    auto outcome = pool.spawn(
        [](reactor* owner, tcp_listener* listener, endpoint server) -> task<std::error_code> {
          tcp_stream client = co_await tcp_stream::connect(*owner, server);
          tcp_stream accepted = co_await listener->accept();
          const linger abort_on_close{1, 0};
          ::setsockopt(client.native_handle(), SOL_SOCKET, SO_LINGER, &abort_on_close,
                       sizeof abort_on_close);
          client.close();  // RST
          std::vector<std::byte> block(64 * 1024);
          std::error_code error;
          for (int attempt = 0; attempt < 64 && !error; ++attempt) {
            co_await accepted.write_all(block, error);
          }
          co_return error;
        }(&owner, &listener, server));
    const std::error_code error = outcome.get();
    CHECK((error == std::errc::broken_pipe || error == std::errc::connection_reset));
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("10,000 connections reset abruptly while the server keeps serving") {
  const canopy::testing::watchdog guard("tcp resets", 120);
  const std::size_t fds_before = open_fd_count();
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  // Each connection costs two descriptors here (client and server side).
  const std::size_t batch =
      std::min<std::size_t>(500, limit.rlim_cur > 200 ? (limit.rlim_cur - 100) / 3 : 32);
  const long total = 10000 / canopy::testing::stress_divisor();
  std::atomic<int> finished{0};
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0), 4096);
    const endpoint server = listener.local_endpoint();
    pool.spawn_detached(accept_loop(&listener, &finished));
    long opened = 0;
    std::vector<int> clients;
    while (opened < total) {
      clients.clear();
      for (std::size_t index = 0; index < batch && opened < total; ++index, ++opened) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        REQUIRE(fd >= 0);
        REQUIRE(::connect(fd, server.data(), server.size()) == 0);
        if (index % 2 == 0) {
          const char byte = 'x';
          CHECK(::send(fd, &byte, 1, MSG_NOSIGNAL) == 1);
        }
        clients.push_back(fd);
      }
      for (const int fd : clients) {
        const linger abort_on_close{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
        ::close(fd);  // RST
      }
      // Bound the server's open descriptors before the next batch.
      REQUIRE(eventually([&] { return finished.load() == opened; }, 60));
    }
    // Still serving.
    CHECK(pool.spawn(round_trip(&owner, server, "still here")).get() == "still here");
    CHECK(eventually([&] { return finished.load() == total + 1; }));
    listener.close();
  }
  CHECK(finished.load() == total + 1);
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("a client that never reads: the server's writes wait, memory stays bounded") {
  const canopy::testing::watchdog guard("tcp slow reader", 60);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
    const endpoint server = listener.local_endpoint();
    const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(::connect(client, server.data(), server.size()) == 0);
    std::atomic<std::size_t> written{0};
    std::atomic<bool> writing_done{false};
    auto writer = pool.spawn([](tcp_listener* listener, std::atomic<std::size_t>* written,
                                std::atomic<bool>* done) -> task<std::error_code> {
      tcp_stream peer = co_await listener->accept();
      const std::vector<std::byte> chunk(64 * 1024);
      std::error_code error;
      while (!error) {
        co_await peer.write_all(chunk, error);
        if (!error) {
          written->fetch_add(chunk.size());
        }
      }
      done->store(true);
      co_return error;
    }(&listener, &written, &writing_done));
    // The writes stop growing once the socket buffers are full.
    std::size_t previous = 0;
    REQUIRE(eventually(
        [&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          const std::size_t now = written.load();
          const bool stable = now != 0 && now == previous;
          previous = now;
          return stable;
        },
        20));
    CHECK_FALSE(writing_done.load());
    // Bounded by the kernel's buffers, not by what the writer wanted to send.
    CHECK(written.load() < std::size_t{64} << 20);
    const linger abort_on_close{1, 0};
    ::setsockopt(client, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
    ::close(client);
    const std::error_code error = writer.get();
    CHECK((error == std::errc::broken_pipe || error == std::errc::connection_reset));
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE(
    "shutdown with open connections and waiting tasks destroys every task and closes every "
    "descriptor") {
  const canopy::testing::watchdog guard("tcp shutdown", 60);
  const std::size_t fds_before = open_fd_count();
  std::atomic<int> destroyed{0};
  constexpr int connections = 16;
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    auto listener =
        std::make_shared<tcp_listener>(tcp_listener::bind(owner, endpoint::loopback_v4(0)));
    const endpoint server = listener->local_endpoint();
    std::atomic<int> waiting{0};
    // Server: accept, then each connection waits in read_some forever.
    pool.spawn_detached([](std::shared_ptr<tcp_listener> listener, std::atomic<int>* destroyed,
                           std::atomic<int>* waiting) -> task<void> {
      canopy::testing::destroy_flag flag(*destroyed);
      for (;;) {
        tcp_stream peer = co_await listener->accept();
        canopy::spawn_detached([](tcp_stream peer, std::atomic<int>* destroyed,
                                  std::atomic<int>* waiting) -> task<void> {
          canopy::testing::destroy_flag flag(*destroyed);
          std::array<std::byte, 64> buffer{};
          waiting->fetch_add(1);
          co_await peer.read_some(buffer);  // never completes
        }(std::move(peer), destroyed, waiting));
      }
    }(listener, &destroyed, &waiting));
    // Clients: connect and also wait in read_some.
    for (int index = 0; index < connections; ++index) {
      pool.spawn_detached([](reactor* owner, endpoint server, std::atomic<int>* destroyed,
                             std::atomic<int>* waiting) -> task<void> {
        canopy::testing::destroy_flag flag(*destroyed);
        tcp_stream stream = co_await tcp_stream::connect(*owner, server);
        std::array<std::byte, 64> buffer{};
        waiting->fetch_add(1);
        co_await stream.read_some(buffer);
      }(&owner, server, &destroyed, &waiting));
    }
    REQUIRE(eventually([&] { return waiting.load() == 2 * connections; }));
    CHECK(open_fd_count() >= fds_before + 2 * connections);
    pool.shutdown();
  }
  CHECK(destroyed.load() == 2 * connections + 1);
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("fiber forms: accept, connect, read_some, write_all") {
  const canopy::testing::watchdog guard("tcp fibers", 60);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
    const endpoint server = listener.local_endpoint();
    auto served = pool.spawn(canopy::fiber([&listener] {
      tcp_stream peer = canopy::this_fiber::accept(listener);
      std::array<std::byte, 64> buffer{};
      std::size_t total = 0;
      for (;;) {
        const std::size_t got = canopy::this_fiber::read_some(peer, buffer);
        if (got == 0) {
          break;
        }
        canopy::this_fiber::write_all(peer, std::span(buffer).first(got));
        total += got;
      }
      return total;
    }));
    auto client = pool.spawn(canopy::fiber([&owner, server] {
      tcp_stream stream = canopy::this_fiber::connect(owner, server);
      canopy::this_fiber::write_all(stream, bytes_of("fiber"));
      std::array<std::byte, 64> buffer{};
      std::string answer;
      while (answer.size() < 5) {
        const std::size_t got = canopy::this_fiber::read_some(stream, buffer);
        if (got == 0) {
          break;
        }
        answer.append(reinterpret_cast<const char*>(buffer.data()), got);
      }
      stream.shutdown(SHUT_WR);
      return answer;
    }));
    CHECK(client.get() == "fiber");
    CHECK(served.get() == 5);
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("the last bytes and the peer's FIN in one edge: a short read, then EOF") {
  const canopy::testing::watchdog guard("data and FIN in one edge", 60);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    int ends[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) == 0);
    // Data and FIN are queued before the registration exists, so epoll
    // reports them as one edge (EPOLLIN | EPOLLRDHUP).
    REQUIRE(::write(ends[1], "bye", 3) == 3);
    REQUIRE(::shutdown(ends[1], SHUT_WR) == 0);
    std::error_code error;
    tcp_stream stream(owner, ends[0], error);
    REQUIRE_FALSE(error);
    auto reads = pool.spawn([](tcp_stream* reader) -> task<std::size_t> {
      // Let the idle worker's poller deliver the edge before the first read,
      // so that read's tick is the edge's.
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      std::array<std::byte, 16> buffer{};
      const std::size_t first = co_await reader->read_some(buffer);   // short: 3 of 16
      const std::size_t second = co_await reader->read_some(buffer);  // EOF: hung before
      co_return first * 100 + second;
    }(&stream));
    REQUIRE(reads.wait_for(std::chrono::seconds(10)));
    CHECK(reads.get() == 300);
    stream.close();
    ::close(ends[1]);
  }
  CHECK(open_fd_count() == fds_before);
}

namespace {

// Reads once into `buffer`; the error form, so a refusal is a value.
template <class Stream>
task<std::size_t> read_once(Stream* stream, std::span<std::byte> buffer, std::error_code* error) {
  co_return co_await stream->read_some(buffer, *error);
}

// Two tasks read one stream at once (a misuse: one operation per direction
// at a time). Exactly one of them is refused with EALREADY at once; the
// other gets the bytes; a read after both works. Returns the bytes read.
template <class Stream>
task<std::size_t> two_readers(Stream* reader, Stream* writer) {
  std::array<std::byte, 16> first_buffer{};
  std::array<std::byte, 16> second_buffer{};
  std::error_code first_error;
  std::error_code second_error;
  auto first = canopy::spawn(read_once(reader, std::span(first_buffer), &first_error));
  // Let the first read arm; if it has not, the second arms and the first
  // is the one refused: either way one waits while the other starts.
  co_await canopy::sleep_for(std::chrono::milliseconds(50));
  auto second = canopy::spawn(read_once(reader, std::span(second_buffer), &second_error));
  co_await canopy::sleep_for(std::chrono::milliseconds(50));
  co_await writer->write_all(bytes_of("ping"));
  const std::size_t first_got = co_await first;
  const std::size_t second_got = co_await second;
  const std::error_code busy = std::make_error_code(std::errc::connection_already_in_progress);
  CHECK(((first_error == busy) != (second_error == busy)));
  CHECK(first_got + second_got == 4);
  CHECK((first_error == busy ? second_error : first_error) == std::error_code());
  // Nothing of the refused read stays behind: the next read works.
  co_await writer->write_all(bytes_of("pong"));
  std::array<std::byte, 16> third_buffer{};
  std::error_code third_error;
  const std::size_t third = co_await reader->read_some(third_buffer, third_error);
  CHECK_FALSE(third_error);
  co_return first_got + second_got + third;
}

}  // namespace

TEST_CASE("a second read in the same direction is refused with EALREADY, not left waiting") {
  const canopy::testing::watchdog guard("two readers", 60);
  const std::size_t fds_before = open_fd_count();
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    canopy::io::reactor_timers timers(pool);  // for the test's sleep_for
    tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
    const endpoint server = listener.local_endpoint();
    auto tcp = pool.spawn(
        [](reactor* owner, tcp_listener* listener, endpoint server) -> task<std::size_t> {
          tcp_stream client = co_await tcp_stream::connect(*owner, server);
          tcp_stream accepted = co_await listener->accept();
          co_return co_await two_readers(&accepted, &client);
        }(&owner, &listener, server));
    REQUIRE(tcp.wait_for(std::chrono::seconds(20)));
    CHECK(tcp.get() == 8);

    // A Unix stream (readiness waits on both backends).
    int ends[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) == 0);
    std::error_code error;
    canopy::io::unix_stream reader(owner, ends[0], error);
    REQUIRE_FALSE(error);
    canopy::io::unix_stream writer(owner, ends[1], error);
    REQUIRE_FALSE(error);
    auto unix_pair = pool.spawn(two_readers(&reader, &writer));
    REQUIRE(unix_pair.wait_for(std::chrono::seconds(20)));
    CHECK(unix_pair.get() == 8);
  }
  CHECK(open_fd_count() == fds_before);
}

namespace {

// Connects `count` times in turn; each connection sends one byte and waits
// for one back: a connection the server dropped reads EOF or a reset.
task<void> connect_in_turn(endpoint server, int count, std::atomic<int>* dropped) {
  for (int index = 0; index < count; ++index) {
    tcp_stream client = co_await tcp_stream::connect(server);
    co_await client.write_all(bytes_of("x"));
    std::array<std::byte, 1> answer{};
    std::error_code error;
    const std::size_t got = co_await client.read_some(answer, error);
    if (error || got == 0) {
      dropped->fetch_add(1);
    }
  }
}

}  // namespace

TEST_CASE("an accept that loses a race with with_timeout drops no connection") {
  const canopy::testing::watchdog guard("accept race", 120);
  const std::size_t fds_before = open_fd_count();
  constexpr int connections = 300;
  {
    executor pool(io_config(2));
    reactor& owner = reactor::of(pool);
    tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
    std::atomic<int> dropped{0};
    auto clients = pool.spawn(connect_in_turn(listener.local_endpoint(), connections, &dropped));
    const auto [accepted, timeouts] = canopy::block_on(
        pool, [](tcp_listener& listener, std::atomic<int>& dropped) -> task<std::pair<int, int>> {
          int accepted = 0;
          int timeouts = 0;
          // Timeouts of 0-29 µs: most accepts lose their race, many of them
          // after the kernel took the connection.
          for (int round = 0; accepted + dropped.load() < connections; ++round) {
            auto next = co_await canopy::with_timeout(std::chrono::microseconds(round % 30),
                                                      listener.accept());
            if (!next) {
              ++timeouts;
              continue;
            }
            ++accepted;
            tcp_stream peer = std::move(*next);
            std::array<std::byte, 1> byte{};
            std::error_code error;
            co_await peer.read_some(byte, error);
            co_await peer.write_all(bytes_of("k"), error);
          }
          co_return std::pair{accepted, timeouts};
        }(listener, dropped));
    clients.get();
    MESSAGE("accepted " << accepted << ", timed out " << timeouts << ", dropped " << dropped.load());
    CHECK(dropped.load() == 0);
    CHECK(accepted == connections);
    listener.close();
  }
  CHECK(open_fd_count() == fds_before);
}
