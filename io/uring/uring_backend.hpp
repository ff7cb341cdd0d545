// uring_backend — the reactor's io_uring backend (io/reactor.hpp): one ring
// (completion_ring.hpp) carries the TCP stream and listener operations as
// completion requests (completion_op.hpp), and watches, with multishot
// polls, the eventfd notify() writes and the epoll descriptor of the
// backend's own epoll_backend (io/epoll_backend.hpp), which keeps every
// other wait on readiness. The poller parks in io_uring_enter. The rules
// are in docs/io.md, "The io_uring backend".
//
// Threads: wait() and dispatch() are the poller's; every other member any
// thread. Reaping the completion queue is done under reap_lock_ (the
// poller, or a thread waiting for a cancelled request). Internal
// (canopy::io::detail). In a build without io_uring (CANOPY_IO_URING 0)
// the class is declared all the same, and its constructor throws
// (without_uring.cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <system_error>

#include "../../executor/idle_driver.hpp"
#include "../../atomics/atomics.hpp"
#include "../../wait/waker.hpp"
#include "../epoll_backend.hpp"
#include "../reactor_types.hpp"
#include "../registration_slab.hpp"
#include "completion_request.hpp"

namespace canopy::io::detail {

class completion_ring;

class uring_backend {
 public:
  // Opens a ring of `entries` (rounded, clamped) and the epoll backend for
  // the readiness waits. Throws std::system_error: the message names
  // io_uring and the kernel's reason, or says this library was built
  // without it (errc::function_not_supported). `owner` is the reactor
  // (a worker of its executor submits at its idle point); `slab` the
  // registrations; both must outlive the backend.
  uring_backend(const ext::idle_driver& owner, registration_slab& slab, unsigned entries);
  ~uring_backend();
  uring_backend(const uring_backend&) = delete;
  uring_backend& operator=(const uring_backend&) = delete;

  // The readiness half (registrations' epoll interest, the eventfd).
  [[nodiscard]] epoll_backend& readiness() noexcept { return readiness_; }

  // ---- idle_driver, for the reactor ----
  bool wait(std::optional<std::chrono::steady_clock::time_point> deadline,
            bool& deadline_due) noexcept;
  std::size_t dispatch() noexcept;
  void submit() noexcept;
  void workers_stopped() noexcept;

  // ---- completion requests (reactor.hpp states the contracts) ----
  completion_status start(registration_id id, direction which, const waker& waiter,
                          const completion_request& request, std::uint16_t& sequence,
                          std::int32_t& result, std::error_code& error) noexcept;
  completion_status poll(registration_id id, direction which, std::uint16_t sequence,
                         const waker* waiter, std::int32_t& result) noexcept;
  // The waiter leaves its request: cancelled, and its completion reaped,
  // before this returns. What a send request sent before it ended (it
  // completed unseen, or the cancel raced its completion): the count, else
  // 0, so its waiter can account for bytes that went.
  std::size_t abandon(registration_id id, direction which, std::uint16_t sequence) noexcept;
  [[nodiscard]] bool has_queued_requests() const noexcept;
  // remove()'s part: a request found in flight (marked abandoned under the
  // entry's lock) is cancelled, and its completion reaped, before the slot
  // can be reused.
  void cancel_request(registration_id id, std::size_t which, std::uint16_t sequence,
                      unsigned position) noexcept;

  // The ring's completion-queue indexes (completion_ring.hpp), for the
  // reactor's completions_may_be_waiting() hint; valid for the backend's life.
  [[nodiscard]] const std::uint32_t* completion_head() const noexcept;
  [[nodiscard]] const std::uint32_t* completion_tail() const noexcept;

  // Adds the ring's counters and the readiness half's to `stats`.
  void add_stats(reactor_stats& stats) const noexcept;

 private:
  std::size_t reap_completions(bool* rewake = nullptr) noexcept;
  void complete(std::uint64_t user_data, std::int32_t result, std::uint32_t flags,
                bool* rewake = nullptr) noexcept;
  void arm_watches() noexcept;
  [[nodiscard]] bool submits_for_this_thread() const noexcept;
  void wait_until_reaped(registration_entry& target, std::size_t which,
                         std::uint16_t sequence) noexcept;

  const ext::idle_driver& owner_;
  registration_slab& slab_;
  epoll_backend readiness_;
  std::unique_ptr<completion_ring> ring_;
  std::mutex reap_lock_;
  // Guarded by reap_lock_: the ring reported the epoll descriptor readable,
  // and the one completion wait() took from the queue for dispatch().
  bool epoll_signalled_ = false;
  bool poller_waiting_ = false;   // the poller is between its look and its reap (wait)
  bool epoll_watched_ = false;    // the multishot poll on the epoll descriptor is armed
  bool eventfd_watched_ = false;  // the multishot poll on the eventfd is armed
  struct held_completion {
    std::uint64_t user_data = 0;
    std::int32_t result = 0;
    std::uint32_t flags = 0;
    bool present = false;
  } pending_completion_;

  // Statistics (relaxed counters).
  canopy::detail::atomics::atomic<std::uint64_t> blocking_waits_{0};
  canopy::detail::atomics::atomic<std::uint64_t> completions_{0};
};

}  // namespace canopy::io::detail
