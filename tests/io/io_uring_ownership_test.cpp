// The buffer-ownership rule of completion I/O (issue 29, docs/io.md): a
// read or send that ends early — a timeout, a cancel through its task's
// handle, the executor shut down, the socket closed — has its kernel
// operation cancelled before its wait ends, so the kernel never writes into
// or reads from the buffer afterwards, and the socket stays usable. Each
// case runs on both backends, or on the one CANOPY_IO_BACKEND names (run.sh
// runs this binary once per backend); descriptors are counted before and
// after. Where io_uring cannot run, see tests/io_uring_support.hpp.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/io.hpp"
#include "io/readiness.hpp"
#include "io/socket_ops.hpp"
#include "tests/io_test_support.hpp"
#include "tests/io_uring_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::io::endpoint;
using canopy::io::io_backend;
using canopy::io::reactor;
using canopy::io::tcp_listener;
using canopy::io::tcp_stream;
using canopy::testing::ask;
using canopy::testing::backends_under_test;
using canopy::testing::config_for;
using canopy::testing::connect_raw;
using canopy::testing::eventually;
using canopy::testing::open_fd_count;
using namespace std::chrono_literals;

namespace {

constexpr std::byte sentinel{0xA5};

// Reads from `fd` until EOF, or until nothing came for `quiet`; appends to
// `out` and returns whether EOF was seen. Bounded by `limit` overall.
bool drain(int fd, std::vector<std::byte>& out, std::chrono::milliseconds quiet,
           std::chrono::seconds limit = 20s) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  std::array<std::byte, 65536> chunk{};
  while (std::chrono::steady_clock::now() < give_up) {
    pollfd ready{fd, POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(quiet.count())) <= 0) {
      return false;
    }
    const ssize_t got = ::recv(fd, chunk.data(), chunk.size(), 0);
    if (got <= 0) {
      return got == 0;
    }
    out.insert(out.end(), chunk.begin(), chunk.begin() + got);
  }
  return false;
}

bool all_sentinel(const std::vector<std::byte>& buffer) {
  for (const std::byte value : buffer) {
    if (value != sentinel) {
      return false;
    }
  }
  return true;
}

std::byte pattern_at(std::size_t index) { return static_cast<std::byte>((index * 131 + 7) % 251); }

// The listener and one accepted stream, with the test thread's raw peer.
struct connected_pair {
  tcp_listener listener;
  tcp_stream stream;
  int peer = -1;
  connected_pair(executor& pool, reactor& owner)
      : listener(tcp_listener::bind(owner, endpoint::loopback_v4(0))) {
    peer = connect_raw(listener.local_endpoint());
    stream = canopy::block_on(pool, listener.accept());
  }
  connected_pair(const connected_pair&) = delete;
  connected_pair& operator=(const connected_pair&) = delete;
  ~connected_pair() {
    if (peer >= 0) {
      ::close(peer);
    }
  }
};

// After a read into `buffer` ended early: bytes the peer sends now land
// nowhere in `buffer` and stay in the socket for a fresh read.
void check_bytes_still_readable(executor& pool, connected_pair& pair,
                                const std::vector<std::byte>& buffer) {
  const std::string payload = "still here";
  REQUIRE(::send(pair.peer, payload.data(), payload.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(payload.size()));
  std::this_thread::sleep_for(100ms);
  CHECK_MESSAGE(all_sentinel(buffer), "the kernel wrote into a buffer after its read ended");
  auto fresh = canopy::block_on(pool, [](tcp_stream* stream) -> task<std::string> {
    std::array<std::byte, 64> room{};
    std::error_code error;
    auto got = co_await canopy::with_timeout(10s, stream->read_some(room, error));
    if (!got || error) {
      co_return "(no read: " + (error ? error.message() : std::string("timed out")) + ")";
    }
    co_return std::string(reinterpret_cast<const char*>(room.data()), *got);
  }(&pair.stream));
  CHECK(fresh == payload);  // a zombie receive would have consumed them
}

}  // namespace

