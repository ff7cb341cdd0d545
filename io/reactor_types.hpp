// reactor_types — the vocabulary the reactor (io/reactor.hpp) and its two
// backends (io/epoll_backend.hpp, io/uring/uring_backend.hpp) share: which
// backend, the options, the directions and the answers of a wait or a
// completion request, and the statistics. A header of its own so that the
// backends need not include the reactor that owns them.
#pragma once

#include <cstdint>

namespace canopy::io {

// Which kernel interface carries the I/O.
enum class io_backend : std::uint8_t {
  automatic,  // epoll today: io_uring is slower than epoll for the examples
              // as shipped (docs/io.md, "Which is faster")
  epoll,
  io_uring,
};
// "auto", "epoll", "io_uring".
const char* to_string(io_backend backend) noexcept;

struct reactor_options {
  // The environment variable CANOPY_IO_BACKEND=auto|epoll|io_uring
  // overrides this for every reactor of the process.
  io_backend backend = io_backend::automatic;
  // Submission-queue entries of the io_uring backend (rounded to a power of
  // two, clamped to the kernel's maximum; a full queue is submitted early,
  // never an error). 0: std::invalid_argument naming the field, on every
  // backend.
  unsigned ring_entries = 4096;
  // The reactor brings a timer queue of its own (io/timer/timer_queue.hpp),
  // attached to the executor it drives: canopy::sleep_for, sleep_until and
  // with_timeout work in that executor's tasks with nothing else to create.
  // false: no timers (a canopy::io::reactor_timers may add them later).
  // At most 64 executors with timers exist at once; one more fails its
  // construction with std::logic_error.
  bool timers = true;
};

enum class interest : std::uint8_t { readable = 1, writable = 2, both = 3 };
enum class direction : std::uint8_t { read = 0, write = 1 };

struct reactor_stats {
  std::uint64_t blocking_waits = 0;        // epoll_wait calls that could block (poller parked)
  std::uint64_t polls = 0;                 // non-blocking polls (dispatch)
  std::uint64_t events = 0;                // readiness events delivered to registrations
  std::uint64_t notifies = 0;              // eventfd writes (a waker unparking the poller)
  std::uint64_t deadlines = 0;             // deadline_source expiries that fired something
  io_backend backend = io_backend::epoll;  // the backend in use
  std::uint64_t ring_enters = 0;           // io_uring_enter calls (submissions and waits)
  std::uint64_t completions = 0;           // io_uring completions reaped
};

namespace detail {

// What ready_or_arm() found.
enum class wait_status : std::uint8_t {
  ready,   // the direction is ready (or in error): try the operation
  armed,   // not ready: the waker is stored and will be woken on the next edge
  closed,  // the registration was removed: errc::operation_canceled
  busy,    // another operation waits in this direction (one at a time):
           // errc::connection_already_in_progress, nothing stored
};

// What a completion request (uring_backend::start, poll) came to.
enum class completion_status : std::uint8_t { in_flight, completed, closed, failed, busy };

// CANOPY_IO_BACKEND, if set, over `configured` (io/uring/backend_choice.cpp).
// Throws std::invalid_argument for another value.
io_backend chosen_backend(io_backend configured);

}  // namespace detail

}  // namespace canopy::io
