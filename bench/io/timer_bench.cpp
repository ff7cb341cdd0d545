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
//   storm            --timers N (default 10^5) sleeps of random lengths
//                    (uniform 0..1000 ms, one seeded sequence for every
//                    peer), half of them cancelled shortly after they
//                    start; lateness of each sleep that fired (wake time -
//                    deadline) p50/p99/max, time from the first spawn until
//                    the last sleep fired, and the process's peak resident
//                    set (VmHWM: run it in a process of its own). Canopy: N
//                    coroutine tasks spawned from the main thread on an
//                    executor with a reactor (N threads), each
//                    `co_await sleep_until(now + length)`; the odd ones are
//                    join_handle::cancel()ed one batch of 1024 spawns later.
//                    Asio: N handlers posted to an io_context run by N
//                    threads, each arming a steady_timer of its own
//                    (async_wait); an odd one posts its timer's cancel()
//                    right after arming it (a timer is not thread-safe, so
//                    the cancel runs as a handler after the arm). tokio:
//                    bench/peers/rust, `canopy_rust_peers timer_storm`.
// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on

#include <algorithm>
#include <atomic>
#include <canopy/io.hpp>
#include <canopy/task.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
constexpr auto sleep_length = std::chrono::milliseconds(1);
constexpr auto busy_chunk = std::chrono::microseconds(10);
constexpr std::size_t timer_count = 1'000'000;
// storm: sleep lengths, and how many spawns later an odd task is cancelled.
constexpr std::int64_t storm_max_length_us = 1'000'000;
constexpr std::size_t storm_cancel_batch = 1024;

struct settings {
  std::string peer = "canopy";
  std::string test = "lateness";
  unsigned threads = 1;
  unsigned samples = 2000;
  std::size_t timers = 100'000;
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

long peak_resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::strtol(line.c_str() + 6, nullptr, 10);
    }
  }
  return 0;
}

double micros(clock_type::duration length) {
  return std::chrono::duration<double, std::micro>(length).count();
}

// ---- storm: shared by the C++ peers ----

// What every storm task shares: its sleep length, and where it records its
// lateness (NaN: it did not fire) and its wake time. Each slot is written by
// its own task only and read after `remaining` reached 0.
struct storm_state {
  explicit storm_state(std::size_t count) : lengths(count), lateness(count), woke_ns(count, 0) {
    std::uint64_t seed = 1;
    for (auto& length : lengths) {
      // splitmix64, as bench/peers/rust/src/timer_storm.rs computes it.
      seed += 0x9e3779b97f4a7c15ULL;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30U)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27U)) * 0x94d049bb133111ebULL;
      z ^= z >> 31U;
      length = std::chrono::microseconds(
          static_cast<std::int64_t>(z % static_cast<std::uint64_t>(storm_max_length_us + 1)));
    }
    std::fill(lateness.begin(), lateness.end(), std::numeric_limits<double>::quiet_NaN());
    remaining.store(count, std::memory_order_relaxed);
  }
  void record(std::size_t index, clock_type::time_point deadline) noexcept {
    const auto now = clock_type::now();
    lateness[index] = micros(now - deadline);
    woke_ns[index] =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  }
  void task_ended() noexcept {
    // acq_rel: the last decrement sees every task's slots (release by the
    // others), and wait_all()'s acquire load pairs with it.
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      remaining.notify_all();
    }
  }
  void wait_all() noexcept {
    // acquire: pairs with task_ended()'s decrements.
    for (std::size_t left = remaining.load(std::memory_order_acquire); left != 0;
         left = remaining.load(std::memory_order_acquire)) {
      remaining.wait(left, std::memory_order_acquire);
    }
  }

  std::vector<clock_type::duration> lengths;
  std::vector<double> lateness;
  std::vector<std::int64_t> woke_ns;
  std::atomic<std::size_t> remaining{0};
  std::atomic<std::size_t> cancelled{0};
};

