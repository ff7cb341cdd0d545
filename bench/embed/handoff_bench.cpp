// handoff_bench — the embedding round trip, Canopy beside Boost.Asio:
// a loop thread hands a request to a pool, the pool computes, and the reply
// continues on the loop thread.
//
//   handoff_bench [--handoffs N] [--rounds K] [--workers W] [--only canopy|asio]
//
// --only runs one runtime (to profile it alone); the other column reads 0.
//
//   Canopy: the loop thread sleeps in epoll_wait on executor::notify_fd();
//           spawn_detached(work) -> post(reply) -> run_until_idle().
//   Asio:   the loop thread runs an io_context; post(thread_pool, work) ->
//           post(io_context, reply).
// Two shapes per runtime: one hand-off in flight at a time (latency: p50 and
// p99 of the round trip), and 64 in flight (hand-offs per second). CPU per
// hand-off is the process's user+system time over the run. Rounds alternate
// the runtimes; each number is the median over rounds. The last column is
// Canopy ÷ Asio (below 1: Canopy is better).
#include <sys/epoll.h>
#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <canopy/executor.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

struct options {
  long handoffs = 20000;
  int rounds = 3;
  std::size_t workers = 2;
  bool run_canopy = true;
  bool run_asio = true;
};

struct result {
  double p50_us = 0;
  double p99_us = 0;
  double per_second = 0;  // with `inflight` hand-offs in flight
  double cpu_us = 0;      // process CPU per hand-off
};

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// A few dozen nanoseconds of "work" on the pool, the same for both.
std::uint64_t work(std::uint64_t value) {
  for (int round = 0; round < 16; ++round) {
    value = value * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  return value;
}

double percentile(std::vector<double>& samples, double fraction) {
  if (samples.empty()) {
    return 0;
  }
  const auto index = static_cast<std::size_t>(fraction * static_cast<double>(samples.size() - 1));
  std::nth_element(samples.begin(), samples.begin() + static_cast<long>(index), samples.end());
  return samples[index];
}

// The hand-off driver shared by both runtimes: `start(i)` begins hand-off
// i; the runtime calls `finish(i)` on the loop thread when it is back.
struct handoff_run {
  long total;
  long inflight;
  long started = 0;
  long finished = 0;
  std::vector<clock_type::time_point> began;
  std::vector<double> latencies_us;
  std::uint64_t checksum = 0;

  handoff_run(long total_handoffs, long in_flight)
      : total(total_handoffs), inflight(in_flight), began(static_cast<std::size_t>(in_flight)) {
    latencies_us.reserve(static_cast<std::size_t>(total_handoffs));
  }
  // Returns the slot of the hand-off to start next, or -1.
  long next_slot() { return started < total ? (started++ % inflight) : -1; }
};

result canopy_handoffs(const options& settings, long inflight) {
  canopy::executor_config config;
  config.worker_count = settings.workers;
  canopy::executor pool(config);
  handoff_run run(settings.handoffs, inflight);
  const int poller = epoll_create1(EPOLL_CLOEXEC);
  epoll_event interest{};
  interest.events = EPOLLIN;
  interest.data.fd = pool.notify_fd();
  epoll_ctl(poller, EPOLL_CTL_ADD, pool.notify_fd(), &interest);

  std::function<void(long)> start = [&](long slot) {
    run.began[static_cast<std::size_t>(slot)] = clock_type::now();
    pool.spawn_detached([&, slot] {
      const std::uint64_t value = work(static_cast<std::uint64_t>(slot));
      pool.post([&, slot, value] {
        run.latencies_us.push_back(
            std::chrono::duration<double, std::micro>(clock_type::now() -
                                                      run.began[static_cast<std::size_t>(slot)])
                .count());
        run.checksum += value;
        ++run.finished;
        if (run.next_slot() >= 0) {
          start(slot);
        }
      });
    });
  };
  const double cpu_before = cpu_seconds();
  const auto wall_before = clock_type::now();
  for (long index = 0; index < inflight; ++index) {
    start(run.next_slot());
  }
  while (run.finished < run.total) {
    epoll_event event{};
    if (epoll_wait(poller, &event, 1, 10000) <= 0) {
      std::fprintf(stderr, "handoff_bench: canopy hand-off lost (10 s without a wake)\n");
      std::exit(1);
    }
    pool.run_until_idle();
  }
  const double wall = std::chrono::duration<double>(clock_type::now() - wall_before).count();
  const double cpu = cpu_seconds() - cpu_before;
  close(poller);
  result out;
  out.p50_us = percentile(run.latencies_us, 0.50);
  out.p99_us = percentile(run.latencies_us, 0.99);
  out.per_second = static_cast<double>(run.total) / wall;
  out.cpu_us = cpu * 1e6 / static_cast<double>(run.total);
  return out;
}

result asio_handoffs(const options& settings, long inflight) {
  boost::asio::io_context io(1);
  boost::asio::thread_pool workers(settings.workers);
  handoff_run run(settings.handoffs, inflight);
  std::function<void(long)> start = [&](long slot) {
    run.began[static_cast<std::size_t>(slot)] = clock_type::now();
    boost::asio::post(workers, [&, slot] {
      const std::uint64_t value = work(static_cast<std::uint64_t>(slot));
      boost::asio::post(io, [&, slot, value] {
        run.latencies_us.push_back(
            std::chrono::duration<double, std::micro>(clock_type::now() -
                                                      run.began[static_cast<std::size_t>(slot)])
                .count());
        run.checksum += value;
        ++run.finished;
        if (run.next_slot() >= 0) {
          start(slot);
        } else if (run.finished == run.total) {
          io.stop();
        }
      });
    });
  };
  auto guard = boost::asio::make_work_guard(io);
  const double cpu_before = cpu_seconds();
  const auto wall_before = clock_type::now();
  for (long index = 0; index < inflight; ++index) {
    start(run.next_slot());
  }
  io.run();
  const double wall = std::chrono::duration<double>(clock_type::now() - wall_before).count();
  const double cpu = cpu_seconds() - cpu_before;
  workers.join();
  result out;
  out.p50_us = percentile(run.latencies_us, 0.50);
  out.p99_us = percentile(run.latencies_us, 0.99);
  out.per_second = static_cast<double>(run.total) / wall;
  out.cpu_us = cpu * 1e6 / static_cast<double>(run.total);
  return out;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

options parse(int argc, char** argv) {
  options settings;
  for (int index = 1; index + 1 < argc; index += 2) {
    const std::string name = argv[index];
    if (name == "--only") {
      const std::string runtime = argv[index + 1];
      if (runtime != "canopy" && runtime != "asio") {
        std::fprintf(stderr, "handoff_bench: --only takes canopy or asio, not %s\n",
                     runtime.c_str());
        std::exit(2);
      }
      settings.run_canopy = runtime == "canopy";
      settings.run_asio = runtime == "asio";
      continue;
    }
    const long value = std::atol(argv[index + 1]);
    if (value <= 0) {
      std::fprintf(stderr, "handoff_bench: %s needs a positive number\n", name.c_str());
      std::exit(2);
    }
    if (name == "--handoffs") {
      settings.handoffs = value;
    } else if (name == "--rounds") {
      settings.rounds = static_cast<int>(value);
    } else if (name == "--workers") {
      settings.workers = static_cast<std::size_t>(value);
    } else {
      std::fprintf(stderr,
                   "handoff_bench: unknown option %s (--handoffs, --rounds, --workers, --only)\n",
                   name.c_str());
      std::exit(2);
    }
  }
  return settings;
}

}  // namespace

int main(int argc, char** argv) {
  const options settings = parse(argc, argv);
  struct row {
    const char* name;
    long inflight;
    double result::*field;
    bool lower_is_better;
  };
  const row rows[] = {
      {"round trip p50 (us), 1 in flight", 1, &result::p50_us, true},
      {"round trip p99 (us), 1 in flight", 1, &result::p99_us, true},
      {"CPU per hand-off (us), 1 in flight", 1, &result::cpu_us, true},
      {"hand-offs per second, 64 in flight", 64, &result::per_second, false},
      {"CPU per hand-off (us), 64 in flight", 64, &result::cpu_us, true},
  };
  std::vector<result> canopy_single, canopy_many, asio_single, asio_many;
  for (int round = 0; round < settings.rounds; ++round) {
    canopy_single.push_back(settings.run_canopy ? canopy_handoffs(settings, 1) : result{});
    asio_single.push_back(settings.run_asio ? asio_handoffs(settings, 1) : result{});
    canopy_many.push_back(settings.run_canopy ? canopy_handoffs(settings, 64) : result{});
    asio_many.push_back(settings.run_asio ? asio_handoffs(settings, 64) : result{});
  }
  std::printf(
      "\nhand-off loop thread -> pool -> loop thread: %ld hand-offs, %zu pool threads, "
      "median of %d rounds\n\n",
      settings.handoffs, settings.workers, settings.rounds);
  std::printf("| measure | Canopy | Asio | Canopy / Asio |\n|---|---|---|---|\n");
  for (const row& line : rows) {
    std::vector<double> canopy_values, asio_values;
    const auto& canopy_runs = line.inflight == 1 ? canopy_single : canopy_many;
    const auto& asio_runs = line.inflight == 1 ? asio_single : asio_many;
    for (const result& one : canopy_runs) {
      canopy_values.push_back(one.*line.field);
    }
    for (const result& one : asio_runs) {
      asio_values.push_back(one.*line.field);
    }
    const double canopy_value = median(canopy_values);
    const double asio_value = median(asio_values);
    // The ratio reads "below 1: Canopy better" for every row.
    const double ratio =
        line.lower_is_better ? canopy_value / asio_value : asio_value / canopy_value;
    std::printf("| %s | %.2f | %.2f | %.2f |\n", line.name, canopy_value, asio_value, ratio);
  }
  return 0;
}
