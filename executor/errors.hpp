// Errors the executor reports, as std::error_code values of one category and
// as exceptions carrying them.
#pragma once

#include <stdexcept>
#include <system_error>

namespace canopy {

enum class errc {
  shut_down = 1,      // spawn after shutdown() began
  at_capacity = 2,    // try_spawn (or a spawn from a worker) found every slot taken
  cancelled = 3,      // the task was destroyed without completing
  worker_thread = 4,  // a call that would block or deadlock was made on a worker thread
};

const std::error_category& executor_category() noexcept;

inline std::error_code make_error_code(errc value) noexcept {
  return {static_cast<int>(value), executor_category()};
}

// Thrown by spawn() when the task cannot be accepted.
class spawn_error : public std::system_error {
 public:
  explicit spawn_error(errc value) : std::system_error(make_error_code(value)) {}
};

// Thrown by join() when the task was destroyed without completing.
class task_cancelled : public std::system_error {
 public:
  task_cancelled() : std::system_error(make_error_code(errc::cancelled)) {}
};

}  // namespace canopy

template <>
struct std::is_error_code_enum<canopy::errc> : std::true_type {};
