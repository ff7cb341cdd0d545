//! The workloads' parameters, the same numbers every C++ peer uses; each
//! module names the bench/workloads/<name>/parameters.hpp it mirrors.

/// bench/workloads/spawn_remote/parameters.hpp
pub mod spawn_remote {
    pub const TASK_COUNT: usize = 1_000_000;
}

/// bench/workloads/spawn_local/parameters.hpp
pub mod spawn_local {
    pub const TASK_COUNT: usize = 1_000_000;
}

/// bench/workloads/yield_many/parameters.hpp
pub mod yield_many {
    pub const TASK_COUNT: usize = 200;
    pub const YIELDS_PER_TASK: usize = 1_000;
    pub const TOTAL_YIELDS: usize = TASK_COUNT * YIELDS_PER_TASK;
}

/// bench/workloads/chained_spawn/parameters.hpp
pub mod chained_spawn {
    pub const CHAIN_LENGTH: usize = 1_000;
    pub const CHAIN_COUNT: usize = 100;
    pub const TOTAL_SPAWNS: usize = CHAIN_LENGTH * CHAIN_COUNT;
}

/// bench/workloads/fib/parameters.hpp
pub mod fib {
    pub const ARGUMENT: u32 = 30;
    pub const EXPECTED_VALUE: u64 = 832_040;
}

/// bench/workloads/wake_latency/parameters.hpp
pub mod wake_latency {
    use std::time::Duration;
    pub const IDLE_BEFORE: Duration = Duration::from_millis(50);
    pub const SAMPLE_COUNT: usize = 1_000;
    pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(2);
}

/// bench/workloads/idle_cpu/parameters.hpp
pub mod idle_cpu {
    use std::time::Duration;
    pub const IDLE_PERIOD: Duration = Duration::from_secs(1);
}

/// bench/workloads/spawn_burst_memory/parameters.hpp
pub mod spawn_burst_memory {
    pub const TASK_COUNT: usize = 1_000_000;
}

/// bench/workloads/fib_join/parameters.hpp
pub mod fib_join {
    pub const ARGUMENT: u32 = 30;
    pub const EXPECTED_VALUE: u64 = 832_040;
}

/// bench/workloads/fan_out/parameters.hpp
pub mod fan_out {
    pub const ROUNDS: usize = 64;
    pub const CHILDREN_PER_ROUND: usize = 10_000;
    pub const CHILD_COUNT: usize = ROUNDS * CHILDREN_PER_ROUND;