TEST_CASE("a read in flight that times out, is cancelled or closed never writes the buffer") {
  const canopy::testing::watchdog guard("cancel a read in flight", 90);
  for (const io_backend backend : backends_under_test()) {
    INFO("backend " << std::string(to_string(backend)));
    const std::size_t fds_before = open_fd_count();
    {
      auto config = config_for(backend);
      if (!config) {
        continue;
      }
      executor pool(std::move(*config));
      canopy::io::reactor_timers timers(pool);
      reactor& owner = reactor::of(pool);
      REQUIRE(owner.backend() == backend);
      std::vector<std::byte> buffer(4096, sentinel);

      // with_timeout on the read's task: the child awaiting it is destroyed.
      connected_pair timed(pool, owner);
      auto timed_out =
          canopy::block_on(pool, [](tcp_stream* stream, std::span<std::byte> into) -> task<bool> {
            std::error_code error;
            auto got = co_await canopy::with_timeout(50ms, stream->read_some(into, error));
            co_return !got && got.error() == canopy::io::errc::timed_out;
          }(&timed.stream, buffer));
      CHECK(timed_out);
      check_bytes_still_readable(pool, timed, buffer);

      // The reading task cancelled through its handle.
      connected_pair cancelled(pool, owner);
      std::atomic<bool> reading{false};
      auto reader = pool.spawn([](tcp_stream* stream, std::span<std::byte> into,
                                  std::atomic<bool>* reading) -> task<std::size_t> {
        reading->store(true);
        co_return co_await stream->read_some(into);
      }(&cancelled.stream, buffer, &reading));
      REQUIRE(eventually([&] { return reading.load(); }));
      CHECK_FALSE(reader.wait_for(50ms));  // waiting in the read
      CHECK(reader.cancel());
      CHECK_THROWS_AS(static_cast<void>(reader.get()), canopy::task_cancelled);
      check_bytes_still_readable(pool, cancelled, buffer);

      // The stream closed from another thread: the read ends with
      // operation_canceled, and the peer's later bytes go nowhere.
      connected_pair closed(pool, owner);
      reading.store(false);
      auto orphan = pool.spawn([](tcp_stream* stream, std::span<std::byte> into,
                                  std::atomic<bool>* reading) -> task<std::error_code> {
        reading->store(true);
        std::error_code error;
        static_cast<void>(co_await stream->read_some(into, error));
        co_return error;
      }(&closed.stream, buffer, &reading));
      REQUIRE(eventually([&] { return reading.load(); }));
      CHECK_FALSE(orphan.wait_for(50ms));
      closed.stream.close();
      CHECK(orphan.get() == std::errc::operation_canceled);
      static_cast<void>(::send(closed.peer, "late", 4, MSG_NOSIGNAL));
      std::this_thread::sleep_for(50ms);
      CHECK(all_sentinel(buffer));
    }
    CHECK(open_fd_count() == fds_before);
  }
}

