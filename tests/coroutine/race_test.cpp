// race(a, b, ...) and stopped(token) (<canopy/race.hpp>): the first
// contender to end wins; the others are cancelled and have ended (frames
// destroyed, destructors run) when race returns; a winner's exception is
// race's; a cancelled racing task ends its contenders before itself; a read
// that loses to a stop keeps the stream usable and loses no bytes (on each
// I/O backend, or the one CANOPY_IO_BACKEND names); fibers race through a
// task that awaits them.
#include "coroutine/race.hpp"

#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "coroutine/await_all.hpp"
#include "coroutine/coroutine.hpp"
#include "coroutine/stop_wait.hpp"
#include "fiber/fiber.hpp"
#include "io/fiber/timer_fiber.hpp"
#include "io/io.hpp"
#include "io/timer/timer_binding.hpp"
#include "io/timer/timer_wait.hpp"
#include "io/unix.hpp"
#include "tests/io_test_support.hpp"
#include "tests/io_uring_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::testing::destroy_flag;
using namespace std::chrono_literals;

namespace {

long scaled(long count) { return std::max(1L, count / canopy::testing::stress_divisor()); }

// Sleeps, then returns `value`; counts its frame's destruction.
task<int> sleeper(std::chrono::milliseconds pause, int value, std::atomic<int>& destroyed) {
  const destroy_flag guard(destroyed);
  co_await canopy::sleep_for(pause);
  co_return value;
}

task<void> throws_after_yield() {
  co_await canopy::yield_now();
  throw std::runtime_error("contender failed");
}

// Its destructor reads a local of the racing task's frame: under ASan a
// racing task whose frame went first fails here. `seen` adds the value.
struct borrows_parent {
  const int* parent_local;
  std::atomic<int>* seen;
  ~borrows_parent() { seen->fetch_add(*parent_local); }
};

struct race_probe {
  std::atomic<int> started{0};       // contenders that built their guard
  std::atomic<int> seen{0};          // what their guards read, 7 each
  std::atomic<int> seen_at_end{-1};  // `seen` when the racing task's frame went
  std::atomic<bool> waiting{false};
};

// Suspended in a long sleep, or running (yields in a busy loop), when the
// cancel comes.
task<void> borrowing_contender(const int& parent_local, race_probe& probe, bool busy) {
  const borrows_parent guard{&parent_local, &probe.seen};
  probe.started.fetch_add(1);
  if (busy) {
    for (;;) {
      const auto until = std::chrono::steady_clock::now() + 100us;
      while (std::chrono::steady_clock::now() < until) {
      }
      co_await canopy::yield_now();
    }
  }
  co_await canopy::sleep_for(1h);
}

// Records, when the racing task's frame goes, what the contenders' guards
// had added by then.
struct ends_after {
  race_probe* probe;
  ~ends_after() { probe->seen_at_end.store(probe->seen.load()); }
};

task<void> racing_parent(race_probe& probe) {
  const ends_after at_end{&probe};
  const int local = 7;
  probe.waiting.store(true);
  co_await canopy::race(borrowing_contender(local, probe, false),
                        borrowing_contender(local, probe, true));
}

// The same, with with_timeout's child (raced against its deadline).
task<void> timing_parent(race_probe& probe, bool busy) {
  const ends_after at_end{&probe};
  const int local = 7;
  probe.waiting.store(true);
  static_cast<void>(co_await canopy::with_timeout(1h, borrowing_contender(local, probe, busy)));
}

// A connected pair: a unix_stream on the reactor and the peer's raw fd.
struct stream_pair {
  canopy::io::unix_stream stream;
  int peer = -1;
  stream_pair(const stream_pair&) = delete;
  stream_pair& operator=(const stream_pair&) = delete;
  explicit stream_pair(canopy::io::reactor& owner) {
    std::array<int, 2> fds{};
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds.data()) == 0);
    std::error_code error;
    stream = canopy::io::unix_stream(owner, fds[0], error);
    REQUIRE(!error);
    peer = fds[1];
  }
  ~stream_pair() { ::close(peer); }
  void send(const std::string& text) const {
    REQUIRE(::send(peer, text.data(), text.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(text.size()));
  }
};

