#pragma once

#include <array>
#include <string_view>

namespace canopy::bench {

// What every peer's implementation of a workload shares: its name, the unit
// of its result (lower is better for all of them) and how often it repeats.
struct workload_descriptor {
  std::string_view name;
  std::string_view unit;
  // Upper bound on measured repetitions; 0 means "as many as --reps asks".
  unsigned max_reps = 0;
  // Whether one unmeasured repetition runs first.
  bool warm_up = true;
};

// constexpr, so registrations running during static initialization can check
// names against it without depending on initialization order.
inline constexpr std::array<workload_descriptor, 17> workload_catalog{{
    {"spawn_remote", "ns/task"},
    {"spawn_local", "ns/task"},
    {"yield_many", "ns/yield"},
    {"chained_spawn", "ns/spawn"},
    {"fib", "ms"},
    {"fib_fiber", "ms"},
    // The fork-join shapes beside fib (issue 20): fib through a join of two
    // callables, one task joining 10,000 children at once, and a tree with
    // uneven branching and work per node.
    {"fib_join", "ms"},
    {"fan_out", "ns/child"},
    {"irregular_tree", "ms"},
    // The coroutine fork-join programs of the tzcnt/runtime-benchmarks suite
    // (issue 30), in the shape of its libfork versions: a 10-ary tree of 10^6
    // leaves, and N-queens with a child per safe square.
    {"skynet", "ms"},
    {"nqueens", "ms"},
    {"wake_latency", "us"},
    // Each repetition sleeps for a second. The readings of one that spins not
    // at all vary by about 0.02 ms between repetitions, so take five.
    {"idle_cpu", "ms", 5},
    // Only the first burst of a process measures what pending tasks cost:
    // allocators keep that memory for reuse (oneTBB holds its task objects
    // in per-thread pools), so a later burst in the same process shows
    // (close to) no growth. Hence no warm-up and a single repetition.
    {"spawn_burst_memory", "bytes/task", 1, false},
    // The task toolkit beside tokio's (issue 31): channels and the async
    // mutex. Throughputs are given as time per operation, so that lower is
    // better here too; their peer is tokio only (run_bench.py's toolkit table).
    {"channel_ping_pong", "ns/round trip"},
    {"channel_throughput", "ns/message"},
    {"mutex_contention", "ns/acquisition"},
}};

[[nodiscard]] constexpr const workload_descriptor* find_workload(std::string_view name) {
  for (const workload_descriptor& workload : workload_catalog) {
    if (workload.name == name) {
      return &workload;
    }
  }
  return nullptr;
}

}  // namespace canopy::bench
