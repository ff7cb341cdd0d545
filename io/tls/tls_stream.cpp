// tls_stream's operations, instantiated for tcp_stream and unix_stream.
#include "tls_stream.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "../../coroutine/custom_wait.hpp"
#include "../../coroutine/yield.hpp"
#include "../coop_budget.hpp"
#include "../readiness.hpp"
#include "../stream_bounded.hpp"
#include "../stream_op.hpp"
#include "../tcp.hpp"
#include "../timer/timer_wait.hpp"
#include "../unix.hpp"
#include "tls_claims.hpp"
#include "tls_engine.hpp"

namespace canopy::io {

namespace {

using detail::operation_claim;
using detail::output_claim;
using detail::tls_engine;
using detail::tls_operation;
using detail::tls_step;

using clock = std::chrono::steady_clock;
constexpr auto no_stall_limit = std::chrono::milliseconds::max();

void throw_if(const std::error_code& error, const char* what) {
  if (error) {
    throw std::system_error(error, what);
  }
}

// The next layer's own socket operations, as its read_some and write_all
// run them (a wait source each, so that a deadline races the socket's wait
// itself): a TCP stream's work on both backends, a Unix stream's on
// readiness.
auto receive_from(const tcp_stream& next, std::span<std::byte> room) noexcept {
  return detail::receive_op(next.reg(), next.native_handle(), room);
}
auto receive_from(const unix_stream& next, std::span<std::byte> room) noexcept {
  return detail::readiness_op(next.reg(), direction::read,
                              detail::recv_attempt(next.native_handle(), room), room.size());
}
auto send_some_to(const tcp_stream& next, std::span<const std::byte> data) noexcept {
  return detail::send_some_op(next.reg(), next.native_handle(), data);
}
auto send_some_to(const unix_stream& next, std::span<const std::byte> data) noexcept {
  return detail::readiness_op(next.reg(), direction::write,
                              detail::send_some_attempt(next.native_handle(), data));
}

}  // namespace

template <class Stream>
tls_stream<Stream>::tls_stream(Stream next, const tls_context& context)
    : next_(std::move(next)), engine_(std::make_unique<tls_engine>(context, false, "")) {}

template <class Stream>
tls_stream<Stream>::tls_stream(Stream next, const tls_context& context, std::string_view host)
    : next_(std::move(next)), engine_(std::make_unique<tls_engine>(context, true, host)) {}

template <class Stream>
tls_stream<Stream>::tls_stream(tls_stream&& other) noexcept = default;
template <class Stream>
tls_stream<Stream>& tls_stream<Stream>::operator=(tls_stream&& other) noexcept = default;
template <class Stream>
tls_stream<Stream>::~tls_stream() = default;

// Sends what the engine produced; the caller holds the output claim,
// which this releases once nothing is left (or on an error). Each send
// waits for the socket at most `stall_limit`, and the write stalls only
// once the socket took nothing for that long: the streams' own bounded
// write (detail::send_all_within, io/stream_bounded.hpp) sends the records.
template <class Stream>
task<void> tls_stream<Stream>::flush(std::chrono::milliseconds stall_limit,
                                     std::error_code& error) {
  output_claim claim(*engine_);
  while (engine_->take_output(sending_)) {
    co_await detail::send_all_within(
        [this](std::span<const std::byte> rest) noexcept { return send_some_to(next_, rest); },
        [this](std::span<const std::byte> rest) noexcept {
          detail::io_result sent;
          sent.count = next_.try_write_some(rest, sent.error);
          return sent;
        },
        std::span<const std::byte>(sending_), stall_limit, error);
    if (error) {
      co_return;
    }
  }
  claim.held = false;  // take_output released it
}

template <class Stream>
task<void> tls_stream<Stream>::handshake(std::error_code& error) {
  error.clear();
  if (!engine_->begin(tls_operation::handshake, error)) {
    co_return;
  }
  operation_claim claim(*engine_, tls_operation::handshake);
  claim.risky = true;
  // The handshake holds both directions (begin), so the output is free.
  for (;;) {
    std::error_code failed;
    const tls_step step = engine_->handshake(failed);
    // Whatever it made goes out first, an alert after a failure included
    // (so the peer learns why).
    if (engine_->claim_output()) {
      co_await flush(no_stall_limit, error);
      if (error) {
        co_return;
      }
    }
    if (step == tls_step::done) {
      claim.risky = false;
      co_return;
    }
    if (step == tls_step::failed) {
      error = failed;
      co_return;
    }
    const std::size_t got = co_await next_.read_some(engine_->input_room(), error);
    if (error) {
      co_return;
    }
    if (got == 0) {
      error = make_error_code(tls_errc::closed_in_handshake);
      co_return;
    }
    engine_->feed(engine_->input_room().first(got));
  }
}

template <class Stream>
task<void> tls_stream<Stream>::handshake() {
  std::error_code error;
  co_await handshake(error);
  throw_if(error, "canopy::io::tls_stream::handshake");
}

template <class Stream>
task<std::size_t> tls_stream<Stream>::read_some(std::span<std::byte> buffer,
                                                std::error_code& error) {
  return read_some_until(buffer, clock::time_point::max(), error);
}

template <class Stream>
task<std::size_t> tls_stream<Stream>::read_some_until(std::span<std::byte> buffer,
                                                      clock::time_point deadline,
                                                      std::error_code& error) {
  co_await detail::coop_point();
  error.clear();
  if (!engine_->begin(tls_operation::read, error)) {
    co_return 0;
  }
  operation_claim claim(*engine_, tls_operation::read);
  if (buffer.empty()) {
    // As a tcp_stream's: 0 at once, nothing taken, not EOF. A wait for a
    // byte it cannot take would last for ever on an idle connection.
    if (!next_.is_open()) {
      error = std::make_error_code(std::errc::bad_file_descriptor);
    }
    co_return 0;
  }
  for (;;) {
    std::size_t got = 0;
    const tls_step step = engine_->read(buffer, got, error);
    // A read may produce records (a KeyUpdate's answer): they go out now
    // unless a writer holds the socket, which then sends them with its own.
    if (engine_->claim_output_if_pending()) {
      std::error_code flushed;
      claim.risky = true;
      co_await flush(no_stall_limit, flushed);
      if (flushed) {
        error = flushed;
        co_return 0;
      }
      claim.risky = false;
    }
    switch (step) {
      case tls_step::done:
        co_return got;
      case tls_step::eof:
        co_return 0;
      case tls_step::failed:
        co_return 0;
      case tls_step::want_read:
        break;
    }
    // Cancel-safe, and so is the deadline: a read cancelled or timed out
    // here loses nothing (the next layer's operation keeps the bytes of a
    // receive that lost a race; the engine holds what it was fed).
    auto receive = receive_from(next_, engine_->input_room());
    detail::io_result arrived;
    if (receive.ready()) {
      arrived = receive.result();
    } else if (deadline == clock::time_point::max()) {
      co_await canopy::wait_on(receive);
      arrived = receive.result();
    } else if (co_await canopy::with_deadline(deadline, receive)) {
      arrived = receive.result();
    } else {
      // Bytes the socket holds at the deadline win over it, as in the
      // streams' read_some_until: a TCP receive on io_uring never asks the
      // socket before its request waits, so ask it now (kept bytes first).
      arrived.count = next_.try_read_some(engine_->input_room(), arrived.error);
      if (arrived.error == std::errc::resource_unavailable_try_again) {
        error = std::make_error_code(std::errc::timed_out);
        co_return 0;
      }
    }
    if (arrived.error) {
      error = arrived.error;
      claim.risky = true;
      co_return 0;
    }
    if (arrived.count == 0) {
      error = make_error_code(tls_errc::truncated);
      engine_->note_input_end();
      claim.risky = true;
      co_return 0;
    }
    engine_->feed(engine_->input_room().first(arrived.count));
  }
}

template <class Stream>
task<std::size_t> tls_stream<Stream>::read_some(std::span<std::byte> buffer) {
  std::error_code error;
  const std::size_t got = co_await read_some(buffer, error);
  throw_if(error, "canopy::io::tls_stream::read_some");
  co_return got;
}

template <class Stream>
task<void> tls_stream<Stream>::write_all(std::span<const std::byte> data, std::error_code& error) {
  return write_all_within(data, no_stall_limit, error);
}

template <class Stream>
task<void> tls_stream<Stream>::write_all_within(std::span<const std::byte> data,
                                                std::chrono::milliseconds stall_limit,
                                                std::error_code& error) {
  co_await detail::coop_point();
  error.clear();
  if (!engine_->begin(tls_operation::write, error)) {
    co_return;
  }
  operation_claim claim(*engine_, tls_operation::write);
  if (data.empty()) {
    // Nothing to encrypt or send: as the next layer's write of nothing,
    // at once, and an error only where that layer is not open.
    if (!next_.is_open()) {
      error = std::make_error_code(std::errc::bad_file_descriptor);
    }
    co_return;
  }
  claim.risky = true;
  while (!data.empty()) {
    const std::span<const std::byte> chunk =
        data.first(std::min(data.size(), detail::tls_write_chunk));
    if (engine_->write(chunk, error) != tls_step::done) {
      co_return;
    }
    while (!engine_->claim_output()) {
      co_await canopy::yield_now();  // a reader sends a record of its own; ours go next
    }
    co_await flush(stall_limit, error);
    if (error) {
      co_return;
    }
    data = data.subspan(chunk.size());
  }
  claim.risky = false;
}

template <class Stream>
task<void> tls_stream<Stream>::write_all(std::span<const std::byte> data) {
  std::error_code error;
  co_await write_all(data, error);
  throw_if(error, "canopy::io::tls_stream::write_all");
}

template <class Stream>
task<void> tls_stream<Stream>::shutdown(std::error_code& error) {
  error.clear();
  if (!engine_->begin(tls_operation::shutdown, error)) {
    co_return;
  }
  operation_claim claim(*engine_, tls_operation::shutdown);
  claim.risky = true;
  if (engine_->shutdown(error) != tls_step::done) {
    co_return;
  }
  while (!engine_->claim_output()) {
    co_await canopy::yield_now();
  }
  co_await flush(no_stall_limit, error);
  if (!error) {
    claim.risky = false;
  }
}

template <class Stream>
task<void> tls_stream<Stream>::shutdown() {
  std::error_code error;
  co_await shutdown(error);
  throw_if(error, "canopy::io::tls_stream::shutdown");
}

template <class Stream>
std::string_view tls_stream<Stream>::alpn() const noexcept {
  return engine_->alpn();
}
template <class Stream>
std::string_view tls_stream<Stream>::server_name() const noexcept {
  return engine_->server_name();
}
template <class Stream>
std::string_view tls_stream<Stream>::version() const noexcept {
  return engine_->version();
}
template <class Stream>
bool tls_stream<Stream>::peer_verified() const noexcept {
  return engine_->peer_verified();
}
template <class Stream>
std::string tls_stream<Stream>::peer_subject() const {
  return engine_->peer_subject();
}
template <class Stream>
bool tls_stream<Stream>::usable() const noexcept {
  return engine_ != nullptr && engine_->usable();
}
template <class Stream>
void* tls_stream<Stream>::native_handle() const noexcept {
  return engine_->native_handle();
}

template <class Stream>
tls_session tls_stream<Stream>::session() const noexcept {
  return engine_->session();
}
template <class Stream>
void tls_stream<Stream>::offer_session(const tls_session& session) {
  if (!engine_->offer_session(session)) {
    throw std::logic_error(
        "canopy::io::tls_stream::offer_session: only a client stream, before its handshake");
  }
}
template <class Stream>
bool tls_stream<Stream>::resumed() const noexcept {
  return engine_->resumed();
}

template class tls_stream<tcp_stream>;
template class tls_stream<unix_stream>;

}  // namespace canopy::io
