// timer_bench — Canopy's timers against Boost.Asio's, one JSON line per run.
//
//   timer_bench --peer canopy|asio --test lateness|lateness_loaded|insert_cancel
//               [--threads N] [--samples K]
//
//   lateness         K (default 2000) sleeps of 1 ms one after another in one
//                    task (Canopy: co_await sleep_for on an executor with a
//                    reactor, whose poller sleeps in epoll_pwait2; Asio: a
//                    steady_timer re-armed from its handler, io_context run
//                    by N threads); lateness = wake time - deadline, p50/p99.
//   lateness_loaded  the same while N background tasks (handlers) keep every
//                    thread busy: each spins for 10 µs, then yields (Canopy:
//                    co_await yield_now; Asio: re-post itself).
//   insert_cancel    10^6 timers (deadlines spread over 1..10 s) armed, then
//                    cancelled, on one thread; ns per timer for both steps
//                    together (Asio: until the cancelled handlers have run
//                    and freed their operations), and the resident memory
//                    per pending timer.
// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/io.hpp"
#include "io/timer_binding.hpp"
#include "io/timer_wait.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
constexpr auto sleep_length = std::chrono::milliseconds(1);
constexpr auto busy_chunk = std::chrono::microseconds(10);
constexpr std::size_t timer_count = 1'000'000;

struct settings {
  std::string peer = "canopy";
  std::string test = "lateness";
  unsigned threads = 1;
  unsigned samples = 2000;
};

void spin_for(std::chrono::nanoseconds length) {
  const auto until = clock_type::now() + length;
  while (clock_type::now() < until) {
  }
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1));
  return values[index];
}

long resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::strtol(line.c_str() + 6, nullptr, 10);
    }
  }
  return 0;
}

double micros(clock_type::duration length) {
  return std::chrono::duration<double, std::micro>(length).count();
}

// ---- Canopy ----

std::vector<double> canopy_lateness(const settings& run, bool loaded) {
  canopy::executor_config config;
  config.worker_count = run.threads;
  canopy::executor pool(canopy::io::with_reactor(config));
  canopy::io::reactor_timers timers(pool);
  std::atomic<bool> stop{false};
  std::vector<canopy::task_handle<void>> background;
  if (loaded) {
    for (unsigned i = 0; i < run.threads; ++i) {
      background.push_back(pool.spawn([](std::atomic<bool>& done) -> canopy::task<void> {
        while (!done.load(std::memory_order_relaxed)) {
          spin_for(busy_chunk);
          co_await canopy::yield_now();
        }
      }(stop)));
    }
  }
  std::vector<double> lateness =
      canopy::block_on(pool, [](unsigned samples) -> canopy::task<std::vector<double>> {
        std::vector<double> late;
        late.reserve(samples);
        for (unsigned i = 0; i < samples; ++i) {
          const auto deadline = clock_type::now() + sleep_length;
          co_await canopy::sleep_until(deadline);
          late.push_back(micros(clock_type::now() - deadline));
        }
        co_return late;
      }(run.samples));
  stop.store(true);
  for (auto& handle : background) {
    handle.join();
  }
  pool.shutdown();
  return lateness;
}

void canopy_insert_cancel(double& ns_per_timer, double& bytes_per_timer) {
  canopy::io::timer_queue queue;
  std::mt19937_64 random(1);
  const long before = resident_kib();
  std::vector<canopy::io::timer_queue::entry> entries(timer_count);
  const auto now = clock_type::now();
  std::vector<clock_type::time_point> deadlines(timer_count);
  for (auto& deadline : deadlines) {
    deadline = now + std::chrono::milliseconds(1000 + random() % 9000);
  }
  const auto start = clock_type::now();
  for (std::size_t i = 0; i < timer_count; ++i) {
    (void)queue.arm(entries[i], deadlines[i], canopy::waker{});
  }
  const long pending = resident_kib();
  for (auto& entry : entries) {
    queue.disarm(entry);
  }
  const auto elapsed = clock_type::now() - start;
  ns_per_timer = std::chrono::duration<double, std::nano>(elapsed).count() / timer_count;
  bytes_per_timer = static_cast<double>(pending - before) * 1024.0 / timer_count;
}

// ---- Asio ----

