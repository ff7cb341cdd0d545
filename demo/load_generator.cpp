// canopy_load — a closed-loop load generator written on Canopy: N
// clients to 127.0.0.1:PORT, each sending one request and waiting for its
// answer before the next, for a fixed time.
//
//   canopy_load --port P [--connections N] [--seconds S] [--threads T]
//               [--mode http|http-close|echo] [--message-bytes B] [--warmup S]
//               [--progress] [--json] [--label TEXT]
//
//   http        GET / HTTP/1.1 on one keep-alive connection per client; the
//               answer must be 200 with a body (Content-Length framing); a
//               wrong status or a closed connection is an error.
//   http-close  one connection per request: each client connects, sends
//               GET / with Connection: close, reads the whole answer (the
//               same checks) and closes, then connects again.
//   echo        B bytes (default 64) sent, the same B bytes expected back.
//
// Latency is per round trip (write of the request to the end of the
// answer; in http-close from the start of the connect), in a log-linear
// histogram (demo/latency_histogram.hpp). The first --warmup seconds
// (default 0.2) are not counted. --progress prints a live line (requests/s
// and p99 so far) every 250 ms when stdout is a terminal. The summary is
// human-readable, or one JSON line with --json:
//   {"label":..,"mode":..,"connections":..,"seconds":..,"requests":..,
//    "requests_per_second":..,"p50_us":..,"p99_us":..,"p999_us":..,"errors":..}
// Exit status: 0, or 1 when any error happened (connect, reset, bad answer),
// 2 for a usage error.
#include <unistd.h>

#include <atomic>
#include <canopy/io.hpp>
#include <canopy/task.hpp>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "latency_histogram.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using canopy::demo::latency_histogram;

struct options {
  unsigned port = 0;
  unsigned connections = 50;
  double seconds = 3;
  double warmup = 0.2;
  unsigned threads = 1;
  bool echo = false;
  bool close_each = false;  // http-close: a connection per request
  unsigned message_bytes = 64;
  bool progress = false;
  bool json = false;
  std::string label = "canopy_load";
};

struct connection_state {
  latency_histogram latencies;
  std::atomic<std::uint64_t> errors{0};
  std::string first_error;  // written by the connection's task only, read after join
};

[[noreturn]] void usage(const std::string& message) {
  std::fprintf(
      stderr,
      "canopy_load: %s\nusage: canopy_load --port P [--connections N] [--seconds S] "
      "[--threads T] [--mode http|http-close|echo] [--message-bytes B] [--warmup S] [--progress] "
      "[--json] [--label TEXT]\n",
      message.c_str());
  std::exit(2);
}

template <class Number>
Number parse_or_exit(std::string_view text, const char* what) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    usage(std::string(what) + " takes a number, not '" + std::string(text) + "'");
  }
  return value;
}

options parse(int argc, char** argv) {
  options parsed;
  for (int i = 1; i < argc; ++i) {
    const std::string_view argument = argv[i];
    auto next = [&]() -> std::string_view {
      if (i + 1 >= argc) {
        usage(std::string(argument) + " needs a value");
      }
      return argv[++i];
    };
    if (argument == "--port") {
      parsed.port = parse_or_exit<unsigned>(next(), "--port");
    } else if (argument == "--connections") {
      parsed.connections = parse_or_exit<unsigned>(next(), "--connections");
    } else if (argument == "--seconds") {
      parsed.seconds = parse_or_exit<double>(next(), "--seconds");
    } else if (argument == "--warmup") {
      parsed.warmup = parse_or_exit<double>(next(), "--warmup");
    } else if (argument == "--threads") {
      parsed.threads = parse_or_exit<unsigned>(next(), "--threads");
    } else if (argument == "--message-bytes") {
      parsed.message_bytes = parse_or_exit<unsigned>(next(), "--message-bytes");
    } else if (argument == "--mode") {
      const std::string_view mode = next();
      if (mode != "http" && mode != "http-close" && mode != "echo") {
        usage("--mode is http, http-close or echo");
      }
      parsed.echo = mode == "echo";
      parsed.close_each = mode == "http-close";
    } else if (argument == "--progress") {
      parsed.progress = true;
    } else if (argument == "--json") {
      parsed.json = true;
    } else if (argument == "--label") {
      parsed.label = std::string(next());
    } else {
      usage("unknown argument '" + std::string(argument) + "'");
    }
  }
  if (parsed.port == 0 || parsed.port > 65535) {
    usage("--port 1..65535 is required");
  }
  if (parsed.connections == 0 || parsed.connections > 10000 || parsed.threads == 0 ||
      parsed.seconds <= 0 || parsed.seconds > 3600 || parsed.warmup < 0 ||
      parsed.message_bytes == 0 || parsed.message_bytes > (1U << 20)) {
    usage("--connections 1..10000, --threads >= 1, --seconds 0..3600, --message-bytes 1..1MiB");
  }
  return parsed;
}

