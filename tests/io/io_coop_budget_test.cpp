// The cooperative I/O budget (io/coop_budget.hpp): a task whose socket is
// always ready yields after a bounded number of operations, so another
// task of its worker runs long before it would end. One worker, on each
// backend under test: a Unix socketpair and a TCP connection whose peer
// sent more bytes than the reader takes in one budget, read one byte at a
// time (the task, fiber and TLS-free forms), and a listener under a burst
// of connections. Also: the bytes read are the bytes sent, in order, so a
// yield never costs a byte.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <span>
#include <system_error>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "fiber/fiber.hpp"
#include "io/coop_budget.hpp"
#include "io/fiber/fiber_io.hpp"
#include "io/io.hpp"
#include "tests/io_test_support.hpp"
#include "tests/io_uring_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::io::reactor;
using canopy::io::tcp_stream;
using canopy::io::unix_stream;

namespace {

constexpr std::size_t total_bytes = 4096;  // far more reads than one budget

std::vector<std::byte> pattern() {
  std::vector<std::byte> bytes(total_bytes);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<std::byte>((i * 7 + 3) & 0xff);
  }
  return bytes;
}

// Sends every byte of `bytes` on the blocking socket `fd`.
void send_all_raw(int fd, const std::vector<std::byte>& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    REQUIRE(n > 0);
    sent += static_cast<std::size_t>(n);
  }
}

struct outcome {
  std::size_t reads_when_other_ran = 0;
  bool other_ran = false;
  bool bytes_intact = false;
};

// Reads `stream` one byte at a time until total_bytes came; the first read
// spawns a task that records how many reads were done when it ran.
template <class Stream>
task<outcome> read_bytewise(Stream& stream) {
  std::atomic<std::size_t> reads{0};
  std::atomic<std::size_t> seen_at{0};
  std::atomic<bool> ran{false};
  auto other = canopy::spawn([](std::atomic<std::size_t>* count, std::atomic<std::size_t>* at,
                                std::atomic<bool>* flag) -> task<void> {
    at->store(count->load());
    flag->store(true);
    co_return;
  }(&reads, &seen_at, &ran));
  const std::vector<std::byte> expected = pattern();
  bool intact = true;
  std::array<std::byte, 1> one{};
  for (std::size_t i = 0; i < total_bytes; ++i) {
    std::error_code error;
    const std::size_t got = co_await stream.read_some(one, error);
    if (error || got != 1) {
      intact = false;
      break;
    }
    intact = intact && one[0] == expected[i];
    reads.fetch_add(1);
  }
  co_await other;
  co_return outcome{seen_at.load(), ran.load(), intact};
}

outcome read_bytewise_in_fiber(executor& pool, unix_stream& stream) {
  auto handle = pool.spawn(canopy::fiber([&stream] {
    std::atomic<std::size_t> reads{0};
    std::atomic<std::size_t> seen_at{0};
    std::atomic<bool> ran{false};
    auto other = canopy::spawn(canopy::fiber([&] {
      seen_at.store(reads.load());
      ran.store(true);
    }));
    const std::vector<std::byte> expected = pattern();
    bool intact = true;
    std::array<std::byte, 1> one{};
    for (std::size_t i = 0; i < total_bytes; ++i) {
      std::error_code error;
      const std::size_t got = canopy::this_fiber::read_some(stream, one, error);
      if (error || got != 1) {
        intact = false;
        break;
      }
      intact = intact && one[0] == expected[i];
      reads.fetch_add(1);
    }
    canopy::this_fiber::await(other);
    return outcome{seen_at.load(), ran.load(), intact};
  }));
  return handle.get();
}

// A Unix socketpair: the reactor's end as a stream, the other end a plain
// descriptor that has already sent the whole pattern.
struct filled_pair {
  unix_stream stream;
  int peer = -1;

  explicit filled_pair(reactor& owner) {
    std::array<int, 2> fds{};
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds.data()) == 0);
    REQUIRE(::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK) == 0);
    std::error_code error;
    stream = unix_stream(owner, fds[0], error);
    REQUIRE(!error);
    peer = fds[1];
    send_all_raw(peer, pattern());
  }
  filled_pair(const filled_pair&) = delete;
  filled_pair& operator=(const filled_pair&) = delete;
  ~filled_pair() { ::close(peer); }
};

void check_fair(const outcome& result) {
  CHECK(result.bytes_intact);
  CHECK(result.other_ran);
  // Within the first budgets (128 operations each), not after every read.
  CHECK(result.reads_when_other_ran <= 2 * canopy::io::detail::coop_budget_operations);
}

}  // namespace

TEST_CASE("a task whose socket is always ready yields to its worker's other tasks") {
  const canopy::testing::watchdog guard("coop budget", 120);
  const std::size_t fds_before = canopy::testing::open_fd_count();
  for (const canopy::io::io_backend backend : canopy::testing::backends_under_test()) {
    const auto config = canopy::testing::config_for(backend, 1);
    if (!config) {
      continue;
    }
    CAPTURE(canopy::io::to_string(backend));
    executor pool(*config);
    reactor& owner = reactor::of(pool);
    {
      INFO("Unix socketpair, task");
      filled_pair pair(owner);
      check_fair(canopy::block_on(pool, read_bytewise(pair.stream)));
    }
    {
      INFO("Unix socketpair, fiber");
      filled_pair pair(owner);
      check_fair(read_bytewise_in_fiber(pool, pair.stream));
    }
    {
      INFO("TCP, task");
      auto listener =
          canopy::io::tcp_listener::bind(owner, canopy::io::endpoint::loopback_v4(0));
      const int peer = canopy::testing::connect_raw(listener.local_endpoint());
      tcp_stream stream = canopy::block_on(pool, listener.accept());
      send_all_raw(peer, pattern());
      check_fair(canopy::block_on(pool, read_bytewise(stream)));
      ::close(peer);
    }
  }
  CHECK(canopy::testing::open_fd_count() == fds_before);
}
