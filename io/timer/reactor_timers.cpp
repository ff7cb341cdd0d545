// A reactor's timers: the queue it brings (reactor::bind/unbind, when it
// starts and stops driving an executor) and the one a reactor_timers adds
// to a reactor built without.
#include <stdexcept>

#include "timer_binding.hpp"

namespace canopy::io {

namespace {
void notify_reactor(void* target) noexcept { static_cast<reactor*>(target)->notify(); }
}  // namespace

void reactor::bind(canopy::detail::scheduler& core) {
  canopy::detail::scheduler* expected = nullptr;
  // Relaxed: the claim only tells a second executor apart; what the timers
  // publish goes through timer_queue::attach's mutex and release store.
  if (!bound_core_.compare_exchange_strong(expected, &core, canopy::detail::atomics::relaxed)) {
    throw std::logic_error(
        "canopy::io::reactor: this reactor already drives a running executor (a reactor serves "
        "one executor at a time; give each executor its own, e.g. with canopy::io::with_reactor)");
  }
  if (timers_ != nullptr) {
    timers_->set_earlier_deadline_listener(&notify_reactor, this);
    try {
      detail::timer_queue::attach(core, *timers_);  // throws past 64 executors with timers
    } catch (...) {
      bound_core_.store(nullptr, canopy::detail::atomics::relaxed);
      throw;
    }
    set_deadline_source(timers_.get());
    timers_bound_ = true;
  }
}

void reactor::unbind(canopy::detail::scheduler& core) noexcept {
  if (bound_core_.load(canopy::detail::atomics::relaxed) != &core) {
    return;
  }
  if (timers_bound_) {
    set_deadline_source(nullptr);
    detail::timer_queue::detach(core);
    timers_bound_ = false;
  }
  bound_core_.store(nullptr, canopy::detail::atomics::relaxed);
}

reactor_timers::reactor_timers(executor& pool)
    : core_(&pool.core()), reactor_(&reactor::of(pool)), queue_(reactor_->own_timers()) {
  if (queue_ != nullptr) {
    return;
  }
  added_ = std::make_unique<detail::timer_queue>();
  added_->set_earlier_deadline_listener(&notify_reactor, reactor_);
  detail::timer_queue::attach(*core_, *added_);
  reactor_->set_deadline_source(added_.get());
  queue_ = added_.get();
}

reactor_timers::~reactor_timers() {
  core_->shutdown();
  if (added_ != nullptr) {
    reactor_->set_deadline_source(nullptr);
    detail::timer_queue::detach(*core_);
  }
}

}  // namespace canopy::io
