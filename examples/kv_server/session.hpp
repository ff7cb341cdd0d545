// session.hpp — one client connection of the kv_server: read a line, run
// the command, write its one-line reply, until QUIT, EOF, an error, an
// over-long line, or the server's stop.
//
// Each read races canopy::stopped(token): once the server stops, a client
// waiting between commands is let go at once, while a command already read
// is answered first (its write acknowledged only once logged). No registry
// of sockets: the race is the whole mechanism.
#pragma once

#include <atomic>
#include <canopy/io.hpp>
#include <canopy/io/buffered.hpp>
#include <canopy/race.hpp>
#include <canopy/task.hpp>
#include <chrono>
#include <cstddef>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <utility>

#include "protocol.hpp"
#include "store.hpp"

namespace kv {

// Counters for the stats page: relaxed, as they order nothing.
struct counters {
  std::atomic<std::size_t> open{0};      // connections now
  std::atomic<std::size_t> accepted{0};  // connections ever
  std::atomic<std::size_t> commands{0};  // lines answered (errors too)
  std::atomic<std::size_t> errors{0};    // of those, -ERR replies
  // Where the open connections are now: waiting for a line (or the stop),
  // running a command, writing its reply. A connection that stays in one
  // of them says where it is stuck.
  std::atomic<std::size_t> waiting{0};
  std::atomic<std::size_t> executing{0};
  std::atomic<std::size_t> replying{0};
};

// Counts a connection in one of the gauges above while it lives.
class in_phase {
 public:
  explicit in_phase(std::atomic<std::size_t>& gauge) noexcept : gauge_(&gauge) {
    gauge_->fetch_add(1, std::memory_order_relaxed);
  }
  in_phase(const in_phase&) = delete;
  in_phase& operator=(const in_phase&) = delete;
  ~in_phase() { gauge_->fetch_sub(1, std::memory_order_relaxed); }

 private:
  std::atomic<std::size_t>* gauge_;
};

// The reply to one parsed command; `quit` is set by QUIT.
inline canopy::task<std::string> execute(store& data, command cmd, bool& quit) {
  switch (cmd.what) {
    case verb::get: {
      std::optional<std::string> value = co_await data.get(cmd.key);
      co_return value ? reply_value(*value) : reply_nil();
    }
    case verb::set: {
      log_writer::receipt logged = co_await data.set(cmd.key, std::move(cmd.value));
      const bool written = co_await logged.wait();
      co_return written ? reply_ok() : reply_error("the log write failed");
    }
    case verb::del: {
      std::optional<log_writer::receipt> logged = co_await data.del(cmd.key);
      if (!logged) {
        co_return reply_integer(0);
      }
      const bool written = co_await logged->wait();
      co_return written ? reply_integer(1) : reply_error("the log write failed");
    }
    case verb::expire: {
      const bool found = co_await data.expire(cmd.key, std::chrono::seconds(cmd.seconds));
      co_return reply_integer(found ? 1 : 0);
    }
    case verb::ttl: {
      const long long left = co_await data.ttl(cmd.key);
      co_return reply_integer(left);
    }
    case verb::ping:
      co_return "+PONG\n";
    case verb::quit:
      quit = true;
      co_return "+BYE\n";
    case verb::invalid:
      break;
  }
  co_return reply_error(cmd.error);
}

inline canopy::task<void> serve_client(canopy::io::tcp_stream stream, store& data, counters& stats,
                                       std::stop_token stop) {
  stats.open.fetch_add(1, std::memory_order_relaxed);
  struct leave {
    counters* stats;
    ~leave() { stats->open.fetch_sub(1, std::memory_order_relaxed); }
  } const on_exit{&stats};

  canopy::io::buffered_reader<canopy::io::tcp_stream&> reader(stream);
  for (bool quit = false; !quit;) {
    std::error_code error;
    // One phase at a time: each emplace leaves the last one, the loop's
    // next turn or the task's end leaves the last of all.
    std::optional<in_phase> phase(std::in_place, stats.waiting);
    auto got = co_await canopy::race(reader.read_line(max_line, error), canopy::stopped(stop));
    if (!got.has_value<0>()) {
      co_return;  // stopping, and no line had come
    }
    std::optional<std::string> line = std::move(got.get<0>());
    std::string reply;
    if (!line && error == std::errc::message_size) {
      reply = reply_error("line longer than 4096 bytes");
      quit = true;  // the rest of that line would be read as commands
    } else if (!line) {
      co_return;  // EOF or a reset
    } else {
      command cmd = parse(*line);
      phase.emplace(stats.executing);
      reply = co_await execute(data, std::move(cmd), quit);
    }
    stats.commands.fetch_add(1, std::memory_order_relaxed);
    if (reply.front() == '-') {
      stats.errors.fetch_add(1, std::memory_order_relaxed);
    }
    std::error_code write_error;
    phase.emplace(stats.replying);
    co_await canopy::io::write_all(stream, reply, write_error);
    if (write_error) {
      co_return;
    }
  }
  (void)stream.shutdown(SHUT_WR);  // a polite end; the socket closes as the task ends
}

}  // namespace kv
