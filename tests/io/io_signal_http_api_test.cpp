// The README's signal and HTTP promises that io_api_test does not
// cover, through the public headers only: two signal_sets watching one
// signal (each signal read by exactly one), a cancelled wait leaving its
// set usable (task and fiber), and curl against the HTTP server with a
// header line over the head limit and with more headers than allowed
// (both 431, as http_server.hpp documents), with many under the limit, and
// POSTing a body over the body limit (413).
// SIGUSR1 only, blocked in the main thread before any thread exists.
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <canopy/canopy.hpp>
#include <canopy/fiber.hpp>
#include <canopy/io.hpp>
#include <canopy/io/fiber.hpp>
#include <canopy/io/http.hpp>
#include <canopy/io/signal.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::task;
using canopy::io::signal_set;
using canopy::testing::eventually;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

namespace {

canopy::executor_config io_config(std::size_t workers) {
  canopy::executor_config config = canopy::io::with_reactor();
  config.worker_count = workers;
  return config;
}

task<int> wait_once(signal_set& set, std::atomic<int>& waiting) {
  waiting.fetch_add(1);
  co_return co_await set.wait();
}

void answer(const canopy::io::http::request& req, std::string& out) {
  canopy::io::http::append_response(out, 200, "OK", "text/plain", "ok", !req.keep_alive);
}

// curl's status code for a request to / with `arguments` (GET unless they
// say otherwise), or -1 if curl could not run or failed.
int curl_status(std::uint16_t port, const std::string& arguments) {
  const std::string command =
      "timeout 30 curl --silent --output /dev/null --write-out "
      "'%{http_code}' --max-time 20 " +
      arguments + " http://127.0.0.1:" + std::to_string(port) + "/";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[16] = {};
  const std::size_t got = std::fread(buffer, 1, sizeof buffer - 1, pipe);
  const int status = ::pclose(pipe);
  if (status != 0 || got == 0) return -1;
  return std::atoi(buffer);
}

// Write `text` to the file at `path`.
void write_file(const std::string& path, const std::string& text) {
  FILE* out = std::fopen(path.c_str(), "w");
  REQUIRE(out != nullptr);
  REQUIRE(std::fwrite(text.data(), 1, text.size(), out) == text.size());
  REQUIRE(std::fclose(out) == 0);
}

}  // namespace

TEST_CASE("signal_set: two sets watching one signal each read a different arrival") {
  canopy::io::block_signals({SIGUSR1});  // before any thread: the watchdog's too
  watchdog dog("two signal sets", 60);
  executor pool(io_config(2));
  auto& reactor = canopy::io::reactor::of(pool);
  signal_set first(reactor, {SIGUSR1});
  signal_set second(reactor, {SIGUSR1});
  std::atomic<int> waiting{0};
  auto a = pool.spawn(wait_once(first, waiting));
  auto b = pool.spawn(wait_once(second, waiting));
  REQUIRE(eventually([&] { return waiting.load() == 2; }));
  std::this_thread::sleep_for(20ms);  // let both reach the kernel wait (holds either way)
  REQUIRE(::kill(::getpid(), SIGUSR1) == 0);
  REQUIRE(eventually([&] { return a.wait_for(0ms) || b.wait_for(0ms); }));
  // The other set did not see the same arrival: it waits on.
  std::this_thread::sleep_for(50ms);
  CHECK(static_cast<int>(a.wait_for(0ms)) + static_cast<int>(b.wait_for(0ms)) == 1);
  REQUIRE(::kill(::getpid(), SIGUSR1) == 0);
  CHECK(a.get() == SIGUSR1);
  CHECK(b.get() == SIGUSR1);
}

TEST_CASE("signal_set: a cancelled wait leaves the set usable, for a task and a fiber") {
  canopy::io::block_signals({SIGUSR1});
  watchdog dog("cancelled signal wait", 60);
  executor pool(io_config(2));
  signal_set set(canopy::io::reactor::of(pool), {SIGUSR1});
  std::atomic<int> waiting{0};
  SUBCASE("task") {
    auto cancelled = pool.spawn(wait_once(set, waiting));
    REQUIRE(eventually([&] { return waiting.load() == 1; }));
    std::this_thread::sleep_for(20ms);
    CHECK(cancelled.cancel());
    CHECK_THROWS_AS((void)cancelled.get(), canopy::task_cancelled);
  }
  SUBCASE("fiber") {
    auto cancelled = pool.spawn(canopy::fiber([&] {
      waiting.fetch_add(1);
      return canopy::this_fiber::wait(set);
    }));
    REQUIRE(eventually([&] { return waiting.load() == 1; }));
    std::this_thread::sleep_for(20ms);
    CHECK(cancelled.cancel());
    CHECK_THROWS_AS((void)cancelled.get(), canopy::task_cancelled);
  }
  auto next = pool.spawn(wait_once(set, waiting));
  REQUIRE(eventually([&] { return waiting.load() == 2; }));
  std::this_thread::sleep_for(20ms);
  REQUIRE(::kill(::getpid(), SIGUSR1) == 0);
  CHECK(next.get() == SIGUSR1);
}

