// Timed waits for fibers: the blocking forms of io/timer/timer_wait.hpp. Each
// suspends only the calling fiber (its worker runs other tasks meanwhile).
//
//   canopy::this_fiber::sleep_for(5ms);
//   canopy::this_fiber::sleep_until(deadline);
//
// Outside a fiber they throw std::logic_error (this_fiber's rule); with no
// timer queue on the executor, std::logic_error (timer_queue::current()).
// A fiber cancelled while it sleeps unwinds (fiber_unwind) through the
// sleep, which takes its timer back on the way out.
#pragma once

#include <chrono>

#include "../../fiber/this_fiber.hpp"
#include "../../wait/waker.hpp"
#include "../timer/timer_wait.hpp"

namespace canopy::this_fiber {

inline void sleep_until(io::detail::timer_queue::clock::time_point deadline) {
  canopy::detail::checked_current_fiber("this_fiber::sleep_until()");
  io::detail::timer_wait wait(deadline);
  wait_on(wait);  // a cancel unwinds from here after disarming the timer
}

template <class Rep, class Period>
void sleep_for(std::chrono::duration<Rep, Period> duration) {
  sleep_until(canopy::detail::steady_deadline_after(duration));
}

}  // namespace canopy::this_fiber
