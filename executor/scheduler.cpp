// The face's entries that forward to executor_core (scheduler.hpp): the
// host role's, shutdown, statistics and the executor's facts, none on a
// task's path; and the making and end of a core. The entries on the spawn,
// wake and join paths are the core's own code instead, in spawn_path.cpp,
// run_at_join.cpp and executor_core.cpp.
#include "scheduler.hpp"

#include <utility>

#include "executor_core.hpp"
#include "host/host_runner.hpp"

namespace canopy::detail {

host_drive scheduler::run_host_until(bool (*ready)(const void* context) noexcept,
                                     const void* context,
                                     std::int64_t steady_deadline_ns) noexcept {
  return as_core(*this).run_host_until(ready, context, steady_deadline_ns);
}

std::size_t scheduler::run_as_host(const host_budget& budget) {
  return as_core(*this).host().run(budget);
}

int scheduler::host_notify_fd() const noexcept {
  return as_core(*this).host().notify_fd();
}

void scheduler::shutdown() { as_core(*this).shutdown(); }

std::shared_ptr<const shutdown_flag> scheduler::shared_shutdown_flag() const {
  return as_core(*this).shared_shutdown_flag();
}

executor_stats scheduler::stats() const { return as_core(*this).stats(); }

void scheduler::report_detached_exception(const std::exception_ptr& error) const noexcept {
  as_core(*this).report_detached_exception(error);
}

std::size_t scheduler::worker_count() const noexcept { return as_core(*this).worker_count(); }

std::size_t scheduler::capacity() const noexcept { return as_core(*this).capacity(); }

const executor_config& scheduler::config() const noexcept { return as_core(*this).config(); }

ext::idle_driver* scheduler::driver() const noexcept { return as_core(*this).driver(); }

void scheduler_deleter::operator()(scheduler* core) const noexcept {
  delete &as_core(*core);
}

owned_scheduler make_scheduler(executor_config config) {
  return owned_scheduler(new executor_core(std::move(config)));
}

}  // namespace canopy::detail
