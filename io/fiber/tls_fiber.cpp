// The fiber forms of tls_stream's operations: the task forms' steps
// (tls_stream.cpp), each wait a this_fiber call on the next layer.
#include "tls_fiber.hpp"

#include <algorithm>
#include <vector>

#include "../../fiber/this_fiber.hpp"
#include "../tls/tls_claims.hpp"
#include "../tls/tls_engine.hpp"
#include "fiber_io.hpp"

namespace canopy::this_fiber {

using io::tcp_stream;
using io::tls_errc;
using io::tls_stream;
using io::unix_stream;

namespace {

using io::detail::operation_claim;
using io::detail::output_claim;
using io::detail::tls_engine;
using io::detail::tls_operation;
using io::detail::tls_step;

void throw_if(const std::error_code& error, const char* what) {
  if (error) {
    throw std::system_error(error, what);
  }
}

// Sends what the engine produced; the caller holds the output claim,
// which this releases once nothing is left (or on an error).
template <class Stream>
void flush(Stream& next, tls_engine& engine, std::error_code& error) {
  output_claim claim(engine);
  std::vector<std::byte> out;
  while (engine.take_output(out)) {
    write_all(next, std::span<const std::byte>(out), error);
    if (error) {
      return;
    }
  }
  claim.held = false;  // take_output released it
}

template <class Stream>
void do_handshake(tls_stream<Stream>& stream, std::error_code& error) {
  canopy::detail::checked_current_fiber("canopy::io::this_fiber on a tls_stream");
  error.clear();
  tls_engine& engine = stream.engine_for_fiber_forms();
  if (!engine.begin(tls_operation::handshake, error)) {
    return;
  }
  operation_claim claim(engine, tls_operation::handshake);
  claim.risky = true;
  for (;;) {
    std::error_code failed;
    const tls_step step = engine.handshake(failed);
    if (engine.claim_output()) {  // an alert after a failure included
      flush(stream.next_layer(), engine, error);
      if (error) {
        return;
      }
    }
    if (step == tls_step::done) {
      claim.risky = false;
      return;
    }
    if (step == tls_step::failed) {
      error = failed;
      return;
    }
    const std::size_t got = read_some(stream.next_layer(), engine.input_room(), error);
    if (error) {
      return;
    }
    if (got == 0) {
      error = make_error_code(tls_errc::closed_in_handshake);
      return;
    }
    engine.feed(engine.input_room().first(got));
  }
}

template <class Stream>
std::size_t do_read_some(tls_stream<Stream>& stream, std::span<std::byte> buffer,
                         std::error_code& error) {
  canopy::detail::checked_current_fiber("canopy::io::this_fiber on a tls_stream");
  error.clear();
  tls_engine& engine = stream.engine_for_fiber_forms();
  if (!engine.begin(tls_operation::read, error)) {
    return 0;
  }
  operation_claim claim(engine, tls_operation::read);
  if (buffer.empty()) {  // as the task form: 0 at once, an error only on a closed stream
    if (!stream.next_layer().is_open()) {
      error = std::make_error_code(std::errc::bad_file_descriptor);
    }
    return 0;
  }
  for (;;) {
    std::size_t got = 0;
    const tls_step step = engine.read(buffer, got, error);
    if (engine.claim_output_if_pending()) {  // a KeyUpdate's answer
      std::error_code flushed;
      claim.risky = true;
      flush(stream.next_layer(), engine, flushed);
      if (flushed) {
        error = flushed;
        return 0;
      }
      claim.risky = false;
    }
    switch (step) {
      case tls_step::done:
        return got;
      case tls_step::eof:
      case tls_step::failed:
        return 0;
      case tls_step::want_read:
        break;
    }
    // A fiber unwinding from here loses nothing (the engine holds what it
    // was fed; the next layer keeps a lost race's bytes).
    const std::size_t arrived = read_some(stream.next_layer(), engine.input_room(), error);
    if (error) {
      claim.risky = true;
      return 0;
    }
    if (arrived == 0) {
      error = make_error_code(tls_errc::truncated);
      claim.risky = true;
      return 0;
    }
    engine.feed(engine.input_room().first(arrived));
  }
}

template <class Stream>
void do_write_all(tls_stream<Stream>& stream, std::span<const std::byte> data,
                  std::error_code& error) {
  canopy::detail::checked_current_fiber("canopy::io::this_fiber on a tls_stream");
  error.clear();
  tls_engine& engine = stream.engine_for_fiber_forms();
  if (!engine.begin(tls_operation::write, error)) {
    return;
  }
  operation_claim claim(engine, tls_operation::write);
  if (data.empty()) {  // as the task form: an error only on a closed stream
    if (!stream.next_layer().is_open()) {
      error = std::make_error_code(std::errc::bad_file_descriptor);
    }
    return;
  }
  claim.risky = true;
  while (!data.empty()) {
    const std::span<const std::byte> chunk =
        data.first(std::min(data.size(), io::detail::tls_write_chunk));
    if (engine.write(chunk, error) != tls_step::done) {
      return;
    }
    while (!engine.claim_output()) {
      canopy::this_fiber::yield();  // a reader sends a record of its own; ours go next
    }
    flush(stream.next_layer(), engine, error);
    if (error) {
      return;
    }
    data = data.subspan(chunk.size());
  }
  claim.risky = false;
}

template <class Stream>
void do_shutdown(tls_stream<Stream>& stream, std::error_code& error) {
  canopy::detail::checked_current_fiber("canopy::io::this_fiber on a tls_stream");
  error.clear();
  tls_engine& engine = stream.engine_for_fiber_forms();
  if (!engine.begin(tls_operation::shutdown, error)) {
    return;
  }
  operation_claim claim(engine, tls_operation::shutdown);
  claim.risky = true;
  if (engine.shutdown(error) != tls_step::done) {
    return;
  }
  while (!engine.claim_output()) {
    canopy::this_fiber::yield();
  }
  flush(stream.next_layer(), engine, error);
  if (!error) {
    claim.risky = false;
  }
}

}  // namespace

#define CANOPY_TLS_FIBER_FORMS(Stream)                                             \
  void handshake(tls_stream<Stream>& stream, std::error_code& error) {             \
    do_handshake(stream, error);                                                   \
  }                                                                                \
  std::size_t read_some(tls_stream<Stream>& stream, std::span<std::byte> buffer,   \
                        std::error_code& error) {                                  \
    return do_read_some(stream, buffer, error);                                    \
  }                                                                                \
  void write_all(tls_stream<Stream>& stream, std::span<const std::byte> data,      \
                 std::error_code& error) {                                         \
    do_write_all(stream, data, error);                                             \
  }                                                                                \
  void shutdown(tls_stream<Stream>& stream, std::error_code& error) {              \
    do_shutdown(stream, error);                                                    \
  }                                                                                \
  void handshake(tls_stream<Stream>& stream) {                                     \
    std::error_code error;                                                         \
    do_handshake(stream, error);                                                   \
    throw_if(error, "canopy::io::this_fiber::handshake");                          \
  }                                                                                \
  std::size_t read_some(tls_stream<Stream>& stream, std::span<std::byte> buffer) { \
    std::error_code error;                                                         \
    const std::size_t got = do_read_some(stream, buffer, error);                   \
    throw_if(error, "canopy::io::this_fiber::read_some");                          \
    return got;                                                                    \
  }                                                                                \
  void write_all(tls_stream<Stream>& stream, std::span<const std::byte> data) {    \
    std::error_code error;                                                         \
    do_write_all(stream, data, error);                                             \
    throw_if(error, "canopy::io::this_fiber::write_all");                          \
  }                                                                                \
  void shutdown(tls_stream<Stream>& stream) {                                      \
    std::error_code error;                                                         \
    do_shutdown(stream, error);                                                    \
    throw_if(error, "canopy::io::this_fiber::shutdown");                           \
  }

CANOPY_TLS_FIBER_FORMS(tcp_stream)
CANOPY_TLS_FIBER_FORMS(unix_stream)

#undef CANOPY_TLS_FIBER_FORMS

}  // namespace canopy::this_fiber