TEST_CASE("a send to a peer that never reads, cancelled or shut down: its buffer is let go") {
  const canopy::testing::watchdog guard("destroy a pending send", 120);
  constexpr std::size_t size = std::size_t{4} << 20;
  for (const io_backend backend : backends_under_test()) {
    for (const bool by_shutdown : {false, true}) {
      INFO("backend " << std::string(to_string(backend))
                      << (by_shutdown ? ", shutdown" : ", cancel"));
      const std::size_t fds_before = open_fd_count();
      std::vector<std::byte> received;
      bool eof = false;
      {
        auto config = config_for(backend);
        if (!config) {
          continue;
        }
        executor pool(std::move(*config));
        reactor& owner = reactor::of(pool);
        tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
        const int small = 4096;
        const int peer = connect_raw(listener.local_endpoint());
        REQUIRE(::setsockopt(peer, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0);
        auto data = std::make_unique<std::vector<std::byte>>(size);
        for (std::size_t index = 0; index < size; ++index) {
          (*data)[index] = pattern_at(index);
        }
        std::atomic<bool> sending{false};
        auto sender = pool.spawn([](tcp_listener* listener, std::span<const std::byte> data,
                                    std::atomic<bool>* sending) -> task<void> {
          tcp_stream stream = co_await listener->accept();
          const int small = 4096;
          ::setsockopt(stream.native_handle(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
          sending->store(true);
          co_await stream.write_all(data);  // never completes: the peer does not read
        }(&listener, *data, &sending));
        REQUIRE(eventually([&] { return sending.load(); }));
        CHECK_FALSE(sender.wait_for(100ms));
        if (by_shutdown) {
          pool.shutdown();
        } else {
          CHECK(sender.cancel());
          CHECK_THROWS_AS(sender.get(), canopy::task_cancelled);
        }
        // The send's data overwritten and freed: a send still in the kernel
        // would now put zeros (or freed memory) on the wire.
        std::fill(data->begin(), data->end(), std::byte{0});
        data.reset();
        const int large = 1 << 20;  // drain at full speed, not through a 4 KiB window
        REQUIRE(::setsockopt(peer, SOL_SOCKET, SO_RCVBUF, &large, sizeof large) == 0);
        eof = drain(peer, received, 2000ms);
        ::close(peer);
      }
      CHECK(eof);  // the stream was closed with its task
      CHECK(received.size() < size);
      std::size_t mismatched = 0;
      for (std::size_t index = 0; index < received.size(); ++index) {
        mismatched += received[index] != pattern_at(index) ? 1 : 0;
      }
      CHECK_MESSAGE(mismatched == 0, "bytes on the wire after the send ended: " << mismatched);
      CHECK(open_fd_count() == fds_before);
    }
  }
}

TEST_CASE("a receive that timed out leaves the stream clean for the next read") {
  const canopy::testing::watchdog guard("time out a receive", 90);
  for (const io_backend backend : backends_under_test()) {
    INFO("backend " << std::string(to_string(backend)));
    auto config = config_for(backend);
    if (!config) {
      continue;
    }
    executor pool(std::move(*config));
    canopy::io::reactor_timers timers(pool);
    reactor& owner = reactor::of(pool);
    connected_pair pair(pool, owner);
    std::vector<std::byte> buffer(1024, sentinel);
    // Three timeouts in a row, each ending its own operation.
    auto timeouts =
        canopy::block_on(pool, [](tcp_stream* stream, std::span<std::byte> into) -> task<int> {
          int count = 0;
          for (int round = 0; round < 3; ++round) {
            std::error_code error;
            auto got =
                co_await canopy::with_timeout(10ms * (round + 1), stream->read_some(into, error));
            count += !got && !error ? 1 : 0;
          }
          co_return count;
        }(&pair.stream, buffer));
    CHECK(timeouts == 3);
    CHECK(all_sentinel(buffer));
    check_bytes_still_readable(pool, pair, buffer);
    // The HTTP server's form (io/http/http_server.cpp): one readiness
    // attempt raced against an absolute deadline with with_deadline, on the
    // same stream its completion reads used; then the completion form again.
    auto http_form =
        canopy::block_on(pool, [](tcp_stream* stream, std::span<std::byte> into) -> task<bool> {
          const auto deadline = canopy::io::detail::timer_queue::clock::now() + 20ms;
          canopy::io::detail::readiness_op next(
              stream->reg(), canopy::io::direction::read,
              canopy::io::detail::recv_attempt(stream->native_handle(), into), into.size());
          co_return !next.ready() && !co_await canopy::with_deadline(deadline, next);
        }(&pair.stream, buffer));
    CHECK(http_form);  // timed out
    CHECK(all_sentinel(buffer));
    check_bytes_still_readable(pool, pair, buffer);
  }
}

TEST_CASE("shutdown with 1,000 reads and accepts in flight: prompt, every descriptor closed") {
  const canopy::testing::watchdog guard("shutdown with 1000 in flight", 120);
  constexpr int pairs = 500;  // a pending read at each end: 1,000 operations
  // 1,000 sockets and the executor's own descriptors: past a soft limit of 1,024.
  rlimit files{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &files) == 0);
  if (files.rlim_cur < 4096 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, 4096);
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &files) == 0);
  }
  REQUIRE(files.rlim_cur >= 2 * pairs + 64);
  for (const io_backend backend : backends_under_test()) {
    INFO("backend " << std::string(to_string(backend)));
    const std::size_t fds_before = open_fd_count();
    std::atomic<int> destroyed{0};
    std::chrono::steady_clock::duration took{};
    {
      auto config = config_for(backend);
      if (!config) {
        continue;
      }
      executor pool(std::move(*config));
      reactor& owner = reactor::of(pool);
      auto listener =
          std::make_shared<tcp_listener>(tcp_listener::bind(owner, endpoint::loopback_v4(0)));
      const endpoint server = listener->local_endpoint();
      std::atomic<int> waiting{0};
      pool.spawn_detached([](std::shared_ptr<tcp_listener> listener, std::atomic<int>* destroyed,
                             std::atomic<int>* waiting) -> task<void> {
        const canopy::testing::destroy_flag flag(*destroyed);
        for (;;) {
          tcp_stream peer = co_await listener->accept();  // in flight at shutdown
          canopy::spawn_detached([](tcp_stream peer, std::atomic<int>* destroyed,
                                    std::atomic<int>* waiting) -> task<void> {
            const canopy::testing::destroy_flag flag(*destroyed);
            std::vector<std::byte> buffer(512, sentinel);
            waiting->fetch_add(1);
            co_await peer.read_some(buffer);
          }(std::move(peer), destroyed, waiting));
        }
      }(listener, &destroyed, &waiting));
      for (int index = 0; index < pairs; ++index) {
        pool.spawn_detached([](reactor* owner, endpoint server, std::atomic<int>* destroyed,
                               std::atomic<int>* waiting) -> task<void> {
          const canopy::testing::destroy_flag flag(*destroyed);
          tcp_stream stream = co_await tcp_stream::connect(*owner, server);
          std::vector<std::byte> buffer(512, sentinel);
          waiting->fetch_add(1);
          co_await stream.read_some(buffer);
        }(&owner, server, &destroyed, &waiting));
      }
      REQUIRE(eventually([&] { return waiting.load() == 2 * pairs; }, 60));
      std::this_thread::sleep_for(50ms);  // every read submitted, not only started
      CHECK(open_fd_count() >= fds_before + 2 * pairs);
      // The connects and accepts completed on the ring (a silent fallback to
      // readiness would show none).
      CHECK((owner.stats().completions > 0) == (backend == io_backend::io_uring));
      const auto start = std::chrono::steady_clock::now();
      pool.shutdown();
      took = std::chrono::steady_clock::now() - start;
    }
    CHECK(destroyed.load() == 2 * pairs + 1);
    CHECK(open_fd_count() == fds_before);
    MESSAGE(std::string(to_string(backend))
            << ": shutdown with " << 2 * pairs << " operations in flight took "
            << std::chrono::duration<double, std::milli>(took).count() << " ms");
    // Prompt: well under a second's work for a correct backend, while
    // cancellations that each wait for their own completion in turn add up.
    CHECK(took < std::chrono::duration<double>(2 * canopy::testing::timeout_scale()));
  }
}

