// Cancel-safe reads (docs/io.md, "Reads that lose a race"): a read that
// loses a race with a timer (with_timeout), or is cancelled through its
// task's or fiber's handle, never loses the bytes it took from the kernel —
// the stream keeps them and the next read returns them. A writer thread
// sends a counter stream in small pieces with small pauses; the reader races
// every read against a timeout of 0-40 us or a cancel, and the bytes it was
// given must be the stream, none lost and none repeated. Each case runs on
// both backends, or on the one CANOPY_IO_BACKEND names (run.sh runs this
// binary once per backend), on 1 and 2 workers; descriptors are counted
// before and after.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/fiber/fiber_io.hpp"
#include "io/io.hpp"
#include "io/stream_op.hpp"
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
using canopy::testing::backends_under_test;
using canopy::testing::config_for;
using canopy::testing::connect_raw;
using canopy::testing::open_fd_count;
using namespace std::chrono_literals;

namespace {

// The stream's byte at `index`: a counter modulo a prime, so that a lost or
// repeated piece (whose length is rarely a multiple of 251) shifts it.
std::byte counter_at(std::size_t index) { return static_cast<std::byte>(index % 251); }

// Rounds, shrunk under the sanitizers (CANOPY_STRESS_DIVISOR) but never
// below 5,000 (or `count` if smaller): the races are what they check.
long rounds(long count) {
  return std::max(std::min(count, 5000L), count / canopy::testing::stress_divisor());
}

// Sends the counter stream on `fd` (blocking) in pieces of 1-64 bytes with
// pauses of 0-20 us until stop(), then shuts its side down (the reader's EOF).
class counter_writer {
 public:
  explicit counter_writer(int fd) : fd_(fd), thread_([this] { run(); }) {}
  counter_writer(const counter_writer&) = delete;
  counter_writer& operator=(const counter_writer&) = delete;
  ~counter_writer() { finish(); }

  // Stop sending; returns how many bytes went.
  std::size_t finish() {
    // release: pairs with the acquire load in run().
    stop_.store(true, std::memory_order_release);
    if (thread_.joinable()) {
      thread_.join();
    }
    return sent_;
  }

 private:
  void run() {
    std::minstd_rand random(fd_);
    std::array<std::byte, 64> piece{};
    // acquire: pairs with finish()'s release store.
    while (!stop_.load(std::memory_order_acquire)) {
      const std::size_t size = 1 + random() % piece.size();
      for (std::size_t index = 0; index < size; ++index) {
        piece[index] = counter_at(sent_ + index);
      }
      std::size_t done = 0;
      while (done < size) {
        const ssize_t count = ::send(fd_, piece.data() + done, size - done, MSG_NOSIGNAL);
        if (count <= 0) {
          return;  // the stream went away: the check reports what came
        }
        done += static_cast<std::size_t>(count);
      }
      sent_ += size;
      if (const unsigned pause = random() % 24; pause < 20) {
        std::this_thread::sleep_for(std::chrono::microseconds(pause));
      }
    }
    ::shutdown(fd_, SHUT_WR);
  }

