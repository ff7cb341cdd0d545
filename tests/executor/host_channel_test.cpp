// host_channel (executor/host/host_channel.hpp), driven directly: the pinned-task
// queue (FIFO, counted, cleared), the descriptor readable exactly while an
// armed host has work, arm_and_recheck's two answers, leave_readable, and
// the handshake under a race: posters on other threads against a host that
// arms and blocks, with no lost wake-up (a lost one hangs: the watchdog
// fails the case) and no descriptor left readable for nothing.
#include "executor/host/host_channel.hpp"

#include <doctest/doctest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include "tests/watchdog.hpp"

using canopy::detail::host_channel;
using namespace std::chrono_literals;

namespace {

// Whether the descriptor is readable now (poll with no wait).
bool readable(int fd) {
  pollfd entry{fd, POLLIN, 0};
  return ::poll(&entry, 1, 0) == 1 && (entry.revents & POLLIN) != 0;
}

}  // namespace

TEST_CASE("host_channel: pinned tasks come out once each, in order; clear drops the rest") {
  host_channel channel;
  CHECK(channel.fd() >= 0);
  CHECK_FALSE(channel.has_queued());
  CHECK_FALSE(channel.pop().has_value());
  channel.disarm();  // the host is running: pushes need no descriptor write
  channel.push(4);
  channel.push(2);
  channel.push(9);
  CHECK(channel.has_queued());
  CHECK(channel.pop() == std::optional<std::uint32_t>(4));
  CHECK(channel.pop() == std::optional<std::uint32_t>(2));
  CHECK(channel.pop() == std::optional<std::uint32_t>(9));
  CHECK_FALSE(channel.pop().has_value());
  CHECK_FALSE(channel.has_queued());
  channel.push(1);
  channel.push(3);
  channel.clear();
  CHECK_FALSE(channel.has_queued());
  CHECK_FALSE(channel.pop().has_value());
}

TEST_CASE("host_channel: readable while an armed host has work, not while the host runs") {
  host_channel channel;
  // A new channel is armed (no host has run yet): nothing to read.
  CHECK_FALSE(readable(channel.fd()));
  channel.push(1);  // armed: the push writes once
  CHECK(readable(channel.fd()));
  channel.push(2);  // the flag was taken: no second write, still readable
  CHECK(readable(channel.fd()));

  // The host runs: it disarms and takes the tasks.
  channel.disarm();
  CHECK(channel.pop() == std::optional<std::uint32_t>(1));
  CHECK(channel.pop() == std::optional<std::uint32_t>(2));
  // About to stop, nothing left: it may block, and the count it expected is
  // read away: the descriptor is not readable for nothing.
  CHECK(channel.arm_and_recheck([&] { return channel.has_queued(); }));
  CHECK_FALSE(readable(channel.fd()));

  // Running again, a task pushed meanwhile makes no write...
  channel.disarm();
  channel.push(3);
  CHECK_FALSE(readable(channel.fd()));
  // ...and the re-check before stopping finds it: keep running, disarmed.
  CHECK_FALSE(channel.arm_and_recheck([&] { return channel.has_queued(); }));
  CHECK_FALSE(readable(channel.fd()));
  channel.push(5);  // still disarmed: no write
  CHECK_FALSE(readable(channel.fd()));
  CHECK(channel.pop() == std::optional<std::uint32_t>(3));
  CHECK(channel.pop() == std::optional<std::uint32_t>(5));

  // Armed with nothing: a notify() (a task bit set elsewhere) writes once.
  CHECK(channel.arm_and_recheck([] { return false; }));
  CHECK_FALSE(readable(channel.fd()));
  channel.notify();
  CHECK(readable(channel.fd()));
  channel.notify();  // the flag was taken: nothing more
  channel.disarm();
  CHECK(channel.arm_and_recheck([] { return false; }));
  CHECK_FALSE(readable(channel.fd()));
}

TEST_CASE("host_channel: leave_readable keeps the descriptor readable until the host arms") {
  host_channel channel;
  channel.disarm();
  CHECK_FALSE(readable(channel.fd()));
  channel.leave_readable();
  CHECK(readable(channel.fd()));
  channel.leave_readable();  // at most one write in flight
  CHECK(readable(channel.fd()));
  // The host comes back and stops with nothing left: the count is read away.
  CHECK(channel.arm_and_recheck([] { return false; }));
  CHECK_FALSE(readable(channel.fd()));
}

