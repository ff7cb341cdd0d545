//! The workloads this binary knows, with the unit and repetition policy of
//! each: a copy of bench/workloads/catalog.hpp, which is the source of truth.

pub struct WorkloadDescriptor {
    pub name: &'static str,
    pub unit: &'static str,
    /// Upper bound on measured repetitions; 0 means "as many as --reps asks".
    pub max_reps: u32,
    /// Whether one unmeasured repetition runs first.
    pub warm_up: bool,
}

const fn workload(name: &'static str, unit: &'static str) -> WorkloadDescriptor {
    WorkloadDescriptor {
        name,
        unit,
        max_reps: 0,
        warm_up: true,
    }
}

pub const WORKLOAD_CATALOG: &[WorkloadDescriptor] = &[
    workload("spawn_remote", "ns/task"),
    workload("spawn_local", "ns/task"),
    workload("yield_many", "ns/yield"),
    workload("chained_spawn", "ns/spawn"),
    workload("fib", "ms"),
    workload("fib_fiber", "ms"),
    // The fork-join shapes beside fib (issue 20).
    workload("fib_join", "ms"),
    workload("fan_out", "ns/child"),
    workload("irregular_tree", "ms"),
    // The runtime-benchmarks suite's fork-join programs (issue 30).
    workload("skynet", "ms"),
    workload("nqueens", "ms"),
    workload("wake_latency", "us"),
    // Each repetition sleeps for a second; five are enough (catalog.hpp).
    WorkloadDescriptor {
        name: "idle_cpu",
        unit: "ms",
        max_reps: 5,
        warm_up: true,
    },
    // Only a process's first burst shows what pending tasks cost (catalog.hpp).
    WorkloadDescriptor {
        name: "spawn_burst_memory",
        unit: "bytes/task",
        max_reps: 1,
        warm_up: false,
    },
    // The task toolkit beside tokio's (issue 31), as time per operation.
    workload("channel_ping_pong", "ns/round trip"),
    workload("channel_throughput", "ns/message"),
    workload("mutex_contention", "ns/acquisition"),
];

pub fn find_workload(name: &str) -> Option<&'static WorkloadDescriptor> {
    WORKLOAD_CATALOG
        .iter()
        .find(|workload| workload.name == name)
}