// The length of a complete HTTP response at the start of `data` (0: not
// complete yet); `status` gets its status code. -1 when it cannot be one.
long response_length(std::string_view data, int& status) {
  const std::size_t head_end = data.find("\r\n\r\n");
  if (head_end == std::string_view::npos) {
    return data.size() > 16384 ? -1 : 0;
  }
  if (data.size() < 12 || data.substr(0, 9) != "HTTP/1.1 ") {
    return -1;
  }
  status = (data[9] - '0') * 100 + (data[10] - '0') * 10 + (data[11] - '0');
  const std::string_view head = data.substr(0, head_end);
  std::size_t length = 0;
  const std::size_t field = head.find("\r\nContent-Length: ");
  if (field != std::string_view::npos) {
    const char* begin = head.data() + field + 18;
    const auto [end, error] = std::from_chars(begin, head.data() + head.size(), length);
    if (error != std::errc() || end == begin) {
      return -1;
    }
  }
  const std::size_t total = head_end + 4 + length;
  return data.size() >= total ? static_cast<long>(total) : 0;
}

void record_error(connection_state& state, std::string what) {
  state.errors.store(state.errors.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (state.first_error.empty()) {
    state.first_error = std::move(what);
  }
}

enum class answer_state : std::uint8_t { incomplete, complete, failed };

// Whether the first `have` bytes of `buffer` are the whole answer to
// `request`. A complete answer with a status other than 200 is recorded as
// an error but still complete (the connection stays usable); `failed` means
// the connection cannot go on (the error is recorded).
answer_state check_answer(const options& settings, const std::string& request,
                          const std::vector<char>& buffer, std::size_t have,
                          connection_state& state) {
  if (settings.echo) {
    if (have < request.size()) {
      return answer_state::incomplete;
    }
    if (std::memcmp(buffer.data(), request.data(), request.size()) != 0) {
      record_error(state, "echo mismatch");
      return answer_state::failed;
    }
    return answer_state::complete;
  }
  int status = 0;
  const long length = response_length(std::string_view(buffer.data(), have), status);
  if (length < 0) {
    record_error(state, "malformed response");
    return answer_state::failed;
  }
  if (length == 0) {
    if (have == buffer.size()) {
      record_error(state, "response too long");
      return answer_state::failed;
    }
    return answer_state::incomplete;
  }
  if (static_cast<std::size_t>(length) != have) {
    record_error(state, "more bytes than one response");
    return answer_state::failed;
  }
  if (status != 200) {
    record_error(state, "status " + std::to_string(status));
  }
  return answer_state::complete;
}

// One client: request after request until stop_at, on one keep-alive
// connection (http, echo) or on a connection of its own each (http-close:
// connect, one request, the whole answer, close; the latency counts the
// connect). The first error ends the client.
canopy::task<void> drive(const options& settings, connection_state& state,
                         clock_type::time_point measure_from, clock_type::time_point stop_at) {
  std::string request;
  if (settings.echo) {
    request.assign(settings.message_bytes, 'x');
  } else if (settings.close_each) {
    request = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  } else {
    request = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  }
  const std::span<const std::byte> request_bytes(reinterpret_cast<const std::byte*>(request.data()),
                                                 request.size());
  std::vector<char> buffer(std::max<std::size_t>(65536, settings.message_bytes));
  std::optional<canopy::io::tcp_stream> stream;
  std::error_code error;
  while (clock_type::now() < stop_at) {
    clock_type::time_point sent_at = clock_type::now();
    if (!stream) {
      stream.emplace(co_await canopy::io::tcp_stream::connect(
          canopy::io::endpoint::loopback_v4(static_cast<std::uint16_t>(settings.port)), error));
      if (error) {
        record_error(state, "connect: " + error.message());
        co_return;
      }
      if (!settings.close_each) {
        sent_at = clock_type::now();  // keep-alive: the connect is not part of a request
      }
    }
    co_await stream->write_all(request_bytes, error);
    if (error) {
      record_error(state, "write: " + error.message());
      co_return;
    }
    std::size_t have = 0;
    answer_state answer = answer_state::incomplete;
    while (answer == answer_state::incomplete) {
      const std::size_t got = co_await stream->read_some(
          std::as_writable_bytes(std::span(buffer).subspan(have)), error);
      if (error || got == 0) {
        record_error(state,
                     error ? "read: " + error.message() : "the server closed the connection");
        co_return;
      }
      have += got;
      answer = check_answer(settings, request, buffer, have, state);
    }
    if (answer == answer_state::failed) {
      co_return;
    }
    const clock_type::time_point received_at = clock_type::now();
    if (sent_at >= measure_from) {
      state.latencies.record(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(received_at - sent_at).count()));
    }
    if (settings.close_each) {
      stream.reset();  // closes it before the next connect
    }
  }
}

