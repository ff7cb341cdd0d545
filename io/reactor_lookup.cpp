// Finding a reactor: the one an executor's driver is (of), the one the
// running task's executor has (current), and the executor configuration
// that makes a reactor its driver (with_reactor).
#include <memory>
#include <stdexcept>

#include "reactor.hpp"

namespace canopy::io {

reactor& reactor::of(executor& pool) {
  reactor* found = of(pool.core());
  if (found == nullptr) {
    throw std::logic_error(
        "canopy::io::reactor::of: this executor has no reactor (set executor_config::driver, "
        "e.g. with canopy::io::with_reactor)");
  }
  return *found;
}

reactor& reactor::current() {
  canopy::detail::worker_context* worker = canopy::detail::current_worker();
  if (worker == nullptr || worker->core == nullptr) {
    throw std::logic_error(
        "canopy::io::reactor::current() called outside a task (pass a reactor explicitly)");
  }
  reactor* found = of(*worker->core);
  if (found == nullptr) {
    throw std::logic_error(
        "canopy::io: the executor running this task has no reactor (set executor_config::driver, "
        "e.g. with canopy::io::with_reactor)");
  }
  return *found;
}

executor_config with_reactor(executor_config config, reactor_options options) {
  config.driver = std::make_shared<reactor>(options);
  return config;
}

}  // namespace canopy::io
