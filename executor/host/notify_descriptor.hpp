// notify_descriptor — the eventfd behind executor::notify_fd(), reduced to
// the three things the host's handshake (host_channel.hpp) does with it:
// signal once, take every count signalled so far, and block until readable.
//
// A model-checking build (CANOPY_MODEL_CHECK, tests/model/) replaces the
// eventfd with a checker word, as atomics/futex.hpp does for the futex, so
// the model check runs the real host_channel code.
//
// Threads: signal() from any thread; take() and wait_readable() only by the
// thread holding the executor's host role.
#pragma once

#include <chrono>
#include <cstdint>

#include "../../atomics/atomics.hpp"

namespace canopy::detail {

class notify_descriptor {
 public:
  // Creates the eventfd; throws std::system_error if the kernel refuses.
  notify_descriptor();
  ~notify_descriptor();
  notify_descriptor(const notify_descriptor&) = delete;
  notify_descriptor& operator=(const notify_descriptor&) = delete;

  // The descriptor a host loop polls (-1 in a model-checking build).
  [[nodiscard]] int fd() const noexcept { return event_fd_; }

  // Add one to the count: the descriptor becomes (or stays) readable.
  void signal() noexcept;
  // Read and reset the count; 0 when nothing was signalled (or a signal is
  // still on its way).
  std::uint64_t take() noexcept;
  // Block until readable or `timeout` passes (negative: no limit); at once
  // if already readable. EINTR counts as a return: callers re-check.
  void wait_readable(std::chrono::nanoseconds timeout) noexcept;

#ifdef CANOPY_MODEL_CHECK
  // For the model check's end-of-execution verdict, without schedule points.
  [[nodiscard]] std::uint64_t peek_count() const noexcept { return model_count_.peek(); }
  // For the checker's teardown: let a blocked host return.
  void wake_for_teardown() noexcept { model::unpark_on(&model_count_); }
#endif

 private:
  int event_fd_ = -1;
#ifdef CANOPY_MODEL_CHECK
  atomics::atomic<std::uint32_t> model_count_{0};
#endif
};

}  // namespace canopy::detail