  int fd_;
  std::atomic<bool> stop_{false};
  std::size_t sent_ = 0;
  std::thread thread_;
};

struct tally {
  std::vector<std::byte> received;
  long delivered = 0;   // reads that gave bytes
  long lost_races = 0;  // reads that timed out or were cancelled
  long errors = 0;
  std::atomic<bool> raced{false};  // the raced rounds are over
};

enum class racer : std::uint8_t { timer, task_cancel, fiber_cancel };

// What one raced read gave: -1 when it lost its race (then nothing may
// have been taken), else its count, with the bytes appended to `taken`.
// The cancelled forms take the bytes inside the reading task or fiber, as
// soon as its read returns: a cancel through a handle discards the task's
// return value (the handle's contract), not what the task did.
task<long> racing_read(tcp_stream& stream, std::span<std::byte> into, racer how,
                       std::chrono::microseconds delay, std::vector<std::byte>& taken,
                       std::error_code& error) {
  const auto take = [&taken](std::span<const std::byte> bytes) {
    taken.insert(taken.end(), bytes.begin(), bytes.end());
  };
  if (how == racer::timer) {
    auto got = co_await canopy::with_timeout(delay, stream.read_some(into, error));
    if (!got) {
      co_return -1L;
    }
    take(into.first(*got));
    co_return static_cast<long>(*got);
  }
  long count = -1;
  auto reader = how == racer::task_cancel
                    ? canopy::spawn([](tcp_stream& from, std::span<std::byte> buffer, long& out,
                                       auto keep, std::error_code& failure) -> task<void> {
                        const std::size_t got = co_await from.read_some(buffer, failure);
                        keep(buffer.first(got));
                        out = static_cast<long>(got);
                      }(stream, into, count, take, error))
                    : canopy::spawn(canopy::fiber([&stream, into, &count, take, &error] {
                        const std::size_t got = canopy::this_fiber::read_some(stream, into, error);
                        take(into.first(got));
                        count = static_cast<long>(got);
                      }));
  if (delay.count() % 4 == 0) {
    co_await canopy::yield_now();  // often before the read started
  } else {
    co_await canopy::sleep_for(delay);
  }
  reader.cancel();
  try {
    co_await reader;
  } catch (const canopy::task_cancelled&) {  // NOLINT(bugprone-empty-catch): `count` says
  }
  co_return count;
}

// `count` raced reads of 1-64 bytes, then plain reads to EOF.
task<void> read_racing(tcp_stream& stream, long count, std::vector<racer> racers, tally& out) {
  std::minstd_rand random(static_cast<unsigned>(count));
  std::array<std::byte, 64> buffer{};
  for (long round = 0; round < count; ++round) {
    const std::span<std::byte> into = std::span(buffer).first(1 + random() % buffer.size());
    const racer how = racers[static_cast<std::size_t>(round) % racers.size()];
    std::error_code error;
    const long got = co_await racing_read(
        stream, into, how, std::chrono::microseconds(random() % 41), out.received, error);
    if (error) {
      ++out.errors;
      MESSAGE("round " << round << ": " << error.message());
    } else if (got < 0) {
      ++out.lost_races;
    } else if (got == 0) {
      break;  // EOF: the writer stopped early
    } else {
      ++out.delivered;
    }
  }
  // release: pairs with the acquire load in check_no_byte_lost.
  out.raced.store(true, std::memory_order_release);
  for (;;) {
    const std::size_t got = co_await stream.read_some(buffer);
    if (got == 0) {
      break;
    }
    out.received.insert(out.received.end(), buffer.begin(),
                        buffer.begin() + static_cast<std::ptrdiff_t>(got));
  }
}

// Runs the reader on `backend` with `workers`; checks the bytes it got.
void check_no_byte_lost(io_backend backend, std::size_t workers, long count,
                        const std::vector<racer>& racers) {
  const std::size_t fds_before = open_fd_count();
  {
    auto config = config_for(backend, workers);
    if (!config) {
      return;
    }
    executor pool(std::move(*config));
    canopy::io::reactor_timers timers(pool);
    reactor& owner = reactor::of(pool);
    REQUIRE(owner.backend() == backend);
    tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
    const int peer = connect_raw(listener.local_endpoint());
    tcp_stream stream = canopy::block_on(pool, listener.accept());
    tally got;
    std::size_t sent = 0;
    {
      counter_writer writer(peer);
      auto reader = pool.spawn(read_racing(stream, count, racers, got));
      // The writer sends until the raced rounds are over, so that bytes
      // arrive around every one of them.
      // acquire: pairs with the release store in read_racing.
      CHECK(canopy::testing::eventually([&] { return got.raced.load(std::memory_order_acquire); },
                                        120));
      sent = writer.finish();
      reader.get();
    }
    ::close(peer);
    std::size_t first_wrong = got.received.size();
    for (std::size_t index = 0; index < got.received.size(); ++index) {
      if (got.received[index] != counter_at(index)) {
        first_wrong = index;
        break;
      }
    }
    MESSAGE(std::string(to_string(backend))
            << ", " << workers << " worker(s): " << got.delivered << " reads delivered, "
            << got.lost_races << " lost their race; " << sent << " bytes sent, "
            << got.received.size() << " received");
    CHECK(got.errors == 0);
    CHECK(got.lost_races > 0);  // the races happened
    CHECK_MESSAGE(first_wrong == got.received.size(),
                  "the stream differs from byte " << first_wrong << " on");
    CHECK_MESSAGE(
        got.received.size() == sent,
        (sent > got.received.size() ? sent - got.received.size() : got.received.size() - sent)
            << " bytes " << (sent > got.received.size() ? "lost" : "repeated"));
  }
  CHECK(open_fd_count() == fds_before);
}

}  // namespace

