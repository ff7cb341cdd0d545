// The reactor's io_uring backend (uring_backend.hpp): opening the ring,
// the poller's wait on it, reaping completions, and the life of a
// completion request (start, poll, abandon). Choosing it is in
// backend_choice.cpp, its readiness half is io/epoll_backend.cpp; the
// rules are in docs/io.md, "The io_uring backend".
#include "uring_backend.hpp"

#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "../../executor/scheduler.hpp"
#include "completion_ring.hpp"

namespace canopy::io::detail {

namespace {

// user_data of the ring's own requests (bit 0 clear); a socket request's
// has bit 0 set: generation 32 | slot 20 | sequence 10 | direction 1 | 1.
constexpr std::uint64_t wake_tag = 2;
constexpr std::uint64_t epoll_tag = 4;
constexpr std::uint16_t sequence_mask = 0x3ff;

std::uint64_t request_tag(registration_id id, std::size_t which, std::uint16_t sequence) noexcept {
  return (std::uint64_t{id.generation} << 32) | (std::uint64_t{id.slot} << 12) |
         (std::uint64_t{sequence} << 2) | (std::uint64_t{which} << 1) | 1U;
}

struct decoded_tag {
  std::uint32_t generation;
  std::uint32_t slot;
  std::uint16_t sequence;
  std::size_t which;
};

decoded_tag decode(std::uint64_t tag) noexcept {
  return {static_cast<std::uint32_t>(tag >> 32), static_cast<std::uint32_t>((tag >> 12) & 0xfffffU),
          static_cast<std::uint16_t>((tag >> 2) & sequence_mask),
          static_cast<std::size_t>((tag >> 1) & 1U)};
}

void prepare(io_uring_sqe* entry, const completion_request& request, std::uint64_t tag) noexcept {
  switch (request.kind) {
    case completion_kind::receive:
      io_uring_prep_recv(entry, request.fd, request.data, request.size, 0);
      // A receive is asked for when the socket had nothing (the HTTP
      // server's next request, an echo's next message): arm the poll first
      // rather than try a recv that fails.
      entry->ioprio |= IORING_RECVSEND_POLL_FIRST;
      break;
    case completion_kind::send_some:
      io_uring_prep_send(entry, request.fd, request.data, request.size, MSG_NOSIGNAL);
      break;
    case completion_kind::send_all:
      io_uring_prep_send(entry, request.fd, request.data, request.size, MSG_NOSIGNAL | MSG_WAITALL);
      break;
    case completion_kind::send_gathered:
      io_uring_prep_sendmsg(entry, request.fd, static_cast<const msghdr*>(request.data),
                            MSG_NOSIGNAL | MSG_WAITALL);
      break;
    case completion_kind::accept:
      io_uring_prep_accept(entry, request.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      break;
    case completion_kind::connect:
      io_uring_prep_connect(entry, request.fd, static_cast<const sockaddr*>(request.data),
                            static_cast<socklen_t>(request.size));
      break;
  }
  io_uring_sqe_set_data64(entry, tag);
}

}  // namespace

uring_backend::uring_backend(const ext::idle_driver& owner, registration_slab& slab,
                             unsigned entries)
    : owner_(owner), slab_(slab), readiness_(slab, false) {
  std::error_code error;
  std::string why;
  ring_ = completion_ring::open(entries, error, why);
  if (ring_ == nullptr) {
    throw std::system_error(error, "canopy::io::reactor: the io_uring backend cannot run here (" +
                                       why + "); use io_backend::epoll or automatic");
  }
}

// The ring goes first: its requests point into registrations and watch the
// readiness half's descriptors.
uring_backend::~uring_backend() { ring_.reset(); }

void uring_backend::add_stats(reactor_stats& stats) const noexcept {
  readiness_.add_stats(stats);
  stats.blocking_waits += blocking_waits_.load(canopy::detail::atomics::relaxed);
  stats.ring_enters = ring_->enters();
  stats.completions = completions_.load(canopy::detail::atomics::relaxed);
}

// The ring watches the eventfd (notify) and the epoll descriptor (the
// readiness registrations) with multishot polls, one completion per wake-up
// of either. Armed by the poller, a worker (reap_lock_ held): the kernel
// completes a poll through task work on the thread that armed it, and a
// worker is ours to interrupt; a thread of the program is not (its blocking
// calls with a timeout would fail with EINTR).
void uring_backend::arm_watches() noexcept {
  const auto watch = [this](int fd, std::uint64_t tag) {
    std::error_code ignored;
    return ring_->queue(
        [&](io_uring_sqe* entry) {
          io_uring_prep_poll_multishot(entry, fd, POLLIN);
          io_uring_sqe_set_data64(entry, tag);
        },
        ignored);
  };
  if (!eventfd_watched_) {
    eventfd_watched_ = watch(readiness_.event_fd(), wake_tag);
  }
  if (!epoll_watched_) {
    epoll_watched_ = watch(readiness_.epoll_fd(), epoll_tag);
  }
}

// Whether a worker of this reactor's executor runs on this thread: it
// submits what it queued when it runs out of work (idle_driver::submit).
bool uring_backend::submits_for_this_thread() const noexcept {
  const canopy::detail::worker_context* worker = canopy::detail::current_worker();
  return worker != nullptr && worker->core != nullptr && worker->core->driver() == &owner_ &&
         worker->index < worker->core->worker_count();
}

void uring_backend::submit() noexcept {
  if (ring_->has_unsubmitted()) {
    ring_->submit();
  }
}

void uring_backend::workers_stopped() noexcept {
  // Requests whose submitting worker has exited are finished by the
  // kernel's fallback work, slowly, one cancel at a time; one cancel of
  // all of them is quick. Their completions are reaped here, so each
  // destroyed task's disarm finds its request over.
  ring_->cancel_all();
  const std::lock_guard guard(reap_lock_);
  reap_completions();
  epoll_watched_ = false;
  eventfd_watched_ = false;
}

bool uring_backend::has_queued_requests() const noexcept { return ring_->has_unsubmitted(); }

const std::uint32_t* uring_backend::completion_head() const noexcept {
  return ring_->completion_head();
}
const std::uint32_t* uring_backend::completion_tail() const noexcept {
  return ring_->completion_tail();
}

completion_status uring_backend::start(registration_id id, direction which, const waker& waiter,
                                       const completion_request& request, std::uint16_t& sequence,
                                       std::int32_t& result, std::error_code& error) noexcept {
  registration_entry* target = slab_.find(id.slot);
  if (target == nullptr) {
    return completion_status::closed;
  }
  const auto index = static_cast<std::size_t>(which);
  {
    // Queued under the entry's lock: a remove() either comes first (closed
    // here) or finds the request in flight and cancels it.
    const std::lock_guard guard(target->lock);
    if (!target->live || target->generation != id.generation) {
      return completion_status::closed;
    }
    registration_entry::completion& op = target->completions[index];
    if (op.in_flight || op.done) {
      return completion_status::busy;  // another task's request (one per direction)
    }
    if (request.kind == completion_kind::accept && !target->kept_accepted.empty())
        [[unlikely]] {
      // A connection an accept that lost a race took: the oldest first.
      result = target->kept_accepted.front();
      target->kept_accepted.erase(target->kept_accepted.begin());
      return completion_status::completed;
    }
    if (target->has_kept() && request.kind == completion_kind::receive && request.size > 0)
        [[unlikely]] {
      // Bytes a receive that lost a race took: they come before anything
      // the socket holds now.
      const std::size_t room =
          std::min<std::size_t>(request.size, std::numeric_limits<std::int32_t>::max());
      result =
          static_cast<std::int32_t>(target->take_kept(static_cast<std::byte*>(request.data), room));
      return completion_status::completed;
    }
    op.sequence = static_cast<std::uint16_t>((op.sequence + 1) & sequence_mask);
    op.generation = id.generation;
    op.forget_result();
    op.in_flight = true;
    op.abandoned = false;
    op.yields_descriptor = request.kind == completion_kind::accept;
    op.reports_sent = request.kind == completion_kind::send_some ||
                      request.kind == completion_kind::send_all ||
                      request.kind == completion_kind::send_gathered;
    op.abandoned_sent = 0;
    op.receive_buffer = request.kind == completion_kind::receive
                            ? static_cast<const std::byte*>(request.data)
                            : nullptr;
    target->waiters[index] = waiter;
    const std::uint64_t tag = request_tag(id, index, op.sequence);
    if (!ring_->queue([&](io_uring_sqe* entry) { prepare(entry, request, tag); }, error,
                      &op.position)) {
      op.in_flight = false;
      target->waiters[index] = waker{};
      return completion_status::failed;
    }
    sequence = op.sequence;
  }
  // Another thread (a host thread, a plain thread, another executor's
  // worker) has no idle point at which it would submit: wake the poller,
  // whose wait submits what is queued (busy workers submit at their poll
  // interval). Not submitted here: the request's completion would be task
  // work on this thread, interrupting it.
  if (!submits_for_this_thread()) {
    readiness_.notify();
  }
  return completion_status::in_flight;
}

completion_status uring_backend::poll(registration_id id, direction which, std::uint16_t sequence,
                                      const waker* waiter, std::int32_t& result) noexcept {
  return slab_.with_live(id, completion_status::closed, [&](registration_entry& target) {
    const auto index = static_cast<std::size_t>(which);
    registration_entry::completion& op = target.completions[index];
    if (op.sequence != sequence) {
      return completion_status::closed;
    }
    if (op.done) {
      op.done = false;
      result = op.result;
      return completion_status::completed;
    }
    if (op.in_flight) {
      if (waiter != nullptr) {
        target.waiters[index] = *waiter;
      }
      return completion_status::in_flight;
    }
    return completion_status::closed;
  });
}

std::size_t uring_backend::abandon(registration_id id, direction which,
                                   std::uint16_t sequence) noexcept {
  registration_entry* target = slab_.find(id.slot);
  if (target == nullptr) {
    return 0;
  }
  const auto index = static_cast<std::size_t>(which);
  std::size_t sent = 0;
  unsigned position = 0;
  {
    const std::lock_guard guard(target->lock);
    registration_entry::completion& op = target->completions[index];
    if (op.generation != id.generation || op.sequence != sequence) {
      return 0;  // not this request (a remove() already waited for it)
    }
    if (op.done) {
      // Completed, but its waiter leaves without the result: a receive's
      // bytes are kept for the next read, a send's count goes back to it.
      if (target->keep_left_result(op, op.result)) {
        op.done = false;  // the connection is kept, not closed by forget_result
      }
      if (op.reports_sent && op.result > 0) {
        sent = static_cast<std::size_t>(op.result);
      }
    }
    op.forget_result();
    if (!op.in_flight) {
      return sent;
    }
    op.abandoned = true;
    position = op.position;
    if (target->live && target->generation == id.generation) {
      target->waiters[index] = waker{};
    }
  }
  cancel_request(id, index, sequence, position);
  // The completion is reaped (complete() put a send's count aside): this
  // request's unless another was started on the direction since.
  const std::lock_guard guard(target->lock);
  registration_entry::completion& op = target->completions[index];
  if (op.generation == id.generation && op.sequence == sequence && !op.in_flight) {
    sent = static_cast<std::size_t>(std::exchange(op.abandoned_sent, 0));
  }
  return sent;
}

void uring_backend::cancel_request(registration_id id, std::size_t which, std::uint16_t sequence,
                                   unsigned position) noexcept {
  registration_entry& target = *slab_.find(id.slot);
  if (ring_->cancel(request_tag(id, which, sequence), position)) {
    // Never handed to the kernel: no completion will come.
    const std::lock_guard guard(target.lock);
    registration_entry::completion& op = target.completions[which];
    if (op.sequence == sequence && op.in_flight) {
      op.in_flight = false;
      op.abandoned = false;
    }
    return;
  }
  wait_until_reaped(target, which, sequence);
}

void uring_backend::wait_until_reaped(registration_entry& target, std::size_t which,
                                      std::uint16_t sequence) noexcept {
  for (;;) {
    {
      const std::lock_guard guard(target.lock);
      const registration_entry::completion& op = target.completions[which];
      if (!op.in_flight || op.sequence != sequence) {
        return;
      }
    }
    // The cancel has returned, so the completion is posted or about to be
    // (task work the kernel runs on the submitting thread): reap it here
    // unless the poller is reaping now or waiting in the kernel (then the
    // completion wakes it, and it reaps).
    bool reaped = false;
    bool rewake = false;
    if (reap_lock_.try_lock()) {
      reaped = !poller_waiting_;
      if (reaped) {
        reap_completions(&rewake);
      }
      reap_lock_.unlock();
    }
    if (rewake) {
      // A notify or epoll's readiness was taken from the queue here, not by
      // the poller, which may have looked before this reap and be about to
      // look again: post a wake-up of its own.
      readiness_.notify();
    }
    if (!reaped) {
      sched_yield();
    }
  }
}

void uring_backend::complete(std::uint64_t user_data, std::int32_t result, std::uint32_t flags,
                             bool* rewake) noexcept {
  if ((user_data & 1U) == 0) {
    // wake_tag: a notify(); epoll_tag: readiness to collect. A poll that
    // ended (no F_MORE) is armed again by the poller; armed on a readable
    // eventfd, it completes at once, so no notify is lost meanwhile.
    const bool ended = (flags & IORING_CQE_F_MORE) == 0;
    if (user_data == wake_tag) {
      if (rewake == nullptr) {
        readiness_.drain_eventfd();
      } else {
        *rewake = true;  // left for the poller to drain after the new wake
      }
      eventfd_watched_ = eventfd_watched_ && !ended;
    } else if (user_data == epoll_tag) {
      epoll_signalled_ = true;
      epoll_watched_ = epoll_watched_ && !ended;
      if (rewake != nullptr) {
        *rewake = true;
      }
    }
    return;
  }
  const decoded_tag tag = decode(user_data);
  registration_entry* target = slab_.find(tag.slot);
  if (target == nullptr) {
    return;
  }
  waker woken;
  {
    const std::lock_guard guard(target->lock);
    registration_entry::completion& op = target->completions[tag.which];
    if (!op.in_flight || op.sequence != tag.sequence || op.generation != tag.generation) {
      return;
    }
    op.in_flight = false;
    if (op.abandoned) {
      // Its waiter left: an accepted connection is kept for the next
      // accept (closed if the listener is gone), a receive's bytes are
      // kept (its waiter is still in abandon(), waiting for this
      // completion, so the buffer is still there), a send's count is put
      // aside for abandon() to return.
      op.abandoned = false;
      if (!target->keep_left_result(op, result)) {
        op.drop(result);
      }
      if (op.reports_sent && result > 0) {
        op.abandoned_sent = result;
      }
      return;
    }
    op.done = true;
    op.result = result;
    woken = std::exchange(target->waiters[tag.which], waker{});
  }
  completions_.fetch_add(1, canopy::detail::atomics::relaxed);
  woken.wake();
}

// reap_lock_ held. `rewake`: null for the poller; for another thread, set
// when it took a wake-up or epoll's readiness the poller was owed.
std::size_t uring_backend::reap_completions(bool* rewake) noexcept {
  std::size_t total = 0;
  if (pending_completion_.present) {
    pending_completion_.present = false;
    complete(pending_completion_.user_data, pending_completion_.result, pending_completion_.flags,
             rewake);
    ++total;
  }
  for (;;) {
    const unsigned count = ring_->reap(
        256, [this, rewake](std::uint64_t user_data, std::int32_t result, std::uint32_t flags) {
          complete(user_data, result, flags, rewake);
        });
    total += count;
    if (count < 256) {
      return total;
    }
  }
}

bool uring_backend::wait(std::optional<std::chrono::steady_clock::time_point> deadline,
                         bool& deadline_due) noexcept {
  {
    const std::lock_guard guard(reap_lock_);
    if (pending_completion_.present || epoll_signalled_) {
      return true;  // not dispatched yet (a notify made park() call us again)
    }
    arm_watches();
    // From this look until the reap below, the queue is the poller's alone:
    // a thread waiting for a cancelled request must not take a wake-up (or
    // a poll's last completion) it is about to block for.
    poller_waiting_ = true;
  }
  blocking_waits_.fetch_add(1, canopy::detail::atomics::relaxed);
  ring_->wait(deadline);
  // Only the wake-ups (notify) are consumed here; completions and epoll's
  // readiness are delivered by dispatch(), after the worker is awake.
  bool collected = false;
  {
    const std::lock_guard guard(reap_lock_);
    poller_waiting_ = false;
    while (ring_->has_completions() && !collected) {
      ring_->reap(1, [&](std::uint64_t user_data, std::int32_t result, std::uint32_t flags) {
        if (user_data == wake_tag) {
          complete(user_data, result, flags);
        } else {
          // Kept for dispatch() (reap() has marked it seen).
          pending_completion_ = {user_data, result, flags, true};
          collected = true;
        }
      });
    }
    collected = collected || epoll_signalled_;
  }
  if (deadline && std::chrono::steady_clock::now() >= *deadline) {
    deadline_due = true;
  }
  return collected || deadline_due;
}

std::size_t uring_backend::dispatch() noexcept {
  std::size_t delivered = 0;
  {
    const std::lock_guard guard(reap_lock_);
    delivered += reap_completions();
    arm_watches();
    if (epoll_signalled_) {
      epoll_signalled_ = false;
      delivered += readiness_.poll_until_drained();
    }
  }
  return delivered;
}

}  // namespace canopy::io::detail
