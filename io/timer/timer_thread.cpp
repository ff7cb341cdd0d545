#include "timer_thread.hpp"

namespace canopy::io {

timer_thread::timer_thread(executor& pool) : core_(&pool.core()) {
  queue_.set_earlier_deadline_listener(&timer_thread::on_earlier_deadline, this);
  detail::timer_queue::attach(*core_, queue_);
  thread_ = std::thread([this] { run(); });
}

timer_thread::~timer_thread() {
  // Sleeping tasks hold timers in this queue: the executor's shutdown
  // (idempotent) destroys them, and they disarm, while the queue lives, as
  // ~reactor_timers does.
  core_->shutdown();
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
  detail::timer_queue::detach(*core_);
}

void timer_thread::on_earlier_deadline(void* self) noexcept {
  auto* const driver = static_cast<timer_thread*>(self);
  {
    const std::lock_guard lock(driver->mutex_);
    driver->poke_ = true;
  }
  driver->wake_.notify_one();
}

void timer_thread::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    poke_ = false;
    lock.unlock();
    queue_.expire(detail::timer_queue::clock::now());
    // Asked after expiring: an arm() from here on that is earlier than
    // this answer pokes us (timer_queue keeps the promise under its mutex).
    const std::optional<detail::timer_queue::clock::time_point> next = queue_.next_deadline();
    lock.lock();
    if (stopping_ || poke_) {
      continue;
    }
    if (!next) {
      wake_.wait(lock, [this] { return stopping_ || poke_; });
    } else {
      wake_.wait_until(lock, *next, [this] { return stopping_ || poke_; });
    }
  }
}

}  // namespace canopy::io
