// The reactor's io_uring members in a build without the io_uring backend
// (-Dio_uring=disabled, or liburing-dev missing; io/meson.build builds this
// file instead of completion_ring.cpp and reactor_completion.cpp). Every
// reactor runs epoll there: no ring is ever opened (backend_choice.cpp
// throws when io_uring is asked for), so each member answers as the
// io_uring build does on an epoll reactor, whose ring is null.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <system_error>

#include "../reactor.hpp"
#include "completion_op.hpp"

static_assert(!CANOPY_IO_URING, "without_uring.cpp is built only without the io_uring backend");

namespace canopy::io {

void reactor::submit() noexcept {}

void reactor::workers_stopped() noexcept {}

bool reactor::has_queued_requests() const noexcept { return false; }

reactor::completion_status reactor::start_completion(registration_id /*id*/, direction /*which*/,
                                                     const waker& /*waiter*/,
                                                     const detail::completion_request& /*request*/,
                                                     std::uint16_t& /*sequence*/,
                                                     std::int32_t& /*result*/,
                                                     std::error_code& /*error*/) noexcept {
  return completion_status::closed;
}

reactor::completion_status reactor::poll_completion(registration_id /*id*/, direction /*which*/,
                                                    std::uint16_t /*sequence*/,
                                                    const waker* /*waiter*/,
                                                    std::int32_t& /*result*/) noexcept {
  return completion_status::closed;
}

void reactor::abandon_completion(registration_id /*id*/, direction /*which*/,
                                 std::uint16_t /*sequence*/) noexcept {}

// Only an abandoned io_uring receive keeps bytes.
std::size_t reactor::take_kept(registration_id /*id*/, std::span<std::byte> /*buffer*/) noexcept {
  return 0;
}

// remove() cancels a request only when one is in flight: never here.
void reactor::cancel_request(registration_id /*id*/, std::size_t /*which*/,
                             std::uint16_t /*sequence*/, unsigned /*position*/) noexcept {}

// wait() and dispatch() take these only when the ring is open: never here.
bool reactor::wait_on_ring(
    std::optional<std::chrono::steady_clock::time_point> /*deadline*/) noexcept {
  return false;
}

std::size_t reactor::dispatch_ring() noexcept { return 0; }

}  // namespace canopy::io
