#include "timer_queue.hpp"

#include <sys/prctl.h>

#include <array>
#include <stdexcept>

namespace canopy::io::detail {

namespace {

// executor -> timer queue, for timer_queue::current(). Written rarely
// (attach/detach), read on every sleep: a fixed table of atomics scanned
// without a lock.
struct attachment {
  canopy::detail::atomics::atomic<const canopy::detail::scheduler*> core{nullptr};
  canopy::detail::atomics::atomic<timer_queue*> queue{nullptr};
};
constexpr std::size_t max_attachments = 64;
std::array<attachment, max_attachments> attachments;
std::mutex attach_mutex;  // serialises attach/detach

// Wakes copied out of due entries under the mutex, delivered after it.
constexpr std::size_t wake_batch = 64;
// Timers not yet due moved down the wheel per hold of the mutex: a coarse
// slot can hold a large share of all timers, and spreading it in one hold
// kept every arm() and disarm() waiting behind it (docs/io.md, "Timer
// storms"). A batch bounds each hold; its size and what a hold then takes
// are in docs/performance.md, "Timers".
constexpr std::size_t move_batch = 4096;

}  // namespace

timer_queue::timer_queue() noexcept
    : promised_(timer_wheel::never), hinted_(timer_wheel::never), epoch_(clock::now()) {}

timer_queue::~timer_queue() = default;

std::uint64_t timer_queue::deadline_ticks(clock::time_point deadline) const noexcept {
  if (deadline <= epoch_) {
    return 0;
  }
  if (deadline == clock::time_point::max()) {
    return timer_wheel::never - 1;
  }
  const auto since = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - epoch_);
  return (static_cast<std::uint64_t>(since.count()) + 999) / 1000;  // round up: never early
}

std::uint64_t timer_queue::now_ticks(clock::time_point now) const noexcept {
  if (now <= epoch_) {
    return 0;
  }
  const auto since = std::chrono::duration_cast<std::chrono::microseconds>(now - epoch_);
  return static_cast<std::uint64_t>(since.count());
}

std::int64_t timer_queue::hint_of(std::uint64_t ticks) const noexcept {
  if (ticks == timer_wheel::never) {
    return no_deadline_hint;
  }
  return std::chrono::duration_cast<std::chrono::nanoseconds>(from_ticks(ticks).time_since_epoch())
      .count();
}

timer_queue::clock::time_point timer_queue::from_ticks(std::uint64_t ticks) const noexcept {
  if (ticks == timer_wheel::never) {
    return clock::time_point::max();
  }
  return epoch_ + std::chrono::microseconds(ticks);
}

bool timer_queue::arm(entry& item, clock::time_point deadline, const waker& target) {
  const std::uint64_t ticks = deadline_ticks(deadline);
  item.target = target;
  item.fired.store(false, canopy::detail::atomics::relaxed);  // published by the mutex to expire()
  bool earlier = false;
  {
    const std::lock_guard lock(mutex_);
    wheel_.insert(item, ticks);
    if (ticks < hinted_) {
      hinted_ = ticks;
      publish_earliest_deadline(hint_of(ticks));
    }
    if (ticks < promised_) {
      promised_ = ticks;  // one notification per new earliest deadline
      earlier = true;
    }
  }
  if (earlier && listener_ != nullptr) {
    listener_(listener_arg_);
  }
  return true;
}

void timer_queue::disarm(entry& item) noexcept {
  const std::lock_guard lock(mutex_);
  if (item.linked()) {
    wheel_.remove(item);
  }
}

std::optional<timer_queue::clock::time_point> timer_queue::next_deadline() noexcept {
  // The thread asking is the one that will sleep until the answer (the
  // reactor's poller, a timer_thread). Linux stretches a sleeping thread's
  // timeouts by its timer slack, 50 µs by default, so that nearby wake-ups
  // coalesce: 1 ns makes epoll_pwait2 and futex timeouts end on time. Set
  // once per thread; it also tightens that thread's other timed sleeps.
  thread_local bool slack_tightened = false;
  if (!slack_tightened) {
    slack_tightened = true;
    ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  }
  const std::lock_guard lock(mutex_);
  promised_ = wheel_.next_deadline();
  hinted_ = promised_;
  publish_earliest_deadline(hint_of(promised_));
  if (promised_ == timer_wheel::never) {
    return std::nullopt;
  }
  return from_ticks(promised_);
}