struct storm_result {
  double p50 = 0;
  double p99 = 0;
  double max = 0;
  double all_fired_ms = 0;
  // How long the main thread took to spawn (post) every task, and the p99
  // lateness of the sleeps whose deadline came after that: what is late
  // because of the spawning and what is late anyway.
  double spawn_ms = 0;
  double p99_after_spawn = 0;
  std::size_t fired = 0;
  long peak_kib = 0;
};

std::int64_t nanoseconds_of(clock_type::time_point point) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(point.time_since_epoch()).count();
}

storm_result summarize_storm(const storm_state& state, clock_type::time_point start,
                             clock_type::time_point spawned) {
  storm_result result;
  std::vector<double> fired;
  std::vector<double> after_spawn;
  fired.reserve(state.lateness.size());
  std::int64_t last_ns = 0;
  const auto spawned_ns = static_cast<double>(nanoseconds_of(spawned));
  for (std::size_t i = 0; i < state.lateness.size(); ++i) {
    if (!std::isnan(state.lateness[i])) {
      fired.push_back(state.lateness[i]);
      last_ns = std::max(last_ns, state.woke_ns[i]);
      if (static_cast<double>(state.woke_ns[i]) - state.lateness[i] * 1000.0 >= spawned_ns) {
        after_spawn.push_back(state.lateness[i]);
      }
    }
  }
  result.fired = fired.size();
  result.p50 = percentile(fired, 0.5);
  result.p99 = percentile(fired, 0.99);
  result.max = fired.empty() ? 0 : *std::max_element(fired.begin(), fired.end());
  result.all_fired_ms = static_cast<double>(last_ns - nanoseconds_of(start)) / 1e6;
  result.spawn_ms = micros(spawned - start) / 1000.0;
  result.p99_after_spawn = percentile(after_spawn, 0.99);
  result.peak_kib = peak_resident_kib();
  return result;
}

// ---- Canopy ----

std::vector<double> canopy_lateness(const settings& run, bool loaded) {
  canopy::executor_config config;
  config.worker_count = run.threads;
  canopy::executor pool(canopy::io::with_reactor(config));
  canopy::io::reactor_timers timers(pool);
  std::atomic<bool> stop{false};
  std::vector<canopy::join_handle<void>> background;
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
    handle.get();
  }
  pool.shutdown();
  return lateness;
}

