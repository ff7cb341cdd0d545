#include "completion_ring.hpp"

#include <sched.h>

#include <cerrno>
#include <system_error>
#include <thread>

namespace canopy::io::detail {

namespace {

std::string describe(const char* step, int negative_errno) {
  return std::string(step) + ": " + std::system_category().message(-negative_errno);
}

// The opcodes the backend submits, each checked with the kernel's probe.
bool has_opcodes(io_uring& ring, std::string& why) {
  io_uring_probe* probe = io_uring_get_probe_ring(&ring);
  if (probe == nullptr) {
    why = "io_uring: the kernel does not answer IORING_REGISTER_PROBE";
    return false;
  }
  struct named {
    int opcode;
    const char* name;
  };
  const named needed[] = {{IORING_OP_RECV, "IORING_OP_RECV"},
                          {IORING_OP_SEND, "IORING_OP_SEND"},
                          {IORING_OP_ACCEPT, "IORING_OP_ACCEPT"},
                          {IORING_OP_CONNECT, "IORING_OP_CONNECT"},
                          {IORING_OP_POLL_ADD, "IORING_OP_POLL_ADD"}};
  bool all = true;
  for (const named& each : needed) {
    if (io_uring_opcode_supported(probe, each.opcode) == 0) {
      why = std::string("io_uring: the kernel lacks ") + each.name;
      all = false;
      break;
    }
  }
  io_uring_free_probe(probe);
  return all;
}

}  // namespace

std::unique_ptr<completion_ring> completion_ring::open(unsigned entries, std::error_code& error,
                                                       std::string& why) noexcept {
  error.clear();
  std::unique_ptr<completion_ring> made(new (std::nothrow) completion_ring());
  if (made == nullptr) {
    error = std::make_error_code(std::errc::not_enough_memory);
    why = "io_uring: out of memory";
    return nullptr;
  }
  io_uring_params params{};
  // COOP_TASKRUN: a completion's task work runs when its submitting worker
  // next enters or leaves the kernel, or at once if it sleeps, instead of
  // interrupting a running worker with an inter-processor interrupt and
  // the signal path. Kernels before 5.19 refuse the flag: set up without.
  params.flags = IORING_SETUP_CLAMP | IORING_SETUP_COOP_TASKRUN;
  // Set up on a thread of its own: the kernel signals the thread that
  // created a ring when the ring is torn down (TWA_SIGNAL), and the thread
  // constructing a reactor is the program's, whose next blocking call with
  // a timeout would fail with EINTR. This thread is gone by then.
  int status = -EAGAIN;
  try {
    std::thread setup([&] {
      status = io_uring_queue_init_params(entries, &made->ring_, &params);
      if (status == -EINVAL) {
        params = io_uring_params{};
        params.flags = IORING_SETUP_CLAMP;
        status = io_uring_queue_init_params(entries, &made->ring_, &params);
      }
    });
    setup.join();
  } catch (const std::system_error& failure) {
    error = failure.code();
    why = std::string("io_uring: cannot start the set-up thread: ") + failure.what();
    return nullptr;
  }
  if (status < 0) {
    error = std::error_code(-status, std::system_category());
    why = describe("io_uring_setup", status);
    return nullptr;
  }
  made->initialised_ = true;
  const auto missing = [&](const char* what) {
    error = std::make_error_code(std::errc::function_not_supported);
    why = std::string("io_uring: the kernel lacks ") + what;
    return nullptr;
  };
  if ((params.features & IORING_FEAT_EXT_ARG) == 0) {
    return missing("IORING_FEAT_EXT_ARG (Linux 5.11)");
  }
  if ((params.features & IORING_FEAT_NODROP) == 0) {
    return missing("IORING_FEAT_NODROP (Linux 5.5)");
  }
  if (!has_opcodes(made->ring_, why)) {
    error = std::make_error_code(std::errc::function_not_supported);
    return nullptr;
  }
  // Synchronous cancel (Linux 6.0) is what makes a cancelled receive safe
  // for its buffer; a request that does not exist answers ENOENT where the
  // kernel has it, EINVAL where it does not.
  io_uring_sync_cancel_reg probe{};
  probe.addr = ~std::uint64_t{0} - 7;
  probe.timeout.tv_sec = -1;
  probe.timeout.tv_nsec = -1;
  const int answer = io_uring_register_sync_cancel(&made->ring_, &probe);
  if (answer != -ENOENT && answer != 0) {
    return missing("IORING_REGISTER_SYNC_CANCEL (Linux 6.0)");
  }
  return made;
}

completion_ring::~completion_ring() {
  if (initialised_) {
    // Tears down what is still in flight (the reactor cancelled and reaped
    // every socket request before; the multishot polls end here).
    io_uring_queue_exit(&ring_);
  }
}

unsigned completion_ring::publish_locked() noexcept {
  io_uring_sq& queue = ring_.sq;
  const unsigned tail = queue.sqe_tail;
  if (queue.sqe_head != tail) {
    queue.sqe_head = tail;
    // release: pairs with the kernel's acquire of the tail when it consumes
    // the queue (another thread's io_uring_enter may be the one that does).
    io_uring_smp_store_release(queue.ktail, tail);
  }
  unsubmitted_.store(0, canopy::detail::atomics::relaxed);
  // acquire: pairs with the kernel's release of the head after it read the
  // entries, so the count never includes one already consumed.
  return tail - io_uring_smp_load_acquire(queue.khead);
}

unsigned completion_ring::submit() noexcept {
  unsigned pending = 0;
  {
    const std::lock_guard guard(submit_lock_);
    pending = publish_locked();
  }
  if (pending == 0) {
    return 0;
  }
  enters_.fetch_add(1, canopy::detail::atomics::relaxed);
  for (;;) {
    const int submitted = io_uring_enter(ring_.ring_fd, pending, 0, 0, nullptr);
    if (submitted >= 0) {
      return static_cast<unsigned>(submitted);
    }
    if (submitted != -EINTR) {
      // EAGAIN/EBUSY: the kernel is short of memory or the completion
      // queue overflowed; the entries stay queued for the next submit.
      // publish_locked() cleared the hint: set it again, or a worker's
      // submit() at its next poll or park would skip them, leaving them to
      // the poller's next wait, which may be blocked until some other
      // completion comes.
      const std::lock_guard guard(submit_lock_);
      unsubmitted_.store(unsubmitted_.load(canopy::detail::atomics::relaxed) + pending,
                         canopy::detail::atomics::relaxed);
      return 0;
    }
  }
}

void completion_ring::wait(std::optional<std::chrono::steady_clock::time_point> deadline) noexcept {
  unsigned pending = 0;
  {
    const std::lock_guard guard(submit_lock_);
    pending = publish_locked();
  }
  io_uring_getevents_arg argument{};
  __kernel_timespec timeout{};
  if (deadline) {
    const auto left = *deadline - std::chrono::steady_clock::now();
    const auto ns = left.count() <= 0 ? std::chrono::nanoseconds{0}
                                      : std::chrono::duration_cast<std::chrono::nanoseconds>(left);
    timeout.tv_sec = ns.count() / 1000000000;
    timeout.tv_nsec = ns.count() % 1000000000;
    argument.ts = reinterpret_cast<std::uint64_t>(&timeout);
  }
  enters_.fetch_add(1, canopy::detail::atomics::relaxed);
  // ETIME (the deadline), EINTR, EBUSY (completions overflowed into the
  // kernel's list; the next enter flushes them): the caller looks anyway.
  io_uring_enter2(static_cast<unsigned>(ring_.ring_fd), pending, 1,
                  IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
                  reinterpret_cast<sigset_t*>(&argument), sizeof argument);
}

bool completion_ring::cancel(std::uint64_t user_data, unsigned position) noexcept {
  {
    const std::lock_guard guard(submit_lock_);
    io_uring_sq& queue = ring_.sq;
    // Not yet published (at or after sqe_head): the kernel cannot see it.
    if (static_cast<int>(position - queue.sqe_head) >= 0 &&
        static_cast<int>(queue.sqe_tail - position) > 0) {
      io_uring_sqe* entry = &queue.sqes[position & queue.ring_mask];
      if (entry->user_data == user_data) {
        io_uring_prep_nop(entry);
        io_uring_sqe_set_data64(entry, 0);
        return true;
      }
    }
  }
  // Published: the thread that published it is entering the kernel with
  // it; sync cancel finds a request only once the kernel has taken it.
  // acquire: pairs with the kernel's release of the head after it read it.
  while (static_cast<int>(io_uring_smp_load_acquire(ring_.sq.khead) - position) <= 0) {
    sched_yield();
  }
  io_uring_sync_cancel_reg request{};
  request.addr = user_data;
  request.fd = -1;
  request.timeout.tv_sec = -1;
  request.timeout.tv_nsec = -1;
  // 0: cancelled; ENOENT: it had completed. Either way the kernel is done.
  while (io_uring_register_sync_cancel(&ring_, &request) == -EINTR) {
  }
  return false;
}

void completion_ring::cancel_all() noexcept {
  io_uring_sync_cancel_reg request{};
  request.fd = -1;
  request.flags = IORING_ASYNC_CANCEL_ANY;
  request.timeout.tv_sec = -1;
  request.timeout.tv_nsec = -1;
  while (io_uring_register_sync_cancel(&ring_, &request) == -EINTR) {
  }
}

}  // namespace canopy::io::detail
