// trace: the Chrome trace-event JSON and the SVG an executor writes at
// shutdown when tracing is on (executor/trace.hpp), read back with a JSON
// parser and checked event by event.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "executor/executor.hpp"
#include "tests/watchdog.hpp"

namespace {

// ---- a small JSON reader: enough of RFC 8259 to check the trace strictly.
struct json;
using json_object = std::map<std::string, json>;
using json_array = std::vector<json>;
struct json {
  std::variant<std::nullptr_t, bool, double, std::string, json_array, json_object> value;
  [[nodiscard]] const json_object& object() const { return std::get<json_object>(value); }
  [[nodiscard]] const json_array& array() const { return std::get<json_array>(value); }
  [[nodiscard]] const std::string& string() const { return std::get<std::string>(value); }
  [[nodiscard]] double number() const { return std::get<double>(value); }
  [[nodiscard]] bool has(const std::string& key) const { return object().contains(key); }
  [[nodiscard]] const json& at(const std::string& key) const { return object().at(key); }
};

class json_reader {
 public:
  explicit json_reader(std::string text) : text_(std::move(text)) {}
  json document() {
    json result = value();
    skip_space();
    if (at_ != text_.size()) {
      fail("text after the document");
    }
    return result;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("invalid JSON at byte " + std::to_string(at_) + ": " + what);
  }
  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\r' || text_[at_] == '\t')) {
      ++at_;
    }
  }
  char peek() {
    skip_space();
    if (at_ >= text_.size()) {
      fail("unexpected end");
    }
    return text_[at_];
  }
  void expect(char wanted) {
    if (peek() != wanted) {
      fail(std::string("expected '") + wanted + "'");
    }
    ++at_;
  }
  bool literal(const char* word) {
    const std::string text(word);
    if (text_.compare(at_, text.size(), text) == 0) {
      at_ += text.size();
      return true;
    }
    return false;
  }
  json value() {
    const char first = peek();
    if (first == '{') {
      return {object()};
    }
    if (first == '[') {
      return {array()};
    }
    if (first == '"') {
      return {string()};
    }
    if (literal("true")) {
      return {true};
    }
    if (literal("false")) {
      return {false};
    }
    if (literal("null")) {
      return {nullptr};
    }
    return {number()};
  }
  json_object object() {
    expect('{');
    json_object result;
    if (peek() == '}') {
      ++at_;
      return result;
    }
    for (;;) {
      std::string key = string();
      expect(':');
      if (!result.emplace(key, value()).second) {
        fail("duplicate key " + key);
      }
      if (peek() == ',') {
        ++at_;
        continue;
      }
      expect('}');
      return result;
    }
  }
  json_array array() {
    expect('[');
    json_array result;
    if (peek() == ']') {
      ++at_;
      return result;
    }
    for (;;) {
      result.push_back(value());
      if (peek() == ',') {
        ++at_;
        continue;
      }
      expect(']');
      return result;
    }
  }
  std::string string() {
    expect('"');
    std::string result;
    while (at_ < text_.size() && text_[at_] != '"') {
      const char next = text_[at_++];
      if (static_cast<unsigned char>(next) < 0x20) {
        fail("control character in a string");
      }
      if (next == '\\') {
        if (at_ >= text_.size()) {
          fail("escape at the end");
        }
        const char escaped = text_[at_++];
        if (std::string("\"\\/bfnrt").find(escaped) == std::string::npos) {
          fail("unsupported escape");
        }
        result += escaped;
        continue;
      }
      result += next;
    }
    expect('"');
    return result;
  }
  double number() {
    const std::size_t begin = at_;
    if (at_ < text_.size() && text_[at_] == '-') {
      ++at_;
    }
    const std::size_t digits = at_;
    while (at_ < text_.size() &&
           (std::isdigit(static_cast<unsigned char>(text_[at_])) != 0 || text_[at_] == '.' ||
            text_[at_] == 'e' || text_[at_] == 'E' || text_[at_] == '+' || text_[at_] == '-')) {
      ++at_;
    }
    if (at_ == digits) {
      fail("expected a value");
    }
    return std::stod(text_.substr(begin, at_ - begin));
  }

  std::string text_;
  std::size_t at_ = 0;
};

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  REQUIRE_MESSAGE(file.good(), "cannot open " << path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string temporary_path(const std::string& name) {
  const char* directory = std::getenv("TMPDIR");
  return std::string(directory != nullptr ? directory : "/tmp") + "/canopy_trace_test_" +
         std::to_string(::getpid()) + "_" + name;
}

struct trace_summary {
  std::size_t task_spans = 0;
  std::size_t steals = 0;
  std::size_t flows = 0;
  std::size_t parks = 0;
  std::size_t outside_spawns = 0;
  std::set<double> worker_tids;
};

// Checks every rule a consumer of the trace relies on; returns the counts.
trace_summary check_trace(const json& document, std::size_t workers) {
  trace_summary summary;
  REQUIRE(document.has("traceEvents"));
  const json_array& events = document.at("traceEvents").array();
  std::map<double, std::string> thread_names;
  // Per track: the X spans, to check that spans on one track nest properly.
  std::map<double, std::vector<std::pair<double, double>>> spans;
  std::map<double, int> flow_starts;
  std::map<double, int> flow_ends;
  for (const json& event : events) {
    const std::string& phase = event.at("ph").string();
    const double tid = event.at("tid").number();
    REQUIRE(event.at("pid").number() == 1);
    if (phase == "M") {
      if (event.at("name").string() == "thread_name") {
        thread_names[tid] = event.at("args").at("name").string();
      }
      continue;
    }
    REQUIRE_MESSAGE(tid >= 1, "tid " << tid);
    REQUIRE_MESSAGE(tid <= static_cast<double>(workers + 1), "tid " << tid);
    const double ts = event.at("ts").number();
    REQUIRE(ts >= 0);
    const std::string& name = event.at("name").string();
    if (phase == "X") {
      const double duration = event.at("dur").number();
      REQUIRE(duration >= 0);
      spans[tid].emplace_back(ts, ts + duration);
      if (name == "task") {
        ++summary.task_spans;
        summary.worker_tids.insert(tid);
        const std::string& ended = event.at("args").at("ended").string();
        CHECK((ended == "completed" || ended == "suspended" || ended == "yielded"));
      } else if (name == "parked") {
        ++summary.parks;
      }
    } else if (phase == "i") {
      if (name == "steal") {
        ++summary.steals;
        CHECK(tid <= static_cast<double>(workers));
      } else if (name == "spawn") {
        ++summary.outside_spawns;
        CHECK(tid == static_cast<double>(workers + 1));
      }
    } else if (phase == "s") {
      ++flow_starts[event.at("id").number()];
    } else if (phase == "f") {
      ++flow_ends[event.at("id").number()];
      CHECK(tid <= static_cast<double>(workers));  // a wake lands on a worker
    } else {
      FAIL("unexpected phase " << phase);
    }
  }
  // One named track per worker, and one for outside threads.
  for (std::size_t index = 0; index < workers; ++index) {
    CHECK(thread_names[static_cast<double>(index + 1)] == "worker " + std::to_string(index));
  }
  CHECK(thread_names[static_cast<double>(workers + 1)] == "outside threads");
  // Every flow has exactly one start and one end.
  CHECK(flow_starts.size() == flow_ends.size());
  for (const auto& [id, count] : flow_starts) {
    CHECK(count == 1);
    CHECK(flow_ends[id] == 1);
  }
  summary.flows = flow_starts.size();
  // Spans on one track are closed and nest: sorted by start, each one either
  // ends before the next starts or contains it (a task run at a join).
  // Timestamps are microseconds with ns resolution: allow 1 ns of rounding.
  constexpr double slack = 0.0011;
  for (auto& track : spans) {
    const double tid = track.first;
    auto& list = track.second;
    std::sort(list.begin(), list.end(), [](const auto& left, const auto& right) {
      return left.first < right.first || (left.first == right.first && left.second > right.second);
    });
    std::vector<double> open_ends;
    for (const auto& span : list) {
      const double start = span.first;
      const double end = span.second;
      while (!open_ends.empty() && open_ends.back() <= start + slack) {
        open_ends.pop_back();
      }
      if (!open_ends.empty()) {
        REQUIRE_MESSAGE(end <= open_ends.back() + slack,
                        "span [" << start << ", " << end << "] overlaps its parent on tid " << tid);
      }
      open_ends.push_back(end);
    }
  }
  return summary;
}

// Work that makes every kind of event: fan-out inside tasks (steals),
// spawns from this thread, and pauses long enough for workers to park, so
// the next spawn wakes them (flows).
canopy::executor_stats run_traced_workload(canopy::executor_config config) {
  canopy::executor pool(std::move(config));
  const int rounds = 6;
  for (int round = 0; round < rounds; ++round) {
    auto parent = pool.spawn([&pool] {
      std::vector<canopy::join_handle<int>> children;
      children.reserve(64);
      for (int child = 0; child < 64; ++child) {
        children.push_back(pool.spawn([child] {
          volatile int sink = 0;
          for (int step = 0; step < 2000; ++step) {
            sink = sink + step * child;
          }
          return child;
        }));
      }
      return static_cast<int>(children.size());
    });
    CHECK(parent.get() == 64);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  canopy::executor_stats stats;
  // Let the children finish (detached handles were dropped by the parent).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    stats = pool.stats();
    if (stats.total().tasks_run >= static_cast<std::uint64_t>(rounds * 65) &&
        stats.sleeping_workers == pool.worker_count()) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  pool.shutdown();
  return pool.stats();
}

}  // namespace

TEST_CASE("a traced executor writes Chrome trace JSON whose events all check out") {
  canopy::testing::watchdog guard("trace json", 60);
  const std::string path = temporary_path("events.json");
  const std::string svg = path.substr(0, path.size() - 5) + ".svg";
  canopy::executor_config config;
  config.worker_count = 2;
  config.trace_path = path;
  config.trace_events_per_worker = std::size_t{1} << 16;  // far more than the workload's events
  const canopy::executor_stats stats = run_traced_workload(config);

  const json document = json_reader(read_file(path)).document();
  const trace_summary summary = check_trace(document, 2);
  const canopy::worker_stats total = stats.total();
  // Nothing dropped: one span per task run, one instant per steal.
  CHECK(summary.task_spans == total.tasks_run);
  CHECK(summary.steals == total.steals);
  CHECK(summary.parks == total.parks);
  CHECK(summary.outside_spawns == 6);
  // The pauses park the workers; the next round's spawn wakes one, drawn
  // as a flow from this thread's track to the worker's.
  CHECK(summary.flows >= 1);
  CHECK(summary.worker_tids.size() >= 1);

  const std::string picture = read_file(svg);
  CHECK(picture.starts_with("<svg"));
  CHECK(picture.find("worker 0") != std::string::npos);
  CHECK(picture.find("worker 1") != std::string::npos);
  CHECK(picture.ends_with("</svg>\n"));
  std::remove(path.c_str());
  std::remove(svg.c_str());
}

TEST_CASE("a small ring keeps the newest events and still writes a valid trace") {
  canopy::testing::watchdog guard("trace ring", 60);
  const std::string path = temporary_path("ring.json");
  canopy::executor_config config;
  config.worker_count = 2;
  config.trace_path = path;
  config.trace_events_per_worker = canopy::executor_config::min_trace_events;
  const canopy::executor_stats stats = run_traced_workload(config);
  const trace_summary summary =
      check_trace(json_reader(read_file(path)).document(), config.worker_count);
  CHECK(summary.task_spans <= 2 * config.trace_events_per_worker);
  CHECK(summary.task_spans <= stats.total().tasks_run);
  std::remove(path.c_str());
  std::remove((path.substr(0, path.size() - 5) + ".svg").c_str());
}

TEST_CASE("CANOPY_TRACE turns tracing on; the path without .json gets .svg appended") {
  canopy::testing::watchdog guard("trace env", 60);
  const std::string path = temporary_path("from_env");
  REQUIRE(::setenv("CANOPY_TRACE", path.c_str(), 1) == 0);
  {
    canopy::executor_config config;
    config.worker_count = 1;
    canopy::executor pool(config);
    CHECK(pool.spawn([] { return 5; }).get() == 5);
  }
  REQUIRE(::unsetenv("CANOPY_TRACE") == 0);
  const trace_summary summary = check_trace(json_reader(read_file(path)).document(), 1);
  CHECK(summary.task_spans == 1);
  CHECK(read_file(path + ".svg").starts_with("<svg"));
  std::remove(path.c_str());
  std::remove((path + ".svg").c_str());
}

TEST_CASE("tracing problems are reported, not fatal") {
  canopy::executor_config config;
  config.worker_count = 1;
  config.trace_events_per_worker = 10;
  CHECK_THROWS_WITH_AS(canopy::executor{config}, doctest::Contains("trace_events_per_worker"),
                       std::invalid_argument);
  // An unwritable path: shutdown says so on stderr and completes.
  config.trace_events_per_worker = canopy::executor_config::min_trace_events;
  config.trace_path = "/nonexistent-directory/for/canopy/trace.json";
  canopy::executor pool(config);
  CHECK(pool.spawn([] { return 1; }).get() == 1);
  pool.shutdown();
  std::ifstream missing(config.trace_path);
  CHECK_FALSE(missing.good());
}
