// canopy_demo — start an executor, spread work over every worker, and show
// what happened: tasks run per worker, steals, parks, and wakes by permit
// and by the JEC path; then show that the idle workers are asleep.
//   canopy_demo [BATCHES] [--trace FILE]
// --trace FILE writes a trace of the workers (docs/tracing.md): FILE as
// Chrome trace-event JSON, and the same name with .svg as a timeline.
#include <atomic>
#include <canopy/executor.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace {

// A little CPU work so that tasks overlap and stealing matters.
std::uint64_t churn(std::uint64_t seed) {
  for (int round = 0; round < 2000; ++round) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
  }
  return seed;
}

struct completion {
  std::mutex mutex;
  std::condition_variable cv;
  std::atomic<long> remaining;
  explicit completion(long count) : remaining(count) {}
  void arrive() {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      const std::lock_guard lock(mutex);
      cv.notify_all();
    }
  }
  void wait() {
    std::unique_lock lock(mutex);
    cv.wait(lock, [this] { return remaining.load(std::memory_order_acquire) == 0; });
  }
};

void print_stats(const canopy::executor_stats& stats) {
  std::printf("%-7s %10s %8s %7s %9s %9s %9s %9s\n", "worker", "tasks run", "steals", "parks",
              "wake:prm", "wake:jec", "wake:end", "spurious");
  for (std::size_t index = 0; index < stats.workers.size(); ++index) {
    const canopy::worker_stats& worker = stats.workers[index];
    std::printf("%-7zu %10llu %8llu %7llu %9llu %9llu %9llu %9llu\n", index,
                static_cast<unsigned long long>(worker.tasks_run),
                static_cast<unsigned long long>(worker.steals),
                static_cast<unsigned long long>(worker.parks),
                static_cast<unsigned long long>(worker.wakes_by_permit),
                static_cast<unsigned long long>(worker.wakes_by_jec),
                static_cast<unsigned long long>(worker.wakes_by_shutdown),
                static_cast<unsigned long long>(worker.spurious_wakeups));
  }
  const canopy::worker_stats total = stats.total();
  std::printf("%-7s %10llu %8llu %7llu %9llu %9llu %9llu %9llu\n", "total",
              static_cast<unsigned long long>(total.tasks_run),
              static_cast<unsigned long long>(total.steals),
              static_cast<unsigned long long>(total.parks),
              static_cast<unsigned long long>(total.wakes_by_permit),
              static_cast<unsigned long long>(total.wakes_by_jec),
              static_cast<unsigned long long>(total.wakes_by_shutdown),
              static_cast<unsigned long long>(total.spurious_wakeups));
  // The columns, as worker_stats (<canopy/executor.hpp>) counts them.
  std::printf(
      "(parks: times the worker blocked; wake:prm: parks ended by a permit (a leaf of the\n"
      " summary tree became active); wake:jec: ended by the JEC path (work posted without a\n"
      " permit while too few workers were awake); wake:end: ended by shutdown; spurious:\n"
      " returns from the futex with no wake)\n");
}

}  // namespace

int main(int argc, char** argv) {
  long batches = 200;
  canopy::executor_config config;
  for (int index = 1; index < argc; ++index) {
    const std::string argument = argv[index];
    if (argument == "--trace" && index + 1 < argc) {
      config.trace_path = argv[++index];
      config.trace_events_per_worker = std::size_t{1} << 18;  // the whole run
    } else if (!argument.empty() && argument[0] != '-') {
      batches = std::atol(argument.c_str());
    } else {
      std::fprintf(stderr, "usage: canopy_demo [BATCHES] [--trace FILE]\n");
      return 2;
    }
  }
  constexpr long children_per_batch = 500;
  canopy::executor pool(config);
  const std::size_t workers = pool.worker_count();
  std::printf(
      "canopy demo: %zu workers, %ld batches x %ld tasks spawned from inside tasks,\n"
      "plus %ld tasks spawned from this (non-worker) thread\n\n",
      workers, batches, children_per_batch, batches * 10);

  std::atomic<std::uint64_t> checksum{0};
  completion done(batches * (children_per_batch + 1) + batches * 10);
  const auto started = std::chrono::steady_clock::now();
  for (long batch = 0; batch < batches; ++batch) {
    // A parent task fans out children into its own worker's partition;
    // idle workers steal them.
    pool.spawn_detached([&, batch] {
      for (long child = 0; child < children_per_batch; ++child) {
        pool.spawn_detached([&, batch, child] {
          checksum.fetch_add(churn(static_cast<std::uint64_t>(batch * 7919 + child + 1)) & 0xff,
                             std::memory_order_relaxed);
          done.arrive();
        });
      }
      done.arrive();
    });
    for (int remote = 0; remote < 10; ++remote) {
      pool.spawn_detached([&] { done.arrive(); });
    }
    if (batch % 20 == 19) {
      // Let the pool go idle now and then so parks and wakes show up.
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
    }
  }
  done.wait();
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  std::printf("all %ld tasks ran in %.1f ms (checksum %llu)\n\n",
              batches * (children_per_batch + 11), elapsed_ms,
              static_cast<unsigned long long>(checksum.load()));

  // Give the workers a moment to finish their idle rounds and park.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (pool.stats().sleeping_workers != workers && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const canopy::executor_stats stats = pool.stats();
  print_stats(stats);
  std::size_t busy_workers = 0;
  for (const auto& worker : stats.workers) {
    busy_workers += worker.tasks_run > 0 ? 1 : 0;
  }
  std::printf("\nworkers that ran tasks: %zu of %zu\n", busy_workers, workers);
  std::printf("workers asleep after the work: %u of %zu\n", stats.sleeping_workers, workers);
  pool.shutdown();
  if (!config.trace_path.empty()) {
    std::printf("trace written to %s (Perfetto, chrome://tracing) and its .svg timeline\n",
                config.trace_path.c_str());
  }
  return stats.sleeping_workers == workers ? 0 : 1;
}