std::vector<double> asio_lateness(const settings& run, bool loaded) {
  boost::asio::io_context context(static_cast<int>(run.threads));
  auto guard = boost::asio::make_work_guard(context);
  std::vector<std::thread> runners;
  for (unsigned i = 0; i < run.threads; ++i) {
    runners.emplace_back([&context] { context.run(); });
  }
  std::atomic<bool> stop{false};
  struct busy {
    boost::asio::io_context* context;
    std::atomic<bool>* done;
    void operator()() const {
      if (done->load(std::memory_order_relaxed)) {
        return;
      }
      spin_for(busy_chunk);
      boost::asio::post(*context, *this);
    }
  };
  if (loaded) {
    for (unsigned i = 0; i < run.threads; ++i) {
      boost::asio::post(context, busy{&context, &stop});
    }
  }
  std::vector<double> lateness;
  lateness.reserve(run.samples);
  std::promise<void> finished;
  boost::asio::steady_timer timer(context);
  clock_type::time_point deadline;
  std::function<void()> arm = [&] {
    deadline = clock_type::now() + sleep_length;
    timer.expires_at(deadline);
    timer.async_wait([&](boost::system::error_code) {
      lateness.push_back(micros(clock_type::now() - deadline));
      if (lateness.size() == run.samples) {
        finished.set_value();
        return;
      }
      arm();
    });
  };
  boost::asio::post(context, arm);
  finished.get_future().wait();
  stop.store(true);
  guard.reset();
  for (auto& runner : runners) {
    runner.join();
  }
  return lateness;
}

void asio_insert_cancel(double& ns_per_timer, double& bytes_per_timer) {
  boost::asio::io_context context(1);
  std::mt19937_64 random(1);
  const long before = resident_kib();
  std::vector<std::unique_ptr<boost::asio::steady_timer>> timers;
  timers.reserve(timer_count);
  for (std::size_t i = 0; i < timer_count; ++i) {
    timers.push_back(std::make_unique<boost::asio::steady_timer>(context));
  }
  std::vector<std::chrono::milliseconds> delays(timer_count);
  for (auto& delay : delays) {
    delay = std::chrono::milliseconds(1000 + random() % 9000);
  }
  std::size_t completed = 0;
  const auto start = clock_type::now();
  for (std::size_t i = 0; i < timer_count; ++i) {
    timers[i]->expires_after(delays[i]);
    timers[i]->async_wait([&completed](boost::system::error_code) { ++completed; });
  }
  const long pending = resident_kib();
  for (auto& timer : timers) {
    timer->cancel();
  }
  context.run();  // the cancelled waits complete (operation_aborted) and free their state
  const auto elapsed = clock_type::now() - start;
  if (completed != timer_count) {
    std::fprintf(stderr, "timer_bench: %zu of %zu asio waits completed\n", completed, timer_count);
    std::exit(1);
  }
  ns_per_timer = std::chrono::duration<double, std::nano>(elapsed).count() / timer_count;
  bytes_per_timer = static_cast<double>(pending - before) * 1024.0 / timer_count;
}

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr,
               "timer_bench: %s\nusage: timer_bench --peer canopy|asio --test "
               "lateness|lateness_loaded|insert_cancel [--threads N] [--samples K]\n",
               message);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  settings run;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view option = argv[i];
    const std::string value = argv[i + 1];
    if (option == "--peer" && (value == "canopy" || value == "asio")) {
      run.peer = value;
    } else if (option == "--test" &&
               (value == "lateness" || value == "lateness_loaded" || value == "insert_cancel")) {
      run.test = value;
    } else if (option == "--threads" && std::atoi(value.c_str()) > 0) {
      run.threads = static_cast<unsigned>(std::atoi(value.c_str()));
    } else if (option == "--samples" && std::atoi(value.c_str()) > 0) {
      run.samples = static_cast<unsigned>(std::atoi(value.c_str()));
    } else {
      usage("bad option");
    }
  }
  if (argc % 2 == 0) {
    usage("options come in pairs");
  }
  const bool canopy_peer = run.peer == "canopy";
  if (run.test == "insert_cancel") {
    double ns = 0;
    double bytes = 0;
    if (canopy_peer) {
      canopy_insert_cancel(ns, bytes);
    } else {
      asio_insert_cancel(ns, bytes);
    }
    std::printf(
        "{\"peer\":\"%s\",\"workload\":\"timers_insert_cancel\",\"value\":%.1f,\"unit\":\"ns/"
        "timer\",\"bytes_per_pending_timer\":%.1f}\n",
        run.peer.c_str(), ns, bytes);
    return 0;
  }
  const bool loaded = run.test == "lateness_loaded";
  const std::vector<double> lateness =
      canopy_peer ? canopy_lateness(run, loaded) : asio_lateness(run, loaded);
  std::printf(
      "{\"peer\":\"%s\",\"workload\":\"timer_lateness%s\",\"value\":%.1f,\"unit\":\"us\","
      "\"p99\":%.1f,\"threads\":%u,\"samples\":%u}\n",
      run.peer.c_str(), loaded ? "_loaded" : "", percentile(lateness, 0.5),
      percentile(lateness, 0.99), run.threads, run.samples);
  return 0;
}