task<void> stop_later(std::stop_source& source, std::chrono::milliseconds pause) {
  co_await canopy::sleep_for(pause);
  source.request_stop();
}

std::string text_of(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// Races a read against a stop requested by another task; the stop wins,
// then the same stream reads the bytes sent afterwards. Then a read that
// wins (bytes already there) against a token nobody stops.
task<void> read_or_stop(canopy::io::unix_stream& stream, const stream_pair& pair) {
  std::array<std::byte, 64> buffer{};
  std::stop_source source;
  auto stopper = canopy::spawn(stop_later(source, 5ms));
  auto first = co_await canopy::race(stream.read_some(buffer), canopy::stopped(source.get_token()));
  CHECK(first.index() == 1);
  CHECK(!first.has_value<0>());
  co_await stopper;
  pair.send("after the stop");
  const std::size_t got = co_await stream.read_some(buffer);
  CHECK(text_of(std::span(buffer).first(got)) == "after the stop");

  std::stop_source unused;
  pair.send("ready");
  auto second =
      co_await canopy::race(stream.read_some(buffer), canopy::stopped(unused.get_token()));
  REQUIRE(second.index() == 0);
  CHECK(text_of(std::span(buffer).first(second.get<0>())) == "ready");
  unused.request_stop();  // the released registration is not called
}

task<int> fiber_join(canopy::join_handle<int> handle) { co_return co_await handle; }

// The stream's byte at `index`: a counter modulo a prime, so that a lost or
// repeated piece shifts it.
std::byte counter_at(std::size_t index) { return static_cast<std::byte>(index % 251); }

// Sends the counter stream on a blocking `fd` in pieces of 1-64 bytes with
// pauses of 0-20 us until finish(), then shuts its side down.
class counter_writer {
 public:
  explicit counter_writer(int fd) : fd_(fd), thread_([this] { run(); }) {}
  counter_writer(const counter_writer&) = delete;
  counter_writer& operator=(const counter_writer&) = delete;
  ~counter_writer() { finish(); }
  void finish() {
    stop_.store(true);
    if (thread_.joinable()) {
      thread_.join();
    }
  }

 private:
  void run() {
    std::minstd_rand random(static_cast<unsigned>(fd_));
    std::array<std::byte, 64> piece{};
    while (!stop_.load()) {
      const std::size_t size = 1 + random() % piece.size();
      for (std::size_t index = 0; index < size; ++index) {
        piece[index] = counter_at(sent_ + index);
      }
      if (::send(fd_, piece.data(), size, MSG_NOSIGNAL) != static_cast<ssize_t>(size)) {
        return;  // the check reports what came
      }
      sent_ += size;
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 20));
    }
    ::shutdown(fd_, SHUT_WR);
  }

  int fd_;
  std::atomic<bool> stop_{false};
  std::size_t sent_ = 0;
  std::thread thread_;
};

task<void> stop_soon(std::stop_source& source, unsigned delay_us) {
  if (delay_us % 4 == 0) {
    co_await canopy::yield_now();
  } else {
    co_await canopy::sleep_for(std::chrono::microseconds(delay_us));
  }
  source.request_stop();
}

// `rounds` reads raced against a stop 0-40 us away, then plain reads to
// EOF; every byte a read returned (the winner's, or a loser's kept value)
// goes to `received`.
task<long> read_racing_stops(canopy::io::tcp_stream& stream, long rounds,
                             std::vector<std::byte>& received) {
  std::minstd_rand random(7);
  std::array<std::byte, 64> buffer{};
  long stops = 0;
  for (long round = 0; round < rounds; ++round) {
    const std::span<std::byte> into = std::span(buffer).first(1 + random() % buffer.size());
    std::stop_source source;
    auto stopper = canopy::spawn(stop_soon(source, static_cast<unsigned>(random() % 41)));
    auto got = co_await canopy::race(stream.read_some(into), canopy::stopped(source.get_token()));
    co_await stopper;
    stops += got.index() == 1 ? 1 : 0;
    if (got.has_value<0>()) {
      if (got.get<0>() == 0) {
        co_return stops;  // EOF: the writer stopped early
      }
      received.insert(received.end(), into.begin(), into.begin() + static_cast<long>(got.get<0>()));
    }
  }
  co_return stops;
}

}  // namespace

