// driver_park_backend — the park backend of the worker holding the poller
// role: it blocks in the executor's idle driver (io/: epoll_wait on the
// reactor) instead of on its futex, and its wake() is the driver's notify()
// (an eventfd write). signal_waker/park_backend.hpp states the contract;
// docs/architecture.md ("The poller") argues why no wake-up is lost.
//
// Threads: wait() runs on the parked poller; wake() on any waker.
#pragma once

#include <cstdint>

#include "../signal_waker/park_backend.hpp"
#include "../atomics/atomics.hpp"
#include "idle_driver.hpp"

namespace canopy::detail {

class driver_park_backend final : public park_backend {
 public:
  explicit driver_park_backend(ext::idle_driver& driver) noexcept : driver_(driver) {}

  bool wait(atomics::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept override {
    // seq_cst: pairs with a waker's claim (also seq_cst) — either we see the
    // claim here, or the claim happens after and its notify() makes the
    // driver's wait() return (the driver's contract keeps an early notify).
    if (word.load(atomics::seq_cst) != expected) {
      return false;
    }
    return driver_.wait();
  }

  void wake(atomics::atomic<std::uint32_t>& /*word*/) noexcept override { driver_.notify(); }

 private:
  ext::idle_driver& driver_;
};

}  // namespace canopy::detail
