#include "callback.hpp"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "../coroutine/custom_wait.hpp"
#include "../coroutine/spawn.hpp"
#include "../coroutine/task.hpp"

namespace canopy::io {

struct callback_registration::state {
  std::shared_ptr<ext::idle_driver> keep_alive;  // the reactor outlives this state
  reactor* owner = nullptr;
  reactor::registration_id id{};
  callback on_ready;
  std::mutex lock;
  std::condition_variable idle;
  bool closed = false;   // guarded by lock
  bool running = false;  // guarded by lock: the callback is executing
  std::thread::id runner;
};

namespace {

using state = callback_registration::state;

// Wait source: an edge is pending, or the registration is gone. The
// persistent waker set by the loop wakes the task on every edge, so arm()
// only has to say whether to suspend.
class edge_wait {
 public:
  explicit edge_wait(state& watched) noexcept : watched_(&watched) {}
  bool ready() noexcept { return watched_->owner->has_pending_events(watched_->id); }
  bool arm(const waker& /*persistent already set*/) noexcept { return !ready(); }
  void disarm() noexcept {}
  void result() noexcept {}

 private:
  state* watched_;
};

task<void> callback_loop(std::shared_ptr<state> shared) {
  state& self = *shared;
  if (!self.owner->set_persistent_waker(self.id, current_waker())) {
    co_return;  // closed before the task first ran
  }
  for (;;) {
    co_await canopy::wait_on(edge_wait{self});
    bool live = false;
    const std::uint32_t events = self.owner->take_events(self.id, live);
    if (!live) {
      co_return;
    }
    {
      const std::lock_guard guard(self.lock);
      if (self.closed) {
        co_return;
      }
      self.running = true;
      self.runner = std::this_thread::get_id();
    }
    std::exception_ptr failure;
    try {
      self.on_ready(events);
    } catch (...) {
      failure = std::current_exception();
    }
    {
      const std::lock_guard guard(self.lock);
      self.running = false;
      if (failure) {
        self.closed = true;
      }
    }
    self.idle.notify_all();
    if (failure) {
      self.owner->remove(self.id);
      std::rethrow_exception(failure);  // to on_detached_exception
    }
  }
}

}  // namespace

callback_registration::callback_registration(executor& pool, int fd, interest what,
                                             callback on_ready, std::error_code& error) {
  error.clear();
  if (!on_ready) {  // else bad_function_call at the first readiness, far from the mistake
    error = std::make_error_code(std::errc::invalid_argument);
    return;
  }
  reactor& owner = reactor::of(pool);
  auto shared = std::make_shared<state>();
  shared->keep_alive = pool.core().config().driver;
  shared->owner = &owner;
  shared->on_ready = std::move(on_ready);
  shared->id = owner.add(fd, what, error, false);
  if (error) {
    return;
  }
  try {
    pool.spawn_detached(callback_loop(shared));
  } catch (const spawn_error&) {
    owner.remove(shared->id);
    error = std::make_error_code(std::errc::operation_canceled);
    return;
  }
  state_ = std::move(shared);
}

callback_registration::callback_registration(executor& pool, int fd, interest what,
                                             callback on_ready) {
  if (!on_ready) {
    throw std::invalid_argument("canopy::io::callback_registration: an empty callback");
  }
  std::error_code error;
  *this = callback_registration(pool, fd, what, std::move(on_ready), error);
  if (error) {
    throw std::system_error(
        error, "canopy::io::callback_registration: cannot watch descriptor " + std::to_string(fd));
  }
}

callback_registration& callback_registration::operator=(callback_registration&& other) noexcept {
  if (this != &other) {
    close();
    state_ = std::move(other.state_);
  }
  return *this;
}

void callback_registration::close() noexcept {
  if (state_ == nullptr) {
    return;
  }
  {
    std::unique_lock guard(state_->lock);
    state_->closed = true;
    // A callback running on another thread finishes first; one calling
    // close() on itself does not wait for itself.
    state_->idle.wait(
        guard, [this] { return !state_->running || state_->runner == std::this_thread::get_id(); });
  }
  state_->owner->remove(state_->id);  // wakes the loop, which sees the id stale and ends
  state_.reset();
}

}  // namespace canopy::io