struct totals {
  std::uint64_t requests = 0;
  std::uint64_t errors = 0;
  std::array<std::uint64_t, latency_histogram::bucket_count> counts{};
};

totals gather(const std::vector<std::unique_ptr<connection_state>>& states) {
  totals sum;
  for (const auto& state : states) {
    sum.requests += state->latencies.count();
    sum.errors += state->errors.load(std::memory_order_relaxed);
    state->latencies.add_to(sum.counts);
  }
  return sum;
}

double micros(std::uint64_t nanoseconds) { return static_cast<double>(nanoseconds) / 1000.0; }

}  // namespace

int main(int argc, char** argv) {
  const options settings = parse(argc, argv);
  canopy::executor_config config;
  config.worker_count = settings.threads;
  canopy::executor pool(canopy::io::with_reactor(config));

  std::vector<std::unique_ptr<connection_state>> states;
  for (unsigned i = 0; i < settings.connections; ++i) {
    states.push_back(std::make_unique<connection_state>());
  }
  const clock_type::time_point start = clock_type::now();
  const auto warmup = std::chrono::duration_cast<clock_type::duration>(
      std::chrono::duration<double>(settings.warmup));
  const auto measured = std::chrono::duration_cast<clock_type::duration>(
      std::chrono::duration<double>(settings.seconds));
  const clock_type::time_point measure_from = start + warmup;
  const clock_type::time_point stop_at = measure_from + measured;

  std::vector<canopy::join_handle<void>> handles;
  handles.reserve(states.size());
  for (auto& state : states) {
    handles.push_back(pool.spawn(drive(settings, *state, measure_from, stop_at)));
  }

  const bool live = settings.progress && isatty(STDOUT_FILENO) == 1;
  if (live) {
    while (clock_type::now() < stop_at) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      const clock_type::time_point now = clock_type::now();
      if (now <= measure_from) {
        continue;
      }
      const totals so_far = gather(states);
      const double elapsed =
          std::chrono::duration<double>(std::min(now, stop_at) - measure_from).count();
      std::printf("\r  %5.1f s  %10.0f requests/s  p99 %8.1f us  errors %llu   ", elapsed,
                  static_cast<double>(so_far.requests) / elapsed,
                  micros(latency_histogram::quantile(so_far.counts, 0.99)),
                  static_cast<unsigned long long>(so_far.errors));
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  for (auto& handle : handles) {
    handle.get();
  }
  pool.shutdown();

  const totals result = gather(states);
  const double rate = static_cast<double>(result.requests) / settings.seconds;
  const double p50 = micros(latency_histogram::quantile(result.counts, 0.50));
  const double p99 = micros(latency_histogram::quantile(result.counts, 0.99));
  const double p999 = micros(latency_histogram::quantile(result.counts, 0.999));
  std::string first_error;
  for (const auto& state : states) {
    if (!state->first_error.empty()) {
      first_error = state->first_error;
      break;
    }
  }
  if (settings.json) {
    std::printf(
        "{\"label\":\"%s\",\"mode\":\"%s\",\"connections\":%u,\"seconds\":%.3f,\"requests\":%llu,"
        "\"requests_per_second\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,"
        "\"errors\":%llu}\n",
        settings.label.c_str(),
        settings.echo ? "echo" : (settings.close_each ? "http-close" : "http"),
        settings.connections, settings.seconds, static_cast<unsigned long long>(result.requests),
        rate, p50, p99, p999, static_cast<unsigned long long>(result.errors));
  } else {
    std::printf(
        "%s: %u connections, %.1f s: %llu %s, %.0f/s; latency p50 %.1f us, p99 %.1f us, "
        "p99.9 %.1f us; errors %llu\n",
        settings.label.c_str(), settings.connections, settings.seconds,
        static_cast<unsigned long long>(result.requests),
        settings.echo ? "round trips" : "requests", rate, p50, p99, p999,
        static_cast<unsigned long long>(result.errors));
  }
  if (!first_error.empty()) {
    std::fprintf(stderr, "canopy_load: first error: %s\n", first_error.c_str());
  }
  return result.errors == 0 ? 0 : 1;
}