    /// The splitmix64 finalizer: what one child computes from its index.
    pub fn child_value(index: u64) -> u64 {
        let mut x = index.wrapping_add(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    /// The wrapping sum of child_value(i) for i in [0, CHILD_COUNT).
    pub const EXPECTED_SUM: u64 = 4_774_663_504_979_896_789;
}

/// bench/workloads/irregular_tree/parameters.hpp
pub mod irregular_tree {
    pub const ROOT_SEED: u64 = 2026;
    pub const MAX_DEPTH: u32 = 16;
    pub const MAX_CHILDREN: usize = 4;
    pub const MIN_SPIN: u32 = 16;
    pub const SPIN_RANGE: u32 = 256;

    /// The splitmix64 finalizer.
    pub fn mix(seed: u64) -> u64 {
        let mut x = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    pub fn child_count(seed: u64, depth: u32) -> usize {
        if depth == 0 {
            return MAX_CHILDREN;
        }
        if depth >= MAX_DEPTH {
            return 0;
        }
        (mix(seed) % (MAX_CHILDREN as u64 + 1)) as usize
    }

    pub fn child_seed(seed: u64, index: usize) -> u64 {
        mix(seed ^ 0x5851_f42d_4c95_7f2d_u64.wrapping_mul(index as u64 + 1))
    }

    pub fn spin_iterations(seed: u64) -> u32 {
        MIN_SPIN + ((mix(seed) >> 32) % u64::from(SPIN_RANGE)) as u32
    }

    /// The node's busy loop; its result is the node's value.
    pub fn node_work(seed: u64) -> u64 {
        let mut x = seed | 1;
        for _ in 0..spin_iterations(seed) {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        }
        x
    }

    pub const EXPECTED_TOTAL: u64 = 9_258_311_009_717_634_824;
    pub const EXPECTED_NODES: usize = 182_337;

    /// What a subtree adds up to: the wrapping sum of its nodes' values and
    /// how many nodes it has.
    #[derive(Clone, Copy)]
    pub struct Subtree {
        pub total: u64,
        pub nodes: usize,
    }

    impl Subtree {
        pub const EMPTY: Subtree = Subtree { total: 0, nodes: 0 };

        pub fn with(self, other: Subtree) -> Subtree {
            Subtree {
                total: self.total.wrapping_add(other.total),
                nodes: self.nodes + other.nodes,
            }
        }

        /// A node of value `value` over children adding up to `self`.
        pub fn under_node(self, value: u64) -> Subtree {
            self.with(Subtree {
                total: value,
                nodes: 1,
            })
        }
    }
}

/// bench/workloads/skynet/parameters.hpp
pub mod skynet {
    pub const FAN_OUT: u64 = 10;
    pub const DEPTH: u32 = 6;
    pub const LEAF_COUNT: u64 = 1_000_000;
    pub const EXPECTED_SUM: u64 = LEAF_COUNT * (LEAF_COUNT - 1) / 2;

    /// The distance between the numbers of two sibling children of a node
    /// at `level`: 10^(DEPTH - level - 1).
    pub fn child_stride(level: u32) -> u64 {
        FAN_OUT.pow(DEPTH - level - 1)
    }
}

/// bench/workloads/nqueens/parameters.hpp
pub mod nqueens {
    pub const SIZE: usize = 12;
    pub const EXPECTED_SOLUTIONS: u64 = 14_200;

    pub type Board = [u8; SIZE];

    /// Whether no queen of rows 0 .. row - 1 of `placed` attacks `column` of
    /// row `row` (the suite's filter: the placed queens only, O(row)).
    pub fn column_safe(placed: &Board, row: usize, column: usize) -> bool {
        let column = column as i32;
        placed[..row]
            .iter()
            .enumerate()
            .all(|(placed_row, &other)| {
                let other = i32::from(other);
                let distance = (row - placed_row) as i32;
                column != other && column != other - distance && column != other + distance
            })
    }

    /// The boards of row `row`'s safe columns, as the children to fork, and
    /// how many there are.
    pub fn safe_children(placed: &Board, row: usize) -> ([Board; SIZE], usize) {
        let mut children = [[0_u8; SIZE]; SIZE];
        let mut count = 0;
        for column in 0..SIZE {
            if column_safe(placed, row, column) {
                children[count] = *placed;
                children[count][row] = column as u8;
                count += 1;
            }
        }
        (children, count)
    }
}

/// bench/workloads/channel_ping_pong/parameters.hpp
pub mod channel_ping_pong {
    pub const ROUND_TRIPS: usize = 100_000;
    pub const EXPECTED_SUM: u64 = (ROUND_TRIPS as u64) * (ROUND_TRIPS as u64 - 1) / 2;
}

/// bench/workloads/channel_throughput/parameters.hpp
pub mod channel_throughput {
    pub const PRODUCER_COUNT: usize = 4;
    pub const CAPACITY: usize = 1_024;
    pub const MESSAGES_PER_PRODUCER: usize = 250_000;
    pub const MESSAGE_COUNT: usize = PRODUCER_COUNT * MESSAGES_PER_PRODUCER;
    pub const EXPECTED_SUM: u64 = (MESSAGE_COUNT as u64) * (MESSAGE_COUNT as u64 - 1) / 2;
}

/// bench/workloads/mutex_contention/parameters.hpp
pub mod mutex_contention {
    pub const TASK_COUNT: usize = 64;
    pub const LOCKS_PER_TASK: usize = 10_000;
    pub const ACQUISITIONS: usize = TASK_COUNT * LOCKS_PER_TASK;
}
