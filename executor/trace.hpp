// trace — a record of what each worker did, written as Chrome trace-event
// JSON (Perfetto, chrome://tracing) and as an SVG timeline (docs/tracing.md).
// This is the recorder, which the runtime calls; the two writers are
// executor/trace_writers.hpp, which draw a trace_snapshot of it.
//
// Off by default. On when executor_config::trace_path is set, or when the
// environment variable CANOPY_TRACE names a file (the config field wins).
// Off, the executor holds no recorder and every hook is one pointer test.
// On, each worker records into its own ring buffer (no locks, no atomics on
// its own events); the last `trace_events_per_worker` events of each worker
// are kept. Outside threads (spawns, wakes) record into one shared buffer
// under a mutex. Everything is written once, at shutdown, after the workers
// have been joined, so nothing writes a buffer while it is read.
//
// Events (trace_kind): task runs, searches for work, parks (with what woke
// the worker), steals (from which partition), wakes (from which thread, to
// which worker: a flow arrow from the waker to the woken worker), spawns from
// outside threads, and reactor polls (the poller worker's dispatch of the
// idle driver, executor_core::dispatch_as_poller).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "../signal_waker/signal_waker.hpp"
#include "../signal_waker/sleep_module.hpp"
#include "../atomics/atomics.hpp"
#include "task_slot.hpp"

namespace canopy {
struct executor_config;
}  // namespace canopy

namespace canopy::detail {

enum class trace_kind : std::uint8_t {
  run,           // a task ran, start..end; value: slot, detail: run_outcome, extra: nesting depth
  search,        // the worker looked for work, start..end
  park,          // the worker was parked, start..end; value: flow id of the wake (0: none),
                 // detail: wake_reason
  steal,         // instant; value: the victim's partition (no_partition: a LIFO slot)
  wake,          // instant, on the waking thread; value: flow id, extra: the woken
                 // worker, detail: wake_reason
  spawn,         // instant, an outside thread spawned a task
  reactor_poll,  // the I/O reactor polled, start..end; value: events collected
};

struct trace_event {
  std::uint64_t start_ns = 0;  // since the recorder was made (recorded in ticks, see now())
  std::uint64_t end_ns = 0;    // == start_ns for instants
  std::uint64_t value = 0;
  std::uint32_t extra = 0;
  trace_kind kind = trace_kind::run;
  std::uint8_t detail = 0;
};

class trace_recorder;

// One lane of a written trace: one worker's events (or the outside
// threads'), oldest first, times in nanoseconds since the recorder was made.
struct trace_lane {
  std::string name;
  std::vector<trace_event> events;
  bool overwritten = false;  // the ring was full and dropped its oldest events
};

// What the writers draw: lane i is worker i, the last lane outside threads.
struct trace_snapshot {
  std::size_t workers = 0;
  std::string driver;  // the idle driver's name (the I/O backend), empty without one
  std::vector<trace_lane> lanes;
};

// One thread's events: a ring that keeps the newest `capacity` of them.
// record() and the idle-period helpers are called only by the owning thread
// (a worker; the outside buffer only under the recorder's mutex).
class trace_buffer {
 public:
  static constexpr std::uint64_t no_partition = ~std::uint64_t{0};

  trace_buffer(const trace_recorder& owner, std::size_t capacity);

  void record(const trace_event& event) noexcept {
    events_[next_ & mask_] = event;
    ++next_;
  }
  [[nodiscard]] std::uint64_t now() const noexcept;

  // Around one task run: run_started() before (returns the start time),
  // run_ended(that time, ...) after. Runs nest (a task run at a join).
  [[nodiscard]] std::uint64_t run_started() noexcept {
    ++depth_;
    return now();
  }
  void run_ended(std::uint64_t started, std::uint32_t slot, run_outcome outcome) noexcept;
  void steal(std::uint64_t victim_partition) noexcept;
  // Idle period of a worker: search_started, then any number of
  // park_started / park_ended pairs, then search_ended.
  void search_started() noexcept;
  void search_ended() noexcept;
  void park_started() noexcept;
  void park_ended(wake_reason reason) noexcept;
  // For the I/O layer: one poll of the reactor, `started` from now().
  void reactor_poll(std::uint64_t started, std::uint32_t events) noexcept;

