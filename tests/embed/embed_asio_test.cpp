// Boost.Asio interop (issue 16, embed/asio.hpp): Asio handlers and
// awaitables as Canopy tasks, and Canopy inside an io_context loop.
#include <doctest/doctest.h>

// clang-format off
#include <utility>  // before Boost 1.74's awaitable.hpp, which uses std::exchange
// clang-format on

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "coroutine/coroutine.hpp"
#include "embed/asio.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

using canopy::executor;
using canopy::executor_config;
using canopy::testing::eventually;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

static_assert(boost::asio::execution::is_executor<canopy::asio_context::executor_type>::value,
              "canopy::asio_context::executor_type meets Asio's executor requirements");
static_assert(
    std::is_convertible_v<canopy::asio_context::executor_type, boost::asio::any_io_executor>,
    "and converts to any_io_executor, so awaitables can run on it");

namespace {

executor_config pool_of(std::size_t workers) {
  executor_config config;
  config.worker_count = workers;
  return config;
}

bool on_canopy_worker(executor& pool) {
  const canopy::detail::worker_context* worker = canopy::detail::current_worker();
  return worker != nullptr && worker->core == &pool.core();
}

boost::asio::awaitable<void> wait_then_record(boost::asio::io_context& io, executor& pool,
                                              std::atomic<int>& before, std::atomic<int>& after) {
  if (on_canopy_worker(pool)) {
    before.fetch_add(1);
  }
  boost::asio::steady_timer timer(io, 1ms);  // an io_context timer
  co_await timer.async_wait(boost::asio::use_awaitable);
  if (on_canopy_worker(pool)) {  // resumed through the awaitable's executor: Canopy
    after.fetch_add(1);
  }
}

}  // namespace

TEST_CASE("asio: post, co_spawn and bind_executor run on Canopy's workers") {
  watchdog guard("asio executor", 60);
  executor pool(pool_of(2));
  canopy::asio_context context(pool);
  auto on_canopy = context.get_executor();
  CHECK(on_canopy == context.get_executor());
  CHECK(&boost::asio::query(on_canopy, boost::asio::execution::context) == &context);

  std::atomic<int> posted{0};
  for (int index = 0; index < 100; ++index) {
    boost::asio::post(on_canopy, [&] {
      if (on_canopy_worker(pool)) {
        posted.fetch_add(1);
      }
    });
  }
  CHECK(eventually([&] { return posted.load() == 100; }));

  // Sockets and timers of an io_context complete there; with bind_executor
  // and co_spawn their continuations run as Canopy tasks.
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  std::atomic<int> bound{0};
  std::atomic<int> before{0};
  std::atomic<int> after{0};
  boost::asio::steady_timer timer(io, 1ms);
  timer.async_wait(boost::asio::bind_executor(on_canopy, [&](const boost::system::error_code& e) {
    if (!e && on_canopy_worker(pool)) {
      bound.fetch_add(1);
    }
  }));
  for (int index = 0; index < 20; ++index) {
    boost::asio::co_spawn(on_canopy, wait_then_record(io, pool, before, after),
                          boost::asio::detached);
  }
  CHECK(eventually([&] { return bound.load() == 1 && after.load() == 20; }));
  CHECK(before.load() == 20);
  // The last coroutine may still be destroying its io_context timer on a
  // worker: let the pool finish before the io_context goes.
  pool.shutdown();
  work.reset();
  io.stop();
  io_thread.join();
}

TEST_CASE("asio: a host-driven Canopy executor runs inside io_context::run") {
  watchdog guard("asio host zero workers", 60);
  executor pool(pool_of(0));
  boost::asio::io_context io;
  std::atomic<int> ran{0};
  const std::thread::id io_thread_id = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  {
    canopy::asio_host host(io, pool);
    std::thread spawner([&] {
      for (int index = 0; index < 1000; ++index) {
        pool.spawn_detached([&] {
          if (std::this_thread::get_id() != io_thread_id) {
            elsewhere.fetch_add(1);
          }
          ran.fetch_add(1);
        });
        if (index % 100 == 0) {
          std::this_thread::sleep_for(1ms);  // let the loop go back to sleep now and then
        }
      }
    });
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (ran.load() < 1000 && std::chrono::steady_clock::now() < deadline) {
      io.run_for(10ms);
    }
    spawner.join();
    CHECK(host.runs() == 1000);
  }
  io.run_for(1ms);  // the cancelled wait completes with ~asio_host done
  CHECK(ran.load() == 1000);
  CHECK(elsewhere.load() == 0);
}

TEST_CASE("asio: hand-offs io_context -> Canopy workers -> io_context, none lost") {
  watchdog guard("asio hand-offs", 120);
  executor pool(pool_of(2));
  boost::asio::io_context io;
  const long handoffs = 20000 / canopy::testing::stress_divisor();
  long completed = 0;
  long off_thread = 0;
  const std::thread::id io_thread = std::this_thread::get_id();
  canopy::asio_host host(io, pool);
  // Each completion, on the io thread, starts the next hand-off: the loop
  // sleeps in epoll between them.
  std::function<void()> start_next;
  start_next = [&] {
    pool.spawn_detached([&] {
      pool.post([&] {
        if (std::this_thread::get_id() != io_thread) {
          ++off_thread;
        }
        if (++completed < handoffs) {
          start_next();
        } else {
          io.stop();
        }
      });
    });
  };
  boost::asio::post(io, start_next);
  io.run_for(std::chrono::seconds(static_cast<long>(60 * canopy::testing::timeout_scale())));
  CHECK(completed == handoffs);
  CHECK(off_thread == 0);
}
