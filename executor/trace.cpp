#include "trace.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "config.hpp"
#include "trace_writers.hpp"

namespace canopy::detail {

namespace {

thread_local trace_buffer* this_thread_trace = nullptr;

// The event clock: the x86 time-stamp counter where there is one (a read is
// a single instruction, where steady_clock goes through the vDSO and, on
// kvm-clock VMs, costs several times more), converted to nanoseconds when
// the trace is written by a scale measured against steady_clock over the
// whole run (constant_tsc assumed, as on every x86-64 CPU of the last
// decade); steady_clock elsewhere.
std::uint64_t steady_ns() noexcept;
std::uint64_t read_ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return steady_ns();
#endif
}

std::uint64_t steady_ns() noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

// ------------------------------------------------------------ trace_buffer

trace_buffer::trace_buffer(const trace_recorder& owner, std::size_t capacity)
    : owner_(owner), events_(std::bit_ceil(capacity)), mask_(events_.size() - 1) {}

std::uint64_t trace_buffer::now() const noexcept { return owner_.now(); }

void trace_buffer::run_ended(std::uint64_t started, std::uint32_t slot,
                             run_outcome outcome) noexcept {
  --depth_;
  record({started, now(), slot, depth_, trace_kind::run, static_cast<std::uint8_t>(outcome)});
}

void trace_buffer::steal(std::uint64_t victim_partition) noexcept {
  const std::uint64_t at = now();
  record({at, at, victim_partition, 0, trace_kind::steal, 0});
}

void trace_buffer::search_started() noexcept { search_start_ = now(); }

void trace_buffer::search_ended() noexcept {
  record({search_start_, now(), 0, 0, trace_kind::search, 0});
}

void trace_buffer::park_started() noexcept {
  park_start_ = now();
  record({search_start_, park_start_, 0, 0, trace_kind::search, 0});
}

void trace_buffer::park_ended(wake_reason reason) noexcept {
  const std::uint64_t at = now();
  // acquire: pairs with woke()'s release store (the id is a plain value; the
  // pair only keeps the read from being hoisted above the park).
  const std::uint64_t flow = pending_wake_.exchange(0, atomics::acquire);
  record({park_start_, at, flow, 0, trace_kind::park, static_cast<std::uint8_t>(reason)});
  search_start_ = at;
}

void trace_buffer::reactor_poll(std::uint64_t started, std::uint32_t events) noexcept {
  record({started, now(), events, 0, trace_kind::reactor_poll, 0});
}

std::vector<trace_event> trace_buffer::events() const {
  std::vector<trace_event> result;
  const std::uint64_t kept = std::min<std::uint64_t>(next_, events_.size());
  result.reserve(kept);
  for (std::uint64_t index = next_ - kept; index < next_; ++index) {
    result.push_back(events_[index & mask_]);
  }
  return result;
}

// ---------------------------------------------------------- trace_recorder

std::unique_ptr<trace_recorder> trace_recorder::from_config(const executor_config& config) {
  std::string path = config.trace_path;
  if (path.empty()) {
    if (const char* variable = std::getenv("CANOPY_TRACE"); variable != nullptr) {
      path = variable;
    }
  }
  if (path.empty()) {
    return nullptr;
  }
  return std::make_unique<trace_recorder>(std::move(path), config.worker_count,
                                          config.trace_events_per_worker);
}

trace_recorder::trace_recorder(std::string path, std::size_t workers, std::size_t events_per_worker)
    : path_(std::move(path)), epoch_ns_(steady_ns()), epoch_ticks_(read_ticks()) {
  if (events_per_worker < executor_config::min_trace_events ||
      events_per_worker > executor_config::max_trace_events) {
    throw std::invalid_argument("canopy::trace_recorder: trace_events_per_worker = " +
                                std::to_string(events_per_worker) + " is out of range");
  }
  workers_.reserve(workers);
  for (std::size_t index = 0; index < workers; ++index) {
    workers_.push_back(std::make_unique<trace_buffer>(*this, events_per_worker));
  }
  outside_ = std::make_unique<trace_buffer>(*this, events_per_worker);
}

std::uint64_t trace_recorder::now() const noexcept { return read_ticks() - epoch_ticks_; }

double trace_recorder::nanoseconds_per_tick() const noexcept {
  const std::uint64_t ticks = read_ticks() - epoch_ticks_;
  const std::uint64_t nanoseconds = steady_ns() - epoch_ns_;
  return ticks == 0 ? 1.0 : static_cast<double>(nanoseconds) / static_cast<double>(ticks);
}

std::string trace_recorder::svg_path() const {
  constexpr std::string_view json = ".json";
  if (path_.size() > json.size() && path_.ends_with(json)) {
    return path_.substr(0, path_.size() - json.size()) + ".svg";
  }
  return path_ + ".svg";
}

void trace_recorder::bind_this_thread(trace_buffer* buffer) noexcept { this_thread_trace = buffer; }

trace_buffer* trace_recorder::this_thread() noexcept { return this_thread_trace; }

void trace_recorder::outside_spawn() noexcept {
  const std::lock_guard lock(outside_mutex_);
  const std::uint64_t at = now();
  outside_->record({at, at, 0, 0, trace_kind::spawn, 0});
}

void trace_recorder::woke(std::size_t worker, wake_reason reason) noexcept {
  // relaxed: ids only need to be unique.
  const std::uint64_t flow = next_flow_.fetch_add(1, atomics::relaxed) + 1;
  // release: pairs with park_ended()'s acquire exchange.
  workers_[worker]->pending_wake_.store(flow, atomics::release);
  trace_buffer* mine = this_thread_trace;
  const trace_event sent{0,
                         0,
                         flow,
                         static_cast<std::uint32_t>(worker),
                         trace_kind::wake,
                         static_cast<std::uint8_t>(reason)};
  if (mine != nullptr && &mine->owner_ == this) {
    trace_event event = sent;
    event.start_ns = event.end_ns = now();
    mine->record(event);
    return;
  }
  const std::lock_guard lock(outside_mutex_);
  trace_event event = sent;
  event.start_ns = event.end_ns = now();
  outside_->record(event);
}

trace_snapshot trace_recorder::snapshot() const {
  const std::lock_guard lock(outside_mutex_);
  const double scale = nanoseconds_per_tick();
  trace_snapshot result;
  result.workers = workers_.size();
  result.driver = driver_name_;
  auto add = [&](std::string name, const trace_buffer& buffer) {
    trace_lane one{std::move(name), buffer.events(), buffer.dropped() != 0};
    for (trace_event& event : one.events) {
      event.start_ns = static_cast<std::uint64_t>(static_cast<double>(event.start_ns) * scale);
      event.end_ns = static_cast<std::uint64_t>(static_cast<double>(event.end_ns) * scale);
    }
    result.lanes.push_back(std::move(one));
  };
  for (std::size_t index = 0; index < workers_.size(); ++index) {
    add("worker " + std::to_string(index), *workers_[index]);
  }
  add("outside threads", *outside_);
  return result;
}

std::error_code trace_recorder::write_files(std::string& error_message) const {
  return write_trace_files(snapshot(), path_, svg_path(), error_message);
}

}  // namespace canopy::detail
