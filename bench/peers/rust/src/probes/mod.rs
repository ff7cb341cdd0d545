//! The measuring loops every peer shares, as in bench/workloads/*/ (the
//! latency sampler, the idle probe, the burst probe): each takes the peer's
//! way of handing one task to its executor from a thread that is not one
//! of its workers.

pub mod burst_memory;
pub mod idle_cpu;
pub mod wake_latency;

/// Hands one task to the executor from outside it.
pub trait Submit {
    fn submit<F: FnOnce() + Send + 'static>(&self, task: F);
}
