// stream_bounded — the bounded write of the stream sockets (tcp_stream,
// unix_stream) and of the TLS stream's flush: write_all_within, whose
// contract is in io/tcp.hpp (the bounded read is io/stream_receive.hpp).
// Each send's own wait (a wait source: the readiness helper, or the
// completion operation on io_uring) is raced against the time with
// with_timeout, so a bound costs a timer while the socket is not ready and
// never a child task. Internal (canopy::io::detail).
#pragma once

#include <chrono>
#include <span>
#include <system_error>

#include "../coroutine/custom_wait.hpp"
#include "../coroutine/task.hpp"
#include "readiness.hpp"
#include "timer/timer_wait.hpp"

namespace canopy::io::detail {

// Every byte of `data`, a round (`make(rest)`: a send of what the socket
// takes, at least one byte) at a time. A round waits at most `stall_limit`
// for the socket (milliseconds::max(): no limit), and the write ends with
// errc::timed_out only once the socket took nothing for that long.
//
// What the limit bounds is the wait for the socket to become writable, and
// that is not the same as "took nothing": TCP signals writability (the
// epoll edge, the poll an io_uring send request waits on) only once a good
// part of the send buffer drained, so a slow but steady reader keeps making
// room that no edge announces, and a send would take bytes all the while.
// So at the limit `try_send(rest)` (one send that never waits: the count,
// or errc::resource_unavailable_try_again when the socket took nothing)
// decides: bytes taken are progress, and the limit starts again; nothing
// taken is the stall. A request abandoned at the limit reports what it sent
// meanwhile (completion_op::disarm), so no byte is sent twice.
template <class MakeSend, class TrySend>
task<void> send_all_within(MakeSend make, TrySend try_send, std::span<const std::byte> data,
                           std::chrono::milliseconds stall_limit, std::error_code& error) {
  error.clear();
  while (!data.empty()) {
    auto round = make(data);
    io_result sent;
    if (round.ready()) {
      sent = round.result();
    } else if (stall_limit == std::chrono::milliseconds::max()) {
      co_await canopy::wait_on(round);
      sent = round.result();
    } else if (co_await canopy::with_timeout(stall_limit, round)) {
      sent = round.result();
    } else {
      sent = try_send(data);
      if (sent.error == std::errc::resource_unavailable_try_again) {
        error = std::make_error_code(std::errc::timed_out);
        co_return;
      }
    }
    if (sent.error) {
      error = sent.error;
      co_return;
    }
    data = data.subspan(sent.count);
  }
}

}  // namespace canopy::io::detail
