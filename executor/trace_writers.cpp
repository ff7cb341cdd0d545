// The trace's two files (docs/tracing.md): Chrome trace-event JSON and an
// SVG timeline, drawn from a trace_snapshot. Called once, at shutdown.
#include "trace_writers.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unordered_set>

namespace canopy::detail {

namespace {

const char* outcome_name(std::uint8_t outcome) noexcept {
  switch (static_cast<run_outcome>(outcome)) {
    case run_outcome::completed:
      return "completed";
    case run_outcome::suspended:
      return "suspended";
    case run_outcome::yielded:
      return "yielded";
    case run_outcome::to_host:
      return "to_host";
  }
  return "unknown";
}

const char* reason_name(std::uint8_t reason) noexcept {
  switch (static_cast<wake_reason>(reason)) {
    case wake_reason::none:
      return "none";
    case wake_reason::permit:
      return "permit";
    case wake_reason::jec:
      return "jec";
    case wake_reason::shutdown:
      return "shutdown";
    case wake_reason::io:
      return "io";
  }
  return "unknown";
}

// Microseconds with three decimals, exactly (Chrome's ts/dur unit is µs).
void append_micros(std::string& out, std::uint64_t ns) {
  std::array<char, 32> text{};
  const int length = std::snprintf(text.data(), text.size(), "%llu.%03llu",
                                   static_cast<unsigned long long>(ns / 1000),
                                   static_cast<unsigned long long>(ns % 1000));
  out.append(text.data(), static_cast<std::size_t>(length));
}

void append_number(std::string& out, std::uint64_t value) { out += std::to_string(value); }

// {"name":NAME,"cat":CAT,"ph":PH,"pid":1,"tid":TID,"ts":TS  (left open)
void open_event(std::string& out, const char* name, const char* category, const char* phase,
                std::size_t tid, std::uint64_t ts_ns) {
  out += ",\n{\"name\":\"";
  out += name;
  out += "\",\"cat\":\"";
  out += category;
  out += "\",\"ph\":\"";
  out += phase;
  out += "\",\"pid\":1,\"tid\":";
  append_number(out, tid);
  out += ",\"ts\":";
  append_micros(out, ts_ns);
}

void append_duration(std::string& out, std::uint64_t start_ns, std::uint64_t end_ns) {
  out += ",\"dur\":";
  append_micros(out, end_ns >= start_ns ? end_ns - start_ns : 0);
}

bool write_whole_file(const std::string& path, const std::string& text, std::string& message) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    message = "canopy: cannot write the trace to '" + path + "': " + std::strerror(errno);
    return false;
  }
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed) {
    message = "canopy: writing the trace to '" + path + "' failed: " + std::strerror(errno);
    return false;
  }
  return true;
}

// Flow ids present at both ends (a wake sent and the park it ended): only
// those become arrows, so that a ring that dropped one end leaves no
// dangling flow.
std::unordered_set<std::uint64_t> matched_flows(const std::vector<trace_lane>& lanes) {
  std::unordered_set<std::uint64_t> sent;
  std::unordered_set<std::uint64_t> received;
  for (const trace_lane& one : lanes) {
    for (const trace_event& event : one.events) {
      if (event.kind == trace_kind::wake) {
        sent.insert(event.value);
      } else if (event.kind == trace_kind::park && event.value != 0) {
        received.insert(event.value);
      }
    }
  }
  std::unordered_set<std::uint64_t> both;
  for (const std::uint64_t flow : sent) {
    if (received.contains(flow)) {
      both.insert(flow);
    }
  }
  return both;
}

}  // namespace

