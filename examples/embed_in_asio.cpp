// embed_in_asio — Canopy and Boost.Asio in one program, both directions.
//
//   embed_in_asio
//
// 1. An Asio io_context runs on the main thread and drives a Canopy executor
//    through its notify descriptor (canopy::asio_host): work is handed from
//    the io_context to Canopy's workers, and continues on the io_context's
//    thread with executor::post().
// 2. Asio's own asynchronous operations complete on Canopy's workers: an
//    io_context timer's handler bound to canopy::asio_context's executor
//    (bind_executor), and a coroutine started with boost::asio::co_spawn on
//    that executor.
// Prints what ran where; exits 0 if everything ran on the expected threads.
// clang-format off
#include <utility>  // before Boost 1.74's awaitable.hpp, which uses std::exchange
// clang-format on

#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <canopy/canopy.hpp>
#include <canopy/embed/asio.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

namespace {

bool on_worker_of(canopy::executor& pool) {
  const canopy::detail::worker_context* worker = canopy::detail::current_worker();
  return worker != nullptr && worker->core == &pool.core() && pool.worker_count() > 0 &&
         worker->index < pool.worker_count();
}

boost::asio::awaitable<int> timed_answer(boost::asio::io_context& io) {
  boost::asio::steady_timer timer(io, std::chrono::milliseconds(5));
  co_await timer.async_wait(boost::asio::use_awaitable);
  co_return 42;
}

}  // namespace

int main() {
  canopy::executor_config config;
  config.worker_count = 2;
  canopy::executor pool(config);
  boost::asio::io_context io;
  const std::thread::id io_thread = std::this_thread::get_id();

  // Direction 1: Canopy inside the io_context loop.
  canopy::asio_host host(io, pool);
  constexpr int handoffs = 1000;
  int back_on_io_thread = 0;
  std::atomic<int> computed_on_workers{0};
  for (int index = 0; index < handoffs; ++index) {
    pool.spawn_detached([&] {
      if (on_worker_of(pool)) {
        computed_on_workers.fetch_add(1);
      }
      pool.post([&] {
        if (std::this_thread::get_id() == io_thread) {
          ++back_on_io_thread;
        }
      });
    });
  }

  // Direction 2: Asio completions on Canopy's workers.
  canopy::asio_context context(pool);
  auto on_canopy = context.get_executor();
  std::atomic<bool> timer_on_worker{false};
  boost::asio::steady_timer timer(io, std::chrono::milliseconds(5));
  timer.async_wait(boost::asio::bind_executor(on_canopy, [&](const boost::system::error_code& e) {
    timer_on_worker.store(!e && on_worker_of(pool));
  }));
  std::atomic<int> coroutine_result{0};
  std::atomic<bool> coroutine_on_worker{false};
  boost::asio::co_spawn(
      on_canopy,
      [&]() -> boost::asio::awaitable<void> {
        const int value = co_await timed_answer(io);
        coroutine_on_worker.store(on_worker_of(pool));
        coroutine_result.store(value);
      },
      boost::asio::detached);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (
      (back_on_io_thread < handoffs || coroutine_result.load() == 0 || !timer_on_worker.load()) &&
      std::chrono::steady_clock::now() < deadline) {
    io.run_for(std::chrono::milliseconds(10));
  }
  // Let the pool finish (a coroutine may still be destroying its
  // io_context timer on a worker) before the io_context goes.
  pool.shutdown();
  std::printf(
      "embed_in_asio: %d/%d hand-offs computed on Canopy workers and continued on the io_context "
      "thread (%zu runs there); io_context timer handler on a Canopy worker: %s; co_spawn "
      "awaitable on Canopy: %s, result %d\n",
      back_on_io_thread, handoffs, host.runs(), timer_on_worker.load() ? "yes" : "no",
      coroutine_on_worker.load() ? "yes" : "no", coroutine_result.load());
  const bool ok = back_on_io_thread == handoffs && computed_on_workers.load() == handoffs &&
                  timer_on_worker.load() && coroutine_on_worker.load() &&
                  coroutine_result.load() == 42;
  return ok ? 0 : 1;
}