TEST_CASE("200 connections served: no descriptor left behind, completions counted") {
  const canopy::testing::watchdog guard("200 connections", 120);
  constexpr int connections = 200;
  for (const io_backend backend : backends_under_test()) {
    INFO("backend " << std::string(to_string(backend)));
    const std::size_t fds_before = open_fd_count();
    {
      auto config = config_for(backend);
      if (!config) {
        continue;
      }
      executor pool(std::move(*config));
      reactor& owner = reactor::of(pool);
      tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
      const endpoint server = listener.local_endpoint();
      const std::size_t fds_serving = open_fd_count();
      std::atomic<int> served{0};
      auto acceptor =
          pool.spawn([](tcp_listener* listener, std::atomic<int>* served) -> task<void> {
            for (;;) {
              std::error_code error;
              tcp_stream peer = co_await listener->accept(error);
              if (error) {
                co_return;  // closed: operation_canceled
              }
              canopy::spawn_detached([](tcp_stream peer, std::atomic<int>* served) -> task<void> {
                std::array<std::byte, 256> buffer{};
                for (;;) {
                  std::error_code failure;
                  const std::size_t got = co_await peer.read_some(buffer, failure);
                  if (failure || got == 0) {
                    break;
                  }
                  co_await peer.write_all(std::span(buffer).first(got), failure);
                }
                served->fetch_add(1);
              }(std::move(peer), served));
            }
          }(&listener, &served));
      // In rounds of 50 concurrent clients.
      int answered = 0;
      for (int round = 0; round < connections / 50; ++round) {
        std::vector<canopy::join_handle<std::string>> clients;
        for (int index = 0; index < 50; ++index) {
          clients.push_back(pool.spawn(ask(&owner, server, "request " + std::to_string(index))));
        }
        for (int index = 0; index < 50; ++index) {
          answered +=
              clients[static_cast<std::size_t>(index)].get() == "request " + std::to_string(index)
                  ? 1
                  : 0;
        }
      }
      CHECK(answered == connections);
      CHECK(eventually([&] { return served.load() == connections; }));
      // Every connection's two descriptors closed while the executor runs.
      CHECK(eventually([&] { return open_fd_count() == fds_serving; }));
      const canopy::io::reactor_stats stats = owner.stats();
      CHECK(stats.backend == backend);
      if (backend == io_backend::io_uring) {
        CHECK(stats.completions >= static_cast<std::uint64_t>(connections));
      } else {
        CHECK(stats.completions == 0);
      }
      listener.close();
      acceptor.get();
    }
    CHECK(open_fd_count() == fds_before);
  }
}