TEST_CASE("race: the shorter sleep wins; the other's frame is gone before race returns") {
  const canopy::testing::watchdog guard("race sleeps", 30);
  executor pool(canopy::testing::io_config(2));
  const canopy::io::reactor_timers timers(pool);
  std::atomic<int> destroyed{0};
  const auto started = std::chrono::steady_clock::now();
  const auto [index, value,
              destroyed_then] = canopy::block_on(pool, [&]() -> task<std::array<int, 3>> {
    auto result = co_await canopy::race(sleeper(1ms, 10, destroyed), sleeper(1h, 20, destroyed));
    co_return std::array<int, 3>{static_cast<int>(result.index()), result.value(),
                                 destroyed.load()};
  }());
  CHECK(index == 0);
  CHECK(value == 10);
  CHECK(destroyed_then == 2);
  CHECK(std::chrono::steady_clock::now() - started < 10s);
}

TEST_CASE("race: a winner's exception is what race throws, after the others ended") {
  const canopy::testing::watchdog guard("race throws", 30);
  executor pool(canopy::testing::io_config(2));
  const canopy::io::reactor_timers timers(pool);
  std::atomic<int> destroyed{0};
  const int destroyed_then = canopy::block_on(pool, [&]() -> task<int> {
    try {
      static_cast<void>(co_await canopy::race(sleeper(1h, 1, destroyed), throws_after_yield()));
    } catch (const std::runtime_error& failure) {
      CHECK(std::string(failure.what()) == "contender failed");
      co_return destroyed.load();
    }
    co_return -1;
  }());
  CHECK(destroyed_then == 1);
}

TEST_CASE("race: a cancelled racing task ends its contenders before its own frame goes") {
  const canopy::testing::watchdog guard("race cancelled", 60);
  executor pool(canopy::testing::io_config(2));
  const canopy::io::reactor_timers timers(pool);
  for (long round = 0; round < scaled(200); ++round) {
    race_probe probe;
    auto parent = pool.spawn(racing_parent(probe));
    REQUIRE(canopy::testing::eventually([&] { return probe.waiting.load(); }));
    if (round % 2 == 1) {  // else often before the contenders started
      REQUIRE(canopy::testing::eventually([&] { return probe.started.load() == 2; }));
      std::this_thread::sleep_for(200us);  // the busy contender is running
    }
    parent.cancel();
    CHECK_THROWS_AS(parent.get(), canopy::task_cancelled);
    // Every guard built read the parent's local (7) before its frame went.
    CHECK(probe.seen.load() == 7 * probe.started.load());
    CHECK(probe.seen_at_end.load() == probe.seen.load());
  }
}

TEST_CASE("with_timeout: a cancelled awaiting task ends its child before its own frame goes") {
  const canopy::testing::watchdog guard("with_timeout cancelled", 60);
  executor pool(canopy::testing::io_config(2));
  for (long round = 0; round < scaled(200); ++round) {
    race_probe probe;
    const bool busy = round % 2 == 1;
    auto parent = pool.spawn(timing_parent(probe, busy));
    REQUIRE(canopy::testing::eventually([&] { return probe.waiting.load(); }));
    if (busy) {
      REQUIRE(canopy::testing::eventually([&] { return probe.started.load() == 1; }));
      std::this_thread::sleep_for(200us);  // the child is running
    }
    parent.cancel();
    CHECK_THROWS_AS(parent.get(), canopy::task_cancelled);
    CHECK(probe.seen.load() == 7 * probe.started.load());
    CHECK(probe.seen_at_end.load() == probe.seen.load());
  }
}