  // In time order (oldest kept first). Only once the owner has stopped.
  [[nodiscard]] std::vector<trace_event> events() const;
  [[nodiscard]] std::uint64_t dropped() const noexcept {
    return next_ > events_.size() ? next_ - events_.size() : 0;
  }

 private:
  friend class trace_recorder;
  const trace_recorder& owner_;
  std::vector<trace_event> events_;
  std::uint64_t mask_;
  std::uint64_t next_ = 0;
  std::uint64_t search_start_ = 0;
  std::uint64_t park_start_ = 0;
  std::uint32_t depth_ = 0;  // runs in progress on this thread (nested runs)
  // The flow id of the wake that claimed this worker's park, stored by the
  // waker between its claim and its unpark, taken by the worker when it
  // wakes. release/acquire: the pair needs no other ordering (a wake that
  // lands after the worker read it is drawn to the next park instead).
  alignas(atomics::cache_line) atomics::atomic<std::uint64_t> pending_wake_{0};
};

// The whole trace of one executor. Built before the workers start, written
// after they are joined.
class trace_recorder final : public wake_observer {
 public:
  // Null when tracing is off: config.trace_path empty and CANOPY_TRACE unset
  // or empty. Throws std::invalid_argument for trace_events_per_worker out of
  // range (checked by executor_config::validate() too).
  static std::unique_ptr<trace_recorder> from_config(const executor_config& config);

  trace_recorder(std::string path, std::size_t workers, std::size_t events_per_worker);
  ~trace_recorder() = default;
  trace_recorder(const trace_recorder&) = delete;
  trace_recorder& operator=(const trace_recorder&) = delete;

  [[nodiscard]] trace_buffer& worker(std::size_t index) noexcept { return *workers_[index]; }
  [[nodiscard]] std::size_t worker_count() const noexcept { return workers_.size(); }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  // Where the SVG goes: the path with ".json" replaced by ".svg" (or ".svg" added).
  [[nodiscard]] std::string svg_path() const;
  // Event time: ticks of the event clock since the recorder was made
  // (trace.cpp: the time-stamp counter on x86), converted to nanoseconds
  // when the trace is written.
  [[nodiscard]] std::uint64_t now() const noexcept;
  [[nodiscard]] double nanoseconds_per_tick() const noexcept;

  // Worker thread start: its buffer is the one its wakes are recorded in.
  static void bind_this_thread(trace_buffer* buffer) noexcept;
  // The calling worker's buffer (null on other threads, or when off).
  [[nodiscard]] static trace_buffer* this_thread() noexcept;

  // Any thread that is not one of this executor's workers.
  void outside_spawn() noexcept;
  // wake_observer: a poster claimed `worker`'s park (any thread).
  void woke(std::size_t worker, wake_reason reason) noexcept override;

  // Before the workers start: the idle driver's name, written with the trace.
  void set_driver_name(std::string name) { driver_name_ = std::move(name); }

  // Every buffer's events, times converted to nanoseconds, for the writers.
  // Only after the workers have stopped.
  [[nodiscard]] trace_snapshot snapshot() const;
  // The JSON at path(), the SVG at svg_path(), drawn from one snapshot() by
  // the writers (trace_writers.cpp). Only after the workers have stopped.
  // Returns the first error (the message names the file).
  [[nodiscard]] std::error_code write_files(std::string& error_message) const;

 private:
  std::string path_;
  std::string driver_name_;
  std::uint64_t epoch_ns_;
  std::uint64_t epoch_ticks_;
  std::vector<std::unique_ptr<trace_buffer>> workers_;
  mutable std::mutex outside_mutex_;
  std::unique_ptr<trace_buffer> outside_;  // guarded by outside_mutex_
  atomics::atomic<std::uint64_t> next_flow_{0};
};

}  // namespace canopy::detail
