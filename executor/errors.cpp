#include "errors.hpp"

#include <string>

namespace canopy {

namespace {
class executor_error_category final : public std::error_category {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "canopy"; }
  [[nodiscard]] std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::shut_down:
        return "canopy: the executor is shut down and accepts no new tasks";
      case errc::at_capacity:
        return "canopy: at capacity (every task slot is taken, max_leaves; or a bounded "
               "queue is full, as run_blocking's max_queued)";
      case errc::cancelled:
        return "canopy: the task was cancelled (destroyed without completing)";
      case errc::worker_thread:
        return "canopy: this call would block a worker thread of a canopy executor";
      case errc::host_busy:
        return "canopy: another thread is running this executor as its host (run_once, "
               "run_for, run_until_idle, run): one host thread at a time";
    }
    return "canopy: unknown error " + std::to_string(value);
  }
};
}  // namespace

const std::error_category& executor_category() noexcept {
  static const executor_error_category category;
  return category;
}

}  // namespace canopy