std::size_t timer_queue::expire(clock::time_point now) noexcept {
  const std::uint64_t now_tick = now_ticks(now);
  std::size_t total = 0;
  std::array<waker, wake_batch> wakes;
  bool more = true;
  while (more) {
    std::size_t count = 0;
    {
      const std::lock_guard lock(mutex_);
      // At most a batch of wakes, and of moves down the wheel, at a time
      // (the rest stay linked); come back for more after delivering it.
      const std::size_t fired_here = wheel_.expire(
          now_tick, wake_batch,
          [&](timer_node& node) noexcept {
            auto& item = static_cast<entry&>(node);
            wakes[count++] = item.target;
            // release: pairs with has_fired()'s acquire; the waiter that sees
            // the flag sees the entry unlinked. After this store the waiter may
            // end the entry's life (after disarm takes the mutex we hold).
            item.fired.store(true, canopy::detail::atomics::release);
          },
          move_batch);
      more = fired_here == wake_batch || wheel_.due(now_tick);
      if (!more) {
        hinted_ = wheel_.next_deadline();  // exact again after a cancel made it early
        publish_earliest_deadline(hint_of(hinted_));
      }
    }
    for (std::size_t i = 0; i < count; ++i) {
      wakes[i].wake();
    }
    total += count;
  }
  return total;
}

void timer_queue::set_earlier_deadline_listener(void (*fn)(void*) noexcept, void* arg) noexcept {
  const std::lock_guard lock(mutex_);
  listener_ = fn;
  listener_arg_ = arg;
}

std::size_t timer_queue::pending() noexcept {
  const std::lock_guard lock(mutex_);
  return wheel_.size();
}

void timer_queue::attach(canopy::detail::scheduler& core, timer_queue& queue) {
  const std::lock_guard lock(attach_mutex);
  attachment* free_entry = nullptr;
  for (attachment& one : attachments) {
    const canopy::detail::scheduler* const owner = one.core.load(canopy::detail::atomics::relaxed);
    if (owner == &core) {
      throw std::logic_error(
          "canopy::io::timer_queue::attach: this executor already has a timer queue");
    }
    if (owner == nullptr && free_entry == nullptr) {
      free_entry = &one;
    }
  }
  if (free_entry == nullptr) {
    throw std::logic_error("canopy::io::timer_queue::attach: more than 64 executors with timers");
  }
  free_entry->queue.store(&queue, canopy::detail::atomics::relaxed);
  // release: pairs with find()'s acquire load of `core`; a finder that
  // matches the core sees the queue pointer stored above.
  free_entry->core.store(&core, canopy::detail::atomics::release);
}

void timer_queue::detach(canopy::detail::scheduler& core) noexcept {
  const std::lock_guard lock(attach_mutex);
  for (attachment& one : attachments) {
    if (one.core.load(canopy::detail::atomics::relaxed) == &core) {
      one.core.store(nullptr, canopy::detail::atomics::relaxed);
      one.queue.store(nullptr, canopy::detail::atomics::relaxed);
    }
  }
}

timer_queue* timer_queue::find(const canopy::detail::scheduler* core) noexcept {
  for (attachment& one : attachments) {
    // acquire: pairs with attach()'s release store of `core`.
    if (one.core.load(canopy::detail::atomics::acquire) == core) {
      return one.queue.load(canopy::detail::atomics::relaxed);
    }
  }
  return nullptr;
}

timer_queue& timer_queue::current() {
  canopy::detail::worker_context* const worker = canopy::detail::current_worker();
  if (worker == nullptr || !worker->has_running) {
    throw std::logic_error(
        "canopy timers: sleep_for/sleep_until/with_timeout called outside a task");
  }
  timer_queue* const queue = find(worker->core);
  if (queue == nullptr) {
    if (worker->core->driver() != nullptr) {
      throw std::logic_error(
          "canopy timers: this executor's reactor was built without timers "
          "(reactor_options::timers = false): leave them on, or create a "
          "canopy::io::reactor_timers(pool) for it");
    }
    throw std::logic_error(
        "canopy timers: this executor has no reactor, so nothing drives its timers: build it "
        "with canopy::io::with_reactor(config) (timers included), or create a "
        "canopy::io::timer_thread(pool) for it");
  }
  return *queue;
}

}  // namespace canopy::io::detail