void canopy_insert_cancel(double& ns_per_timer, double& bytes_per_timer) {
  canopy::io::detail::timer_queue queue;
  std::mt19937_64 random(1);
  const long before = resident_kib();
  std::vector<canopy::io::detail::timer_queue::entry> entries(timer_count);
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

// Ends the task's count however the frame ends (fired, or destroyed by a
// cancel, also one that came before the task started): a parameter, so it
// lives in the frame from the spawn on.
class storm_guard {
 public:
  explicit storm_guard(storm_state& shared) noexcept : state_(&shared) {}
  storm_guard(storm_guard&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  storm_guard(const storm_guard&) = delete;
  storm_guard& operator=(const storm_guard&) = delete;
  storm_guard& operator=(storm_guard&&) = delete;
  ~storm_guard() {
    if (state_ != nullptr) {
      state_->task_ended();
    }
  }

 private:
  storm_state* state_;
};

canopy::task<void> storm_sleeper(storm_state& state, std::size_t index, storm_guard /*guard*/) {
  const auto deadline = clock_type::now() + state.lengths[index];
  co_await canopy::sleep_until(deadline);
  state.record(index, deadline);
}

storm_result canopy_storm(const settings& run) {
  canopy::executor_config config;
  config.worker_count = run.threads;
  canopy::executor pool(canopy::io::with_reactor(config));
  canopy::io::reactor_timers timers(pool);
  storm_state state(run.timers);
  std::vector<canopy::join_handle<void>> batch;
  std::vector<canopy::join_handle<void>> previous;
  batch.reserve(storm_cancel_batch);
  previous.reserve(storm_cancel_batch);
  const auto start = clock_type::now();
  for (std::size_t i = 0; i < run.timers; ++i) {
    batch.push_back(pool.spawn(storm_sleeper(state, i, storm_guard(state))));
    if (batch.size() == storm_cancel_batch || i + 1 == run.timers) {
      for (std::size_t k = 1; k < previous.size(); k += 2) {
        previous[k].cancel();  // the odd indices (batches are even-sized)
      }
      previous.clear();  // dropped handles: detached
      std::swap(previous, batch);
    }
  }
  for (std::size_t k = 1; k < previous.size(); k += 2) {
    previous[k].cancel();
  }
  previous.clear();
  const auto spawned = clock_type::now();
  state.wait_all();
  storm_result result = summarize_storm(state, start, spawned);
  pool.shutdown();
  return result;
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

// One Asio sleep: its timer, and the parties that still hold it (the wait's
// handler, and for a cancelled one the cancel handler too); the last frees it.
struct asio_sleeper {
  asio_sleeper(boost::asio::io_context& context, int holders) : timer(context), parties(holders) {}
  boost::asio::steady_timer timer;
  std::atomic<int> parties;
  void release() {
    // acq_rel: the last party's delete sees the other's use of the timer.
    if (parties.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      delete this;
    }
  }
};

storm_result asio_storm(const settings& run) {
  boost::asio::io_context context(static_cast<int>(run.threads));
  auto guard = boost::asio::make_work_guard(context);
  std::vector<std::thread> runners;
  for (unsigned i = 0; i < run.threads; ++i) {
    runners.emplace_back([&context] { context.run(); });
  }
  storm_state state(run.timers);
  const auto start = clock_type::now();
  for (std::size_t i = 0; i < run.timers; ++i) {
    boost::asio::post(context, [&context, &state, i] {
      const bool cancel = i % 2 == 1;
      auto* sleeper = new asio_sleeper(context, cancel ? 2 : 1);
      const auto deadline = clock_type::now() + state.lengths[i];
      sleeper->timer.expires_at(deadline);
      sleeper->timer.async_wait([&state, sleeper, i, deadline](boost::system::error_code error) {
        if (!error) {
          state.record(i, deadline);
        }
        sleeper->release();
        state.task_ended();
      });
      if (cancel) {
        boost::asio::post(context, [sleeper] {
          sleeper->timer.cancel();
          sleeper->release();
        });
      }
    });
  }
  const auto spawned = clock_type::now();
  state.wait_all();
  storm_result result = summarize_storm(state, start, spawned);
  guard.reset();
  for (auto& runner : runners) {
    runner.join();
  }
  return result;
}

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr,
               "timer_bench: %s\nusage: timer_bench --peer canopy|asio --test "
               "lateness|lateness_loaded|insert_cancel|storm [--threads N] [--samples K] "
               "[--timers N]\n",
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
    } else if (option == "--test" && (value == "lateness" || value == "lateness_loaded" ||
                                      value == "insert_cancel" || value == "storm")) {
      run.test = value;
    } else if (option == "--threads" && std::atoi(value.c_str()) > 0) {
      run.threads = static_cast<unsigned>(std::atoi(value.c_str()));
    } else if (option == "--samples" && std::atoi(value.c_str()) > 0) {
      run.samples = static_cast<unsigned>(std::atoi(value.c_str()));
    } else if (option == "--timers" && std::atoll(value.c_str()) > 0) {
      run.timers = static_cast<std::size_t>(std::atoll(value.c_str()));
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
  if (run.test == "storm") {
    const storm_result result = canopy_peer ? canopy_storm(run) : asio_storm(run);
    std::printf(
        "{\"peer\":\"%s\",\"workload\":\"timer_storm\",\"timers\":%zu,\"threads\":%u,"
        "\"fired\":%zu,\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,"
        "\"all_fired_ms\":%.1f,\"peak_rss_mib\":%.1f,\"spawn_ms\":%.1f,"
        "\"p99_after_spawn_us\":%.1f}\n",
        run.peer.c_str(), run.timers, run.threads, result.fired, result.p50, result.p99, result.max,
        result.all_fired_ms, static_cast<double>(result.peak_kib) / 1024.0, result.spawn_ms,
        result.p99_after_spawn);
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