TEST_CASE("http server and curl: a header line over the head limit and too many headers: 431") {
  watchdog dog("http curl limits", 90);
  executor pool(io_config(2));
  canopy::io::reactor_timers timers(pool);
  auto listener = canopy::io::tcp_listener::bind(canopy::io::reactor::of(pool),
                                                 canopy::io::endpoint::loopback_v4(0));
  const std::uint16_t port = listener.local_endpoint().port();
  canopy::io::http::server_options options;  // the defaults: 8 KiB head, 64 headers
  auto server = pool.spawn(canopy::io::http::serve(listener, options, &answer));
  const std::string file = "/tmp/canopy_readme_headers_" + std::to_string(::getpid());
  auto status_with = [&](const std::string& lines) {
    write_file(file, lines);
    return curl_status(port, "-H @" + file);
  };
  CHECK(status_with("X-Long: " + std::string(options.limits.max_head_bytes, 'a') + "\n") == 431);
  std::string many;
  for (std::size_t i = 0; i <= options.limits.max_headers; ++i) {
    many += "X-Header-" + std::to_string(i) + ": v\n";
  }
  CHECK(status_with(many) == 431);
  std::string allowed;  // curl adds Host, User-Agent and Accept
  for (std::size_t i = 0; i + 3 < options.limits.max_headers; ++i) {
    allowed += "X-Header-" + std::to_string(i) + ": v\n";
  }
  CHECK(status_with(allowed) == 200);
  std::remove(file.c_str());
  server.cancel();
  pool.shutdown();
}

TEST_CASE("http server and curl: a POST body over max_body_bytes gets 413, at the limit 200") {
  watchdog dog("http curl body limit", 90);
  executor pool(io_config(2));
  canopy::io::reactor_timers timers(pool);
  auto listener = canopy::io::tcp_listener::bind(canopy::io::reactor::of(pool),
                                                 canopy::io::endpoint::loopback_v4(0));
  const std::uint16_t port = listener.local_endpoint().port();
  canopy::io::http::server_options options;
  options.limits.max_body_bytes = 64 * 1024;
  auto server = pool.spawn(canopy::io::http::serve(listener, options, &answer));
  const std::string file = "/tmp/canopy_readme_body_" + std::to_string(::getpid());
  auto status_posting = [&](std::size_t bytes) {
    write_file(file, std::string(bytes, 'b'));
    return curl_status(port, "--data-binary @" + file);
  };
  CHECK(status_posting(options.limits.max_body_bytes) == 200);
  CHECK(status_posting(options.limits.max_body_bytes + 1) == 413);
  // Past curl's own threshold for `Expect: 100-continue` (1 MiB in new
  // versions): the 413 comes instead of the 100, and curl never sends it.
  CHECK(status_posting(2 << 20) == 413);
  std::remove(file.c_str());
  server.cancel();
  pool.shutdown();
}

TEST_CASE("reactor_options: a ring_entries of 0 is refused, named, on every backend") {
  // Before, automatic fell back to epoll without a word and io_uring threw
  // io_uring_setup's bare EINVAL.
  for (canopy::io::io_backend backend :
       {canopy::io::io_backend::automatic, canopy::io::io_backend::epoll,
        canopy::io::io_backend::io_uring}) {
    bool named = false;
    try {
      (void)canopy::io::with_reactor({}, {.backend = backend, .ring_entries = 0});
    } catch (const std::invalid_argument& error) {
      named = std::string(error.what()).find("ring_entries") != std::string::npos;
    }
    CHECK(named);
  }
  // The smallest ring works.
  executor pool(canopy::io::with_reactor(io_config(1), {.ring_entries = 1}));
  CHECK(pool.spawn([] { return 5; }).get() == 5);
}

TEST_CASE("signal_set: an async_wait pending at shutdown is destroyed with its captures") {
  canopy::io::block_signals({SIGUSR1});
  watchdog dog("async_wait at shutdown", 60);
  auto held = std::make_shared<int>(1);
  std::atomic<bool> called{false};
  {
    executor pool(io_config(2));
    signal_set set(canopy::io::reactor::of(pool), {SIGUSR1});
    set.async_wait(pool, [held, &called](int, std::error_code) { called = true; });
    CHECK(held.use_count() == 2);
    std::this_thread::sleep_for(20ms);
    pool.shutdown();
    CHECK(held.use_count() == 1);  // the callback went with its task
  }
  CHECK_FALSE(called.load());
}

TEST_CASE("signal_set: async_wait with an empty callback is refused at once") {
  // Before, it was accepted and failed with bad_function_call, reported to
  // on_detached_exception only when a signal came.
  canopy::io::block_signals({SIGUSR1});
  watchdog dog("async_wait empty", 60);
  executor pool(io_config(1));
  signal_set set(canopy::io::reactor::of(pool), {SIGUSR1});
  CHECK_THROWS_AS(set.async_wait(pool, {}), std::invalid_argument);
  CHECK(eventually([&] { return pool.stats().live_tasks == 0; }));  // nothing spawned
}

TEST_CASE("callback_registration: an empty callback is refused at once, in both forms") {
  // Before, it was accepted and its first readiness threw bad_function_call
  // into on_detached_exception, ending the watch.
  watchdog dog("callback empty", 60);
  executor pool(io_config(1));
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  CHECK_THROWS_AS(
      canopy::io::callback_registration(pool, fds[0], canopy::io::interest::readable, {}),
      std::invalid_argument);
  std::error_code error;
  canopy::io::callback_registration quiet(pool, fds[0], canopy::io::interest::readable, {}, error);
  CHECK(error == std::errc::invalid_argument);
  CHECK_FALSE(quiet.is_open());
  ::close(fds[0]);
  ::close(fds[1]);
}