TEST_CASE("a read that loses a race with with_timeout keeps its bytes for the next read") {
  const canopy::testing::watchdog guard("timed reads", 240);
  for (const io_backend backend : backends_under_test()) {
    for (const std::size_t workers : {1U, 2U}) {
      INFO("backend " << std::string(to_string(backend)) << ", " << workers << " worker(s)");
      check_no_byte_lost(backend, workers, rounds(20000), {racer::timer});
    }
  }
}

TEST_CASE("a read cancelled through its task's or its fiber's handle keeps its bytes") {
  const canopy::testing::watchdog guard("cancelled reads", 240);
  for (const io_backend backend : backends_under_test()) {
    for (const std::size_t workers : {1U, 2U}) {
      INFO("backend " << std::string(to_string(backend)) << ", " << workers << " worker(s)");
      check_no_byte_lost(backend, workers, rounds(5000),
                         {racer::task_cancel, racer::timer, racer::fiber_cancel});
    }
  }
}

TEST_CASE("io_uring: a receive left after it completed keeps its bytes for every read form") {
  const canopy::testing::watchdog guard("kept bytes", 60);
  for (const io_backend backend : backends_under_test()) {
    if (backend != io_backend::io_uring) {
      continue;  // epoll never takes bytes it does not deliver
    }
    const std::size_t fds_before = open_fd_count();
    {
      auto config = config_for(backend, 1);
      if (!config) {
        continue;
      }
      executor pool(std::move(*config));
      canopy::io::reactor_timers timers(pool);
      reactor& owner = reactor::of(pool);
      tcp_listener listener = tcp_listener::bind(owner, endpoint::loopback_v4(0));
      const int peer = connect_raw(listener.local_endpoint());
      tcp_stream stream = canopy::block_on(pool, listener.accept());
      const auto text = [](std::span<const std::byte> bytes) {
        return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      };
      const auto reads = canopy::block_on(
          pool, [](tcp_stream& stream, int peer, auto text) -> task<std::vector<std::string>> {
            std::vector<std::string> seen;
            std::array<std::byte, 8> buffer{};
            {
              // A receive request in flight; the peer's 10 bytes complete it
              // (8 of them, the buffer's size) while this task sleeps; then
              // the task leaves it without taking the result, as a cancel or
              // a timeout that lands after the completion does.
              auto left =
                  canopy::io::detail::receive_op(stream.reg(), stream.native_handle(), buffer);
              CHECK_FALSE(left.ready());
              CHECK(left.arm(canopy::current_waker()));
              CHECK(::send(peer, "abcdefghij", 10, MSG_NOSIGNAL) == 10);
              co_await canopy::sleep_for(50ms);
              left.disarm();
            }
            // Each read is bounded: where the bytes were lost, it would wait
            // for bytes that never come.
            std::array<std::byte, 3> small{};
            std::error_code error;
            const std::size_t tried = stream.try_read_some(small, error);
            seen.push_back(error ? error.message() : text(std::span(small).first(tried)));
            auto read = co_await canopy::with_timeout(1s, stream.read_some(small));
            seen.push_back(read ? text(std::span(small).first(*read)) : "(timed out)");
            if (seen != std::vector<std::string>{"abc", "def"}) {
              co_return seen;  // the fiber's read below would wait for good
            }
            // A bounded read with a near deadline waits on readiness, not
            // with a request: it still takes the kept bytes first.
            std::array<std::byte, 1> one{};
            const std::size_t near = co_await stream.read_some_until(
                one, std::chrono::steady_clock::now() + 2ms, error);
            seen.push_back(error ? error.message() : text(std::span(one).first(near)));
            auto fiber = canopy::spawn(canopy::fiber(
                [&stream, &small] { return canopy::this_fiber::read_some(stream, small); }));
            const std::size_t by_fiber = co_await fiber;
            seen.push_back(text(std::span(small).first(by_fiber)));
            auto rest =
                co_await canopy::with_timeout(1s, stream.read_some(buffer));  // the socket's
            seen.push_back(rest ? text(std::span(buffer).first(*rest)) : "(timed out)");
            co_return seen;
          }(stream, peer, text));
      std::string joined;
      for (const std::string& each : reads) {
        joined += "[" + each + "]";
      }
      const std::vector<std::string> expected{"abc", "def", "g", "h", "ij"};
      CHECK_MESSAGE(reads == expected, joined);
      stream.close();
      ::close(peer);
    }
    CHECK(open_fd_count() == fds_before);
  }
}