TEST_CASE("host_channel: wait_readable returns at once when readable, else after its timeout") {
  canopy::testing::watchdog guard("host_channel wait", 60);
  host_channel channel;
  CHECK(channel.arm_and_recheck([] { return false; }));
  const auto before = std::chrono::steady_clock::now();
  channel.wait_readable(30ms);
  CHECK(std::chrono::steady_clock::now() - before >= 30ms);
  CHECK_FALSE(readable(channel.fd()));

  // A push from another thread ends an unbounded wait (the watchdog fails a
  // wait that never ends).
  std::thread poster([&] {
    std::this_thread::sleep_for(10ms);
    channel.push(6);
  });
  channel.wait_readable(std::chrono::nanoseconds(-1));
  poster.join();
  CHECK(readable(channel.fd()));
  channel.wait_readable(std::chrono::nanoseconds(-1));  // readable: returns at once
  channel.disarm();
  CHECK(channel.pop() == std::optional<std::uint32_t>(6));
  CHECK(channel.arm_and_recheck([&] { return channel.has_queued(); }));
  CHECK_FALSE(readable(channel.fd()));
}

TEST_CASE("host_channel: posters against an arming, blocking host lose no wake-up") {
  canopy::testing::watchdog guard("host_channel handshake", 120);
  constexpr int posters = 3;
  const std::uint32_t per_poster =
      static_cast<std::uint32_t>(20'000 / canopy::testing::stress_divisor());
  const std::uint32_t total = per_poster * posters;
  host_channel channel;
  std::vector<std::atomic<int>> seen(total);
  std::vector<std::thread> threads;
  for (int poster = 0; poster < posters; ++poster) {
    threads.emplace_back([&, poster] {
      const std::uint32_t first = static_cast<std::uint32_t>(poster) * per_poster;
      for (std::uint32_t index = 0; index < per_poster; ++index) {
        // Each poster pushes its next task only once the host has taken the
        // previous one: the host has often just found the queue empty and is
        // arming, which is the handshake's window. A push the host misses
        // is never followed by another from this poster: the host blocks
        // for good and the watchdog fails the case.
        while (index > 0 && seen[first + index - 1].load(std::memory_order_acquire) == 0) {
          std::this_thread::yield();
        }
        channel.push(first + index);
      }
    });
  }
  std::uint32_t popped = 0;
  long blocks = 0;
  long rounds = 0;
  std::uint32_t out_of_range = 0;
  while (popped < total) {
    channel.disarm();
    while (const std::optional<std::uint32_t> slot = channel.pop()) {
      if (*slot < total) {
        seen[*slot].fetch_add(1, std::memory_order_release);
      } else {
        ++out_of_range;
      }
      ++popped;
    }
    // Every other round, give the posters a moment between the host's last
    // look at the queue and its arm: a push then lands in the handshake's
    // window, which only the re-check inside arm_and_recheck catches.
    if (++rounds % 2 == 0) {
      std::this_thread::yield();
    }
    if (popped < total && channel.arm_and_recheck([&] { return channel.has_queued(); })) {
      // Armed and nothing queued: block until a poster writes.
      channel.wait_readable(std::chrono::nanoseconds(-1));
      ++blocks;
    }
  }
  for (auto& thread : threads) {
    thread.join();
  }
  std::uint32_t wrong = 0;
  for (const auto& count : seen) {
    wrong += count.load() == 1 ? 0 : 1;
  }
  INFO("host blocked " << blocks << " times in " << rounds << " rounds");
  CHECK(wrong == 0);
  CHECK(out_of_range == 0);
  CHECK(blocks > 0);  // the host did arm and block: the handshake was exercised
  CHECK_FALSE(channel.has_queued());
  // Every poster has finished: once the host stops with nothing left, the
  // descriptor holds no count for nothing.
  channel.disarm();
  CHECK(channel.arm_and_recheck([&] { return channel.has_queued(); }));
  CHECK_FALSE(readable(channel.fd()));
}
