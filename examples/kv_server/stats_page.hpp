// stats_page.hpp — the kv_server's admin endpoint on Canopy's HTTP server:
// GET /stats answers JSON {"keys":K,"connections":C,"accepted":A,
// "commands":N,"errors":E,"logged":L,"stats_requests":S,"waiting":W,
// "executing":X,"replying":R} (W + X + R open connections waiting for a
// line, running a command, writing a reply). The handler is a
// coroutine with state: it counts its own requests, and counts the keys
// under each shard's canopy::mutex, which a plain function could not await.
#pragma once

#include <atomic>
#include <canopy/io/http.hpp>
#include <canopy/task.hpp>
#include <cstddef>
#include <memory>
#include <string>

#include "log_writer.hpp"
#include "session.hpp"
#include "store.hpp"

namespace kv {

inline canopy::io::http::router stats_routes(store& data, counters& stats, log_writer& log) {
  namespace http = canopy::io::http;
  auto served = std::make_shared<std::atomic<std::size_t>>(0);
  http::router routes;
  routes.get(
      "/stats",
      [&data, &stats, &log, served](const http::request&) -> canopy::task<http::response> {
        const std::size_t asked = served->fetch_add(1, std::memory_order_relaxed) + 1;
        const std::size_t keys = co_await data.size();
        auto number = [](const std::atomic<std::size_t>& value) {
          return std::to_string(value.load(std::memory_order_relaxed));
        };
        http::response answer;
        answer.content_type = "application/json";
        answer.body =
            "{\"keys\":" + std::to_string(keys) + ",\"connections\":" + number(stats.open) +
            ",\"accepted\":" + number(stats.accepted) + ",\"commands\":" + number(stats.commands) +
            ",\"errors\":" + number(stats.errors) + ",\"logged\":" + std::to_string(log.written()) +
            ",\"stats_requests\":" + std::to_string(asked) +
            ",\"waiting\":" + number(stats.waiting) + ",\"executing\":" + number(stats.executing) +
            ",\"replying\":" + number(stats.replying) + "}\n";
        co_return answer;
      });
  return routes;
}

}  // namespace kv
