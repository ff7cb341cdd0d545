// stream_bounded — the bounded write of the stream sockets (tcp_stream,
// unix_stream): write_all_within, whose contract is in io/tcp.hpp (the
// bounded read is io/stream_receive.hpp). Each send's own wait (a wait
// source: the readiness helper, or the completion operation on io_uring)
// is raced against the time with with_timeout, so a bound costs a timer
// while the socket is not ready and never a child task. Internal
// (canopy::io::detail).
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
// takes, at least one byte) at a time; each round waits at most
// `stall_limit` for the socket (milliseconds::max(): no limit), so the
// limit starts again after every send that made progress.
template <class MakeSend>
task<void> send_all_within(MakeSend make, std::span<const std::byte> data,
                           std::chrono::milliseconds stall_limit, std::error_code& error) {
  error.clear();
  while (!data.empty()) {
    auto round = make(data);
    if (!round.ready()) {
      if (stall_limit == std::chrono::milliseconds::max()) {
        co_await canopy::wait_on(round);
      } else if (!co_await canopy::with_timeout(stall_limit, round)) {
        error = std::make_error_code(std::errc::timed_out);
        co_return;
      }
    }
    const io_result sent = round.result();
    if (sent.error) {
      error = sent.error;
      co_return;
    }
    data = data.subspan(sent.count);
  }
}

}  // namespace canopy::io::detail