void write_trace_json(const trace_snapshot& trace, std::string& out) {
  const std::vector<trace_lane>& lanes = trace.lanes;
  const std::unordered_set<std::uint64_t> flows = matched_flows(lanes);
  out += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"workers\":";
  append_number(out, trace.workers);
  if (!trace.driver.empty()) {
    out += ",\"io_backend\":\"" + trace.driver + "\"";
  }
  out += "},\"traceEvents\":[\n";
  out += R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"canopy executor"}})";
  for (std::size_t index = 0; index < lanes.size(); ++index) {
    const std::size_t tid = index + 1;
    out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":";
    append_number(out, tid);
    out += ",\"args\":{\"name\":\"" + lanes[index].name + "\"}}";
    out += ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":";
    append_number(out, tid);
    out += ",\"args\":{\"sort_index\":";
    append_number(out, tid);
    out += "}}";
  }
  constexpr std::uint64_t marker_ns = 1;  // width of the slices that anchor flow arrows
  for (std::size_t index = 0; index < lanes.size(); ++index) {
    const std::size_t tid = index + 1;
    for (const trace_event& event : lanes[index].events) {
      switch (event.kind) {
        case trace_kind::run:
          open_event(out, "task", "run", "X", tid, event.start_ns);
          append_duration(out, event.start_ns, event.end_ns);
          out += ",\"args\":{\"slot\":";
          append_number(out, event.value);
          out += ",\"ended\":\"";
          out += outcome_name(event.detail);
          out += "\",\"depth\":";
          append_number(out, event.extra);
          out += "}}";
          break;
        case trace_kind::search:
          open_event(out, "searching", "idle", "X", tid, event.start_ns);
          append_duration(out, event.start_ns, event.end_ns);
          out += "}";
          break;
        case trace_kind::park:
          open_event(out, "parked", "idle", "X", tid, event.start_ns);
          append_duration(out, event.start_ns, event.end_ns);
          out += ",\"args\":{\"woken_by\":\"";
          out += reason_name(event.detail);
          out += "\"}}";
          if (flows.contains(event.value)) {
            open_event(out, "woken", "wake", "X", tid, event.end_ns);
            append_duration(out, 0, marker_ns);
            out += "}";
            open_event(out, "wake", "wake", "f", tid, event.end_ns);
            out += ",\"bp\":\"e\",\"id\":";
            append_number(out, event.value);
            out += "}";
          }
          break;
        case trace_kind::steal:
          open_event(out, "steal", "steal", "i", tid, event.start_ns);
          out += ",\"s\":\"t\",\"args\":{\"from_partition\":";
          if (event.value == trace_buffer::no_partition) {
            out += "\"a LIFO slot\"";
          } else {
            append_number(out, event.value);
          }
          out += "}}";
          break;
        case trace_kind::wake:
          if (flows.contains(event.value)) {
            open_event(out, "wake", "wake", "X", tid, event.start_ns);
            append_duration(out, 0, marker_ns);
            out += ",\"args\":{\"worker\":";
            append_number(out, event.extra);
            out += ",\"by\":\"";
            out += reason_name(event.detail);
            out += "\"}}";
            open_event(out, "wake", "wake", "s", tid, event.start_ns);
            out += ",\"id\":";
            append_number(out, event.value);
            out += "}";
          }
          break;
        case trace_kind::spawn:
          open_event(out, "spawn", "spawn", "i", tid, event.start_ns);
          out += ",\"s\":\"t\"}";
          break;
        case trace_kind::reactor_poll:
          open_event(out, "reactor poll", "io", "X", tid, event.start_ns);
          append_duration(out, event.start_ns, event.end_ns);
          out += ",\"args\":{\"events\":";
          append_number(out, event.value);
          out += "}}";
          break;
      }
    }
  }
  out += "\n]}\n";
}

