// The blocking pool's threads, queue and registry (blocking/blocking_pool.hpp
// has the contract). One mutex guards everything: a blocking call is
// thousands of times longer than the lock, so nothing here is lock-free.
#include "blocking/blocking_pool.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "../executor/executor.hpp"
#include "../executor/join_state.hpp"

namespace canopy {

namespace {

// Which blocking_pool an executor's run_blocking uses. Read once per call
// (a lookup among a few entries), written when a pool attaches or detaches.
struct registry {
  std::mutex mutex;
  std::vector<std::pair<detail::scheduler*, blocking_pool*>> entries;
};
registry& the_registry() {
  static registry instance;
  return instance;
}

// The pool whose thread this is (to refuse shutdown from inside it).
thread_local const blocking_pool* current_pool = nullptr;

}  // namespace

namespace detail {

bool blocking_job::try_start() noexcept {
  if (executor_shutting_down()) {
    return false;
  }
  const std::lock_guard lock(guard_);
  // Not abandoned: the task's body, and the reference it holds on its join
  // state, are alive until mark_abandoned() or abandon_unstarted() takes
  // this lock.
  if (abandoned_ || (cancel_state_ != nullptr && cancel_state_->cancel_requested())) {
    return false;
  }
  started_ = true;
  return true;
}

bool blocking_job::never_starts() const noexcept {
  if (executor_shutting_down()) {
    return true;
  }
  const std::lock_guard lock(guard_);
  // As in try_start: the state is alive until the task abandons the call.
  return abandoned_ || (cancel_state_ != nullptr && cancel_state_->cancel_requested());
}

bool blocking_job::executor_shutting_down() const noexcept {
  // Relaxed, as its store (executor_core::shutdown, step 1): it publishes
  // nothing. A pool thread freed by the stop request that the shutdown's
  // destruction of a task makes is ordered after the store by that request
  // (release/acquire on the stop state), so it reads true, as does a task
  // ordered after a refused spawn; a read that misses the store comes
  // before it in the flag's order: the call started before the shutdown
  // began.
  return executor_shutdown_->begun.load(atomics::relaxed);
}

void blocking_job::mark_abandoned() noexcept {
  const std::lock_guard lock(guard_);
  abandoned_ = true;
}

bool blocking_job::abandon_unstarted() noexcept {
  const std::lock_guard lock(guard_);
  abandoned_ = true;
  return !started_;
}

}  // namespace detail

void blocking_pool_config::validate() const {
  if (max_threads < 1 || max_threads > 65536) {
    throw std::invalid_argument("blocking_pool_config::max_threads must be in 1..65536, got " +
                                std::to_string(max_threads));
  }
  if (idle_timeout < std::chrono::milliseconds(1) || idle_timeout > std::chrono::hours(24)) {
    throw std::invalid_argument("blocking_pool_config::idle_timeout must be in 1 ms..24 h, got " +
                                std::to_string(idle_timeout.count()) + " ms");
  }
}

blocking_pool::blocking_pool(blocking_pool_config config) : config_(config) { config_.validate(); }

blocking_pool::blocking_pool(executor& pool, blocking_pool_config config) : config_(config) {
  config_.validate();
  registry& reg = the_registry();
  const std::lock_guard lock(reg.mutex);
  detail::scheduler* const core = &pool.core();
  for (const auto& [attached_core, attached_pool] : reg.entries) {
    if (attached_core == core) {
      throw std::logic_error("canopy::blocking_pool: this executor already has a blocking pool");
    }
  }
  reg.entries.emplace_back(core, this);
  attached_ = core;
}

blocking_pool::~blocking_pool() { shutdown(); }

blocking_pool& blocking_pool::process_default() {
  static blocking_pool instance{blocking_pool_config{}};
  return instance;
}

blocking_pool& blocking_pool::for_executor(detail::scheduler& core) {
  {
    registry& reg = the_registry();
    const std::lock_guard lock(reg.mutex);
    for (const auto& [attached_core, attached_pool] : reg.entries) {
      if (attached_core == &core) {
        return *attached_pool;
      }
    }
  }
  return process_default();
}

void blocking_pool::submit(std::shared_ptr<detail::blocking_job> job) {
  std::vector<std::thread> finished;
  // Destroyed after the lock is released (also when at_capacity is thrown):
  // the last reference to a dropped call may run its callable's destructor.
  std::vector<std::shared_ptr<detail::blocking_job>> dropped;
  {
    const std::lock_guard lock(mutex_);
    if (shut_down_) {
      throw std::system_error(make_error_code(errc::shut_down),
                              "canopy::run_blocking: the blocking pool has shut down");
    }
    if (job->executor_shutting_down()) {
      // Its task is about to be destroyed: the call would never start.
      throw std::system_error(make_error_code(errc::shut_down),
                              "canopy::run_blocking: the executor is shutting down");
    }
    bool thread_free = stats_.idle > queue_.size();
    const auto at_bound = [&] {
      return !thread_free && threads_.size() >= config_.max_threads && config_.max_queued != 0 &&
             queue_.size() >= config_.max_queued;
    };
    if (at_bound()) {
      // Calls of cancelled or destroyed tasks stay queued until a thread
      // pops and drops them; they wait for nothing, so they must not make
      // a live call fail (a burst of timed-out calls would refuse every
      // new one while a long call holds the threads).
      drop_never_starting(dropped);
      thread_free = stats_.idle > queue_.size();
    }
    if (at_bound()) {
      throw std::system_error(make_error_code(errc::at_capacity),
                              "canopy::run_blocking: every blocking thread is busy and " +
                                  std::to_string(queue_.size()) +
                                  " calls already wait (blocking_pool_config::max_queued)");
    }
    queue_.push_back(std::move(job));
    if (thread_free) {
      work_.notify_one();
    } else if (threads_.size() < config_.max_threads) {
      // The new thread locks the mutex before it reads its iterator, so it
      // sees the std::thread stored here.
      auto self = threads_.emplace(threads_.end());
      try {
        *self = std::thread([this, self] { thread_main(self); });
      } catch (...) {
        threads_.erase(self);
        queue_.pop_back();
        throw;
      }
      ++stats_.started;
    }
    finished.swap(exited_);
  }
  reap(finished);
}

void blocking_pool::drop_never_starting(
    std::vector<std::shared_ptr<detail::blocking_job>>& dropped) {
  for (auto& queued : queue_) {
    if (queued->never_starts()) {
      dropped.push_back(std::move(queued));
    }
  }
  std::erase(queue_, nullptr);
  stats_.dropped += dropped.size();
}

void blocking_pool::thread_main(std::list<std::thread>::iterator self) {
  current_pool = this;
  std::unique_lock lock(mutex_);
  for (;;) {
    if (queue_.empty() && !shut_down_) {
      ++stats_.idle;
      const bool woken = work_.wait_for(lock, config_.idle_timeout,
                                        [this] { return !queue_.empty() || shut_down_; });
      --stats_.idle;
      if (!woken) {
        break;  // idle for idle_timeout
      }
    }
    if (queue_.empty()) {
      break;  // shut down, nothing left
    }
    std::shared_ptr<detail::blocking_job> job = std::move(queue_.front());
    queue_.pop_front();
    if (!job->try_start()) {
      ++stats_.dropped;
      lock.unlock();
      job.reset();  // the last reference may free the job: outside the lock
      lock.lock();
      continue;
    }
    ++stats_.running;
    lock.unlock();
    job->run();
    job.reset();
    lock.lock();
    --stats_.running;
    ++stats_.completed;
  }
  exited_.push_back(std::move(*self));
  threads_.erase(self);
  ++stats_.exited;
  if (threads_.empty()) {
    all_exited_.notify_all();
  }
}

void blocking_pool::reap(std::vector<std::thread>& finished) {
  for (std::thread& thread : finished) {
    thread.join();  // it has left thread_main (or is about to): quick
  }
}

void blocking_pool::shutdown() {
  if (current_pool == this) {
    throw std::logic_error("canopy::blocking_pool::shutdown() called on one of its own threads");
  }
  if (attached_ != nullptr) {
    attached_->shutdown();  // destroys the tasks that wait on our calls
    registry& reg = the_registry();
    const std::lock_guard lock(reg.mutex);
    std::erase_if(reg.entries, [this](const auto& entry) { return entry.second == this; });
    attached_ = nullptr;
  }
  std::deque<std::shared_ptr<detail::blocking_job>> queued;
  std::vector<std::thread> finished;
  {
    std::unique_lock lock(mutex_);
    shut_down_ = true;
    queued.swap(queue_);
    stats_.dropped += queued.size();
    work_.notify_all();
    all_exited_.wait(lock, [this] { return threads_.empty(); });
    finished.swap(exited_);
  }
  for (const auto& job : queued) {
    job->fail_shut_down();
  }
  queued.clear();
  reap(finished);
}

blocking_pool_stats blocking_pool::stats() const {
  const std::lock_guard lock(mutex_);
  blocking_pool_stats copy = stats_;
  copy.threads = threads_.size();
  copy.queued = queue_.size();
  return copy;
}

}  // namespace canopy