TEST_CASE("race: an empty contender is refused before any runs") {
  const canopy::testing::watchdog guard("race empty", 30);
  executor pool(canopy::testing::io_config(2));
  const canopy::io::reactor_timers timers(pool);
  race_probe probe;
  canopy::block_on(pool, [&probe]() -> task<void> {
    const int local = 7;
    CHECK_THROWS_AS(static_cast<void>(co_await canopy::race(borrowing_contender(local, probe, true),
                                                            task<int>())),
                    std::invalid_argument);
  }());
  CHECK(probe.started.load() == 0);
}

TEST_CASE("race at capacity: the contenders started end before race throws at_capacity") {
  const canopy::testing::watchdog guard("race at capacity", 30);
  canopy::executor_config config = canopy::io::with_reactor(canopy::testing::config_with(1));
  config.signals_per_leaf = 1;  // 64 task slots
  config.max_leaves = 1;
  executor pool(config);
  const canopy::io::reactor_timers timers(pool);
  race_probe probe;
  canopy::async_event release;
  const int seen_then = canopy::block_on(pool, [&]() -> task<int> {
    std::vector<canopy::join_handle<void>> fillers;  // all slots but one taken
    while (pool.stats().live_tasks + 1 < pool.capacity()) {
      fillers.push_back(
          canopy::spawn([](canopy::async_event& event) -> task<void> { co_await event; }(release)));
    }
    const int local = 7;
    int seen = -1;
    try {
      static_cast<void>(co_await canopy::race(borrowing_contender(local, probe, false),
                                              borrowing_contender(local, probe, false)));
    } catch (const canopy::spawn_error& error) {
      CHECK(error.code() == canopy::errc::at_capacity);
      seen = probe.seen.load();
    }
    release.set();
    co_await canopy::await_all(fillers);
    co_return seen;
  }());
  CHECK(seen_then == 7 * probe.started.load());
}

TEST_CASE("race: a read against stopped(token), on each backend; the stream reads on") {
  for (const canopy::io::io_backend backend : canopy::testing::backends_under_test()) {
    CAPTURE(static_cast<int>(backend));
    const canopy::testing::watchdog guard("race read or stop", 30);
    const auto config = canopy::testing::config_for(backend, 2);
    if (!config) {
      continue;
    }
    executor pool(*config);
    const canopy::io::reactor_timers timers(pool);
    stream_pair pair(canopy::io::reactor::of(pool));
    canopy::block_on(pool, read_or_stop(pair.stream, pair));
  }
}

TEST_CASE("race: reads raced against stops lose no byte, on each backend") {
  for (const canopy::io::io_backend backend : canopy::testing::backends_under_test()) {
    CAPTURE(static_cast<int>(backend));
    const canopy::testing::watchdog guard("race reads and stops", 120);
    const auto config = canopy::testing::config_for(backend, 2);
    if (!config) {
      continue;
    }
    executor pool(*config);
    const canopy::io::reactor_timers timers(pool);
    auto listener = canopy::io::tcp_listener::bind(canopy::io::reactor::of(pool),
                                                   canopy::io::endpoint::loopback_v4(0));
    const int client = canopy::testing::connect_raw(listener.local_endpoint());
    canopy::io::tcp_stream stream = canopy::block_on(pool, listener.accept());
    std::vector<std::byte> received;
    long stops = 0;
    {
      counter_writer writer(client);
      stops = canopy::block_on(pool, read_racing_stops(stream, scaled(5000), received));
    }
    canopy::block_on(pool, [&]() -> task<void> {
      std::array<std::byte, 256> buffer{};
      while (const std::size_t got = co_await stream.read_some(buffer)) {
        received.insert(received.end(), buffer.begin(), buffer.begin() + static_cast<long>(got));
      }
    }());
    ::close(client);
    MESSAGE(received.size() << " bytes, " << stops << " reads lost to a stop");
    CHECK(stops > 0);
    std::size_t first_wrong = received.size();
    for (std::size_t index = 0; index < received.size(); ++index) {
      if (received[index] != counter_at(index)) {
        first_wrong = index;
        break;
      }
    }
    CHECK(first_wrong == received.size());
  }
}