// The SVG: one lane per worker (and one for outside threads), time left to
// right. Each pixel column of a lane takes the colour of the state the lane
// spent most of that column in (running, searching, parked), so the file
// stays small however many events there are; steals are red ticks above the
// lane, wakes arrows from the waking lane to the woken one.
void write_trace_svg(const trace_snapshot& trace, std::string& out) {
  const std::vector<trace_lane>& lanes = trace.lanes;
  const std::unordered_set<std::uint64_t> flows = matched_flows(lanes);

  constexpr int columns = 1000;
  constexpr int left = 120;
  constexpr int top = 40;
  constexpr int lane_height = 26;
  constexpr int lane_gap = 10;
  constexpr std::size_t max_arrows = 4000;
  std::uint64_t first = ~std::uint64_t{0};
  std::uint64_t last = 0;
  for (const trace_lane& one : lanes) {
    for (const trace_event& event : one.events) {
      first = std::min(first, event.start_ns);
      last = std::max(last, event.end_ns);
    }
  }
  if (first > last) {
    first = last = 0;
  }
  // A worker whose ring overflowed kept only the end of the run: start the
  // picture where every such worker's record starts, so no lane is blank
  // for lack of records.
  bool overwritten = false;
  for (std::size_t index = 0; index < trace.workers; ++index) {
    if (lanes[index].overwritten && !lanes[index].events.empty()) {
      overwritten = true;
      first = std::max(first, lanes[index].events.front().end_ns);
    }
  }
  last = std::max(first, last);
  const double span = static_cast<double>(std::max<std::uint64_t>(last - first, 1));
  const double ns_per_column = span / columns;
  auto column_of = [&](std::uint64_t ns) {
    return std::clamp(static_cast<int>(static_cast<double>(ns - first) / ns_per_column), 0,
                      columns - 1);
  };
  auto lane_top = [&](std::size_t index) {
    return top + static_cast<int>(index) * (lane_height + lane_gap);
  };
  const int height = lane_top(lanes.size()) + 50;
  const int width = left + columns + 60;

  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
         "\" height=\"" + std::to_string(height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out +=
      "<defs><marker id=\"head\" viewBox=\"0 0 6 6\" refX=\"6\" refY=\"3\" markerWidth=\"5\" "
      "markerHeight=\"5\" orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 z\" "
      "fill=\"context-stroke\"/></marker></defs>\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  {
    std::array<char, 200> title{};
    std::snprintf(title.data(), title.size(),
                  "Canopy trace: %zu workers, %.3f ms%s (green running, yellow searching, "
                  "grey parked, red tick steal, black tick outside spawn, arrow wake)",
                  trace.workers, span / 1e6, overwritten ? ", the end of the run" : "");
    out += "<text x=\"" + std::to_string(left) + "\" y=\"20\">" + title.data() + "</text>\n";
  }

  constexpr std::array<const char*, 3> colours{"#3a9a4a", "#e8c440", "#b8b8b8"};
  for (std::size_t index = 0; index < lanes.size(); ++index) {
    const int y = lane_top(index);
    out += "<text x=\"8\" y=\"" + std::to_string(y + lane_height / 2 + 4) + "\">" +
           lanes[index].name + "</text>\n";
    out += "<rect x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(y) + "\" width=\"" +
           std::to_string(columns) + "\" height=\"" + std::to_string(lane_height) +
           "\" fill=\"#f4f4f4\"/>\n";
    // Time per state (running, searching, parked) in each column.
    std::vector<std::array<double, 3>> time(columns, {0.0, 0.0, 0.0});
    std::vector<bool> stolen(columns, false);
    std::vector<bool> spawned(columns, false);
    for (const trace_event& event : lanes[index].events) {
      if (event.end_ns < first) {
        continue;  // before the picture starts
      }
      int state = -1;
      if (event.kind == trace_kind::run && event.extra == 0) {
        state = 0;
      } else if (event.kind == trace_kind::search) {
        state = 1;
      } else if (event.kind == trace_kind::park) {
        state = 2;
      } else if (event.kind == trace_kind::reactor_poll) {
        state = 2;
      } else if (event.kind == trace_kind::steal) {
        stolen[static_cast<std::size_t>(column_of(event.start_ns))] = true;
      } else if (event.kind == trace_kind::spawn) {
        spawned[static_cast<std::size_t>(column_of(event.start_ns))] = true;
      }
      if (state < 0) {
        continue;
      }
      for (int column = column_of(event.start_ns); column <= column_of(event.end_ns); ++column) {
        const double begin = static_cast<double>(first) + column * ns_per_column;
        const double end = begin + ns_per_column;
        const double overlap = std::min(end, static_cast<double>(event.end_ns)) -
                               std::max(begin, static_cast<double>(event.start_ns));
        if (overlap > 0) {
          time[static_cast<std::size_t>(column)][static_cast<std::size_t>(state)] += overlap;
        }
      }
    }
    int run_start = 0;
    int run_state = -1;
    auto flush = [&](int end_column) {
      if (run_state >= 0) {
        out += "<rect x=\"" + std::to_string(left + run_start) + "\" y=\"" + std::to_string(y) +
               "\" width=\"" + std::to_string(end_column - run_start) + "\" height=\"" +
               std::to_string(lane_height) + "\" fill=\"" +
               colours[static_cast<std::size_t>(run_state)] + "\"/>\n";
      }
    };
    for (int column = 0; column <= columns; ++column) {
      int state = -1;
      if (column < columns) {
        const auto& shares = time[static_cast<std::size_t>(column)];
        const double total = shares[0] + shares[1] + shares[2];
        if (total >= 0.2 * ns_per_column) {
          state = static_cast<int>(std::max_element(shares.begin(), shares.end()) - shares.begin());
        }
      }
      if (state != run_state || column == columns) {
        flush(column);
        run_start = column;
        run_state = state;
      }
    }
    for (int column = 0; column < columns; ++column) {
      if (spawned[static_cast<std::size_t>(column)]) {
        out += "<line x1=\"" + std::to_string(left + column) + "\" y1=\"" + std::to_string(y + 4) +
               "\" x2=\"" + std::to_string(left + column) + "\" y2=\"" +
               std::to_string(y + lane_height - 4) + "\" stroke=\"black\" stroke-width=\"1\"/>\n";
      }
      if (stolen[static_cast<std::size_t>(column)]) {
        out += "<line x1=\"" + std::to_string(left + column) + "\" y1=\"" + std::to_string(y - 4) +
               "\" x2=\"" + std::to_string(left + column) + "\" y2=\"" + std::to_string(y + 6) +
               "\" stroke=\"#d02020\" stroke-width=\"1.5\"/>\n";
      }
    }
  }
  // Wakes: an arrow from the waking lane to the woken worker's lane, at the
  // time the wake was sent; one per column and pair of lanes.
  std::unordered_set<std::uint64_t> drawn;
  for (std::size_t index = 0; index < lanes.size() && drawn.size() < max_arrows; ++index) {
    for (const trace_event& event : lanes[index].events) {
      if (event.kind != trace_kind::wake || !flows.contains(event.value) ||
          event.start_ns < first) {
        continue;
      }
      const int column = column_of(event.start_ns);
      const std::uint64_t key = (static_cast<std::uint64_t>(column) << 40) |
                                (static_cast<std::uint64_t>(index) << 20) | event.extra;
      if (!drawn.insert(key).second) {
        continue;
      }
      const int from = lane_top(index) + lane_height / 2;
      const int to_lane = lane_top(event.extra);
      const int to = to_lane + (to_lane > from ? 2 : lane_height - 2);
      const char* colour =
          event.detail == static_cast<std::uint8_t>(wake_reason::permit) ? "#2050d0" : "#9030b0";
      out += "<line x1=\"" + std::to_string(left + column) + "\" y1=\"" + std::to_string(from) +
             "\" x2=\"" + std::to_string(left + column) + "\" y2=\"" + std::to_string(to) +
             "\" stroke=\"" + colour + "\" stroke-width=\"1\" marker-end=\"url(#head)\"/>\n";
      if (drawn.size() >= max_arrows) {
        break;
      }
    }
  }
  // Time axis.
  const int axis = lane_top(lanes.size()) + 4;
  for (int tick = 0; tick <= 5; ++tick) {
    const int x = left + tick * columns / 5;
    std::array<char, 32> label{};
    std::snprintf(label.data(), label.size(), "%.3f ms", span * tick / 5 / 1e6);
    out += "<line x1=\"" + std::to_string(x) + "\" y1=\"" + std::to_string(axis) + "\" x2=\"" +
           std::to_string(x) + "\" y2=\"" + std::to_string(axis + 6) +
           "\" stroke=\"black\"/>\n<text x=\"" + std::to_string(x - 20) + "\" y=\"" +
           std::to_string(axis + 20) + "\">" + label.data() + "</text>\n";
  }
  out += "</svg>\n";
}

std::error_code write_trace_files(const trace_snapshot& trace, const std::string& json_path,
                                  const std::string& svg_path, std::string& error_message) {
  std::string json;
  write_trace_json(trace, json);
  if (!write_whole_file(json_path, json, error_message)) {
    return std::make_error_code(std::errc::io_error);
  }
  std::string svg;
  write_trace_svg(trace, svg);
  if (!write_whole_file(svg_path, svg, error_message)) {
    return std::make_error_code(std::errc::io_error);
  }
  return {};
}

}  // namespace canopy::detail