// An accept that completes while its worker is busy, with the executor
// shut down before the task could take the connection: the accepted
// descriptor is closed when the task is destroyed, not leaked.
TEST_CASE("an accepted connection nobody took is closed at shutdown") {
  const canopy::testing::watchdog guard("accept not taken", 60);
  for (const io_backend backend : backends_under_test()) {
    INFO("backend " << std::string(to_string(backend)));
    const std::size_t fds_before = open_fd_count();
    {
      auto config = config_for(backend, 1);
      if (!config) {
        continue;
      }
      config->on_shutdown = canopy::shutdown_policy::cancel_pending;  // no run after the spin
      executor pool(std::move(*config));
      tcp_listener listener = tcp_listener::bind(reactor::of(pool), endpoint::loopback_v4(0));
      auto acceptor = pool.spawn([](tcp_listener* listener) -> task<void> {
        tcp_stream peer = co_await listener->accept();
        (void)peer;
      }(&listener));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // its accept is in flight
      // The only worker spins, so the completion stays unreaped.
      std::atomic<bool> spinning{false};
      auto busy = pool.spawn([&spinning] {
        spinning.store(true);
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
        while (std::chrono::steady_clock::now() < until) {
        }
      });
      REQUIRE(eventually([&] { return spinning.load(); }));
      const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      REQUIRE(client >= 0);
      const endpoint server = listener.local_endpoint();
      REQUIRE(::connect(client, server.data(), server.size()) == 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the kernel accepts it
      pool.shutdown();  // after the busy task: the acceptor never runs again
      CHECK_THROWS_AS(acceptor.get(), canopy::task_cancelled);
      busy.get();
      ::close(client);
    }
    CHECK(open_fd_count() == fds_before);
  }
}