TEST_CASE("stopped: ends at once when already requested; a fiber awaits it and a race") {
  const canopy::testing::watchdog guard("stopped", 30);
  executor pool(canopy::testing::io_config(2));
  const canopy::io::reactor_timers timers(pool);
  std::stop_source source;
  source.request_stop();
  canopy::block_on(pool, canopy::stopped(source.get_token()));
  std::stop_source later;
  auto fiber = pool.spawn(canopy::fiber([&later] {
    canopy::this_fiber::await(canopy::stopped(later.get_token()));
    return 5;
  }));
  std::this_thread::sleep_for(2ms);
  CHECK(!fiber.ready());
  later.request_stop();
  CHECK(fiber.get() == 5);

  // A fiber awaits a race; a stop from this thread decides it.
  std::stop_source stop;
  std::atomic<int> destroyed{0};
  auto racer = pool.spawn(canopy::fiber([&stop, &destroyed] {
    auto result = canopy::this_fiber::await(
        canopy::race(sleeper(1h, 1, destroyed), canopy::stopped(stop.get_token())));
    return static_cast<int>(result.index());
  }));
  std::this_thread::sleep_for(2ms);
  CHECK(!racer.ready());
  stop.request_stop();
  CHECK(racer.get() == 1);
}

TEST_CASE("race: a fiber contender is cancelled and unwound before race returns") {
  const canopy::testing::watchdog guard("race fiber", 30);
  executor pool(canopy::testing::io_config(2));
  const canopy::io::reactor_timers timers(pool);
  std::atomic<int> destroyed{0};
  const int destroyed_then = canopy::block_on(pool, [&]() -> task<int> {
    auto fiber = canopy::spawn(canopy::fiber([&destroyed] {
      const destroy_flag guard(destroyed);
      canopy::this_fiber::sleep_for(1h);
      return 1;
    }));
    std::atomic<int> unused{0};
    auto result = co_await canopy::race(fiber_join(std::move(fiber)), sleeper(1ms, 2, unused));
    CHECK(result.index() == 1);
    CHECK(result.value() == 2);
    co_return destroyed.load();
  }());
  CHECK(destroyed_then == 1);
}

TEST_CASE("race: many rounds of near ties; every frame gone and a value for the winner") {
  const canopy::testing::watchdog guard("race stress", 120);
  for (const std::size_t workers : {1U, 2U, 4U}) {
    CAPTURE(workers);
    executor pool(canopy::testing::io_config(workers));
    const canopy::io::reactor_timers timers(pool);
    const long rounds = scaled(3000);
    long both = 0;
    canopy::block_on(pool, [&]() -> task<void> {
      std::minstd_rand random(static_cast<unsigned>(workers));
      for (long round = 0; round < rounds; ++round) {
        std::atomic<int> destroyed{0};
        std::atomic<int> started{0};  // one cancelled before it started builds no guard
        const auto yields = [&destroyed, &started](int count, int value) -> task<int> {
          ++started;
          const destroy_flag guard(destroyed);
          for (int step = 0; step < count; ++step) {
            co_await canopy::yield_now();
          }
          co_return value;
        };
        auto result = co_await canopy::race(yields(static_cast<int>(random() % 3), 0),
                                            yields(static_cast<int>(random() % 3), 1),
                                            yields(static_cast<int>(random() % 3), 2));
        REQUIRE(destroyed.load() == started.load());
        REQUIRE(result.value() == static_cast<int>(result.index()));
        both += static_cast<long>(result.has_value<0>()) +
                static_cast<long>(result.has_value<1>()) +
                static_cast<long>(result.has_value<2>()) - 1;
      }
    }());
    MESSAGE(workers << " workers: " << both << " extra values kept in " << rounds << " rounds");
  }
}
