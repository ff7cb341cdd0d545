// The io_uring backend in a build without it (-Dio_uring=disabled, or
// liburing-dev missing; io/meson.build builds this file instead of
// completion_ring.cpp and uring_backend.cpp). Every reactor runs epoll
// there: the backend's constructor throws when io_uring is asked for, so
// no uring_backend ever exists and its other members are never called;
// they are defined only so that the reactor links.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <system_error>

#include "completion_ring.hpp"
#include "uring_backend.hpp"

static_assert(!CANOPY_IO_URING, "without_uring.cpp is built only without the io_uring backend");

namespace canopy::io::detail {

uring_backend::uring_backend(const ext::idle_driver& owner, registration_slab& slab,
                             unsigned /*entries*/)
    : owner_(owner), slab_(slab), readiness_(slab, false) {
  // Asked for by name: say why it is missing rather than run epoll quietly.
  throw std::system_error(std::make_error_code(std::errc::function_not_supported),
                          "canopy::io::reactor: this Canopy was built without the io_uring "
                          "backend (-Dio_uring=disabled, or liburing-dev missing when it was "
                          "built); use io_backend::epoll or automatic");
}

uring_backend::~uring_backend() = default;

bool uring_backend::wait(std::optional<std::chrono::steady_clock::time_point> /*deadline*/,
                         bool& /*deadline_due*/) noexcept {
  return false;
}

std::size_t uring_backend::dispatch() noexcept { return 0; }

void uring_backend::submit() noexcept {}

void uring_backend::workers_stopped() noexcept {}

completion_status uring_backend::start(registration_id /*id*/, direction /*which*/,
                                       const waker& /*waiter*/,
                                       const completion_request& /*request*/,
                                       std::uint16_t& /*sequence*/, std::int32_t& /*result*/,
                                       std::error_code& /*error*/) noexcept {
  return completion_status::closed;
}

completion_status uring_backend::poll(registration_id /*id*/, direction /*which*/,
                                      std::uint16_t /*sequence*/, const waker* /*waiter*/,
                                      std::int32_t& /*result*/) noexcept {
  return completion_status::closed;
}

std::size_t uring_backend::abandon(registration_id /*id*/, direction /*which*/,
                                   std::uint16_t /*sequence*/) noexcept {
  return 0;
}

bool uring_backend::has_queued_requests() const noexcept { return false; }
const std::uint32_t* uring_backend::completion_head() const noexcept { return nullptr; }
const std::uint32_t* uring_backend::completion_tail() const noexcept { return nullptr; }

void uring_backend::cancel_request(registration_id /*id*/, std::size_t /*which*/,
                                   std::uint16_t /*sequence*/, unsigned /*position*/) noexcept {}

void uring_backend::add_stats(reactor_stats& /*stats*/) const noexcept {}

}  // namespace canopy::io::detail
