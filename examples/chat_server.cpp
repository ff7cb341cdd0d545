// chat_server — a line-based chat room on TCP and a Unix-domain socket
// (chat_server.hpp is the server; this is its command line).
//
//   chat_server [--port N] [--unix PATH] [--host NAME] [--transcript FILE]
//               [--max-seconds S] [--drain-seconds S]
//
// Listens on NAME:N (default 127.0.0.1, port 0: a free one) and, with
// --unix, on PATH; prints "listening on ADDRESS[ and PATH]". Try it with
// `nc 127.0.0.1 PORT` or `nc -U PATH`: the first line you type is your
// name, every later line goes to everyone else. SIGINT or SIGTERM (or
// --max-seconds, default 60, so it always ends by itself) stops it
// gracefully: no new connections, everyone is told and may hang up within
// --drain-seconds (default 2), then the rest are closed. Prints one line of
// statistics and exits 0.
#include "chat_server.hpp"

#include <canopy/io.hpp>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

namespace {

bool parse_number(std::string_view text, unsigned long& value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr,
               "chat_server: %s\nusage: chat_server [--port N] [--unix PATH] [--host NAME] "
               "[--transcript FILE] [--max-seconds S] [--drain-seconds S]\n",
               message);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  chat::options config;
  for (int i = 1; i < argc; ++i) {
    const std::string_view argument = argv[i];
    if (i + 1 >= argc) {
      usage("every option takes a value");
    }
    const std::string_view value = argv[++i];
    unsigned long number = 0;
    if (argument == "--port") {
      if (!parse_number(value, number) || number > 65535) {
        usage("--port takes 0..65535");
      }
      config.port = static_cast<std::uint16_t>(number);
    } else if (argument == "--unix") {
      config.unix_path = value;
    } else if (argument == "--host") {
      config.host = value;
    } else if (argument == "--transcript") {
      config.transcript = value;
    } else if (argument == "--max-seconds" || argument == "--drain-seconds") {
      if (!parse_number(value, number) || number == 0 || number > 86400) {
        usage("--max-seconds and --drain-seconds take 1..86400");
      }
      (argument == "--max-seconds" ? config.max_run : config.drain_deadline) =
          std::chrono::seconds(number);
    } else {
      usage("unknown option");
    }
  }

  try {
    // Before any other thread: the server blocks SIGINT and SIGTERM here,
    // so that every thread it starts inherits the mask.
    chat::server server(config);
    std::printf("listening on %s%s%s\n", server.tcp_endpoint().to_string().c_str(),
                config.unix_path.empty() ? "" : " and ", config.unix_path.c_str());
    std::fflush(stdout);
    const chat::report done = server.wait();
    std::printf(
        "stopped by %s: clients=%zu lines=%zu dropped=%zu rejected=%zu forced=%zu "
        "drain_ms=%lld\n",
        done.signal == 0 ? "max-seconds" : (done.signal == SIGINT ? "SIGINT" : "SIGTERM"),
        done.clients, done.lines, done.dropped, done.rejected, done.forced,
        static_cast<long long>(done.drain_time.count()));
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "chat_server: %s\n", failure.what());
    return 1;
  }
  return 0;
}
