// Errors the executor reports, as std::error_code values of one category and
// as exceptions carrying them.
#pragma once

#include <stdexcept>
#include <system_error>

namespace canopy {

enum class errc {
  shut_down = 1,      // spawn after shutdown() began
  at_capacity = 2,    // try_spawn (or a spawn from a worker) found every slot taken;
                      // run_blocking found max_queued calls waiting
  cancelled = 3,      // the task was destroyed without completing
  worker_thread = 4,  // a blocking call (join, wait_for, block_on, shutdown) on a worker thread
  host_busy = 5,      // run_once/run_for/... while another thread runs the executor as its host
};

const std::error_category& executor_category() noexcept;

inline std::error_code make_error_code(errc value) noexcept {
  return {static_cast<int>(value), executor_category()};
}

namespace detail {

// What the spawn path reports inside the library: `spawned`, or why not (the
// errc of the same name). The success path makes no std::error_code: a
// default-constructed one calls libstdc++'s system_category() out of line,
// a visible share of a spawn. Public functions hand a
// failure on as std::error_code (to_error_code) or spawn_error.
enum class spawn_status {
  spawned = 0,
  shut_down = static_cast<int>(errc::shut_down),
  at_capacity = static_cast<int>(errc::at_capacity),
};

inline std::error_code to_error_code(spawn_status status) noexcept {
  if (status == spawn_status::spawned) {
    return {};
  }
  return make_error_code(static_cast<errc>(status));
}

}  // namespace detail

// Thrown by spawn() when the task cannot be accepted.
class spawn_error : public std::system_error {
 public:
  explicit spawn_error(errc value) : std::system_error(make_error_code(value)) {}
  // Precondition: status != spawn_status::spawned.
  explicit spawn_error(detail::spawn_status status) : spawn_error(static_cast<errc>(status)) {}
};

// Thrown by get() when the task was destroyed without completing.
class task_cancelled : public std::system_error {
 public:
  task_cancelled() : std::system_error(make_error_code(errc::cancelled)) {}
};

}  // namespace canopy

template <>
struct std::is_error_code_enum<canopy::errc> : std::true_type {};
