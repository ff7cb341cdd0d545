// The chat server of examples/chat_server.hpp, driven in-process: 20 TCP
// and 5 Unix-domain clients each send K lines and every line reaches every
// other client exactly once, in order per sender; a client that never
// reads is dropped without holding up the others; SIGTERM stops the server
// gracefully (clients told, channels flushed, everyone gone well within
// the deadline); a client that ignores the shutdown is closed at the
// deadline; max_run stops it without a signal; bad names and lines too
// long are rejected. Loopback only, bounded in count and time; no
// descriptor leaks. SIGINT and SIGTERM are blocked in the main thread
// before any other thread starts (the signal_set rule).
#include "examples/chat_server.hpp"

#include <dirent.h>
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <canopy/io.hpp>
#include <canopy/sync.hpp>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/watchdog.hpp"

using canopy::task;
using namespace std::chrono_literals;

namespace {

std::size_t open_fd_count() {
  DIR* directory = opendir("/proc/self/fd");
  REQUIRE(directory != nullptr);
  std::size_t count = 0;
  while (const dirent* entry = readdir(directory)) {
    if (entry->d_name[0] != '.') {
      ++count;
    }
  }
  closedir(directory);
  return count - 1;
}

std::string temp_name(const char* tag) {
  return "/tmp/canopy_chat_test_" + std::to_string(::getpid()) + "_" + tag;
}

canopy::executor_config client_config() {
  canopy::executor_config config = canopy::io::with_reactor();
  config.worker_count = 2;
  return config;
}

// Shared by the client tasks of one case.
struct crowd {
  std::size_t size = 0;
  std::atomic<std::size_t> joined{0};
  std::atomic<std::size_t> complete{0};
  canopy::async_event go;  // set when all joined: nobody sends before
  // Pacing (0: none): a sender waits after each `batch` lines until each of
  // `pacers` receivers has them (a receiver releases a permit per batch),
  // so that a client that does read is never far enough behind to look slow.
  std::size_t batch = 0;
  std::size_t pacers = 0;
  canopy::semaphore progress{0};
};

struct client_log {
  std::map<std::string, std::vector<int>> heard;  // sender -> numbers, in arrival order
  std::size_t notices = 0;
  bool told_shutdown = false;
  bool reached_eof = false;
};

template <class Stream>
task<void> send_lines(Stream& stream, int count, std::size_t padding, crowd& everyone) {
  const std::string pad(padding, 'x');
  for (int k = 0; k < count; ++k) {
    const std::string line = std::to_string(k) + " " + pad + "\n";
    co_await canopy::io::write_all(stream, line);
    if (everyone.batch != 0 && (k + 1) % everyone.batch == 0) {
      co_await everyone.progress.acquire(everyone.pacers);
    }
  }
}

// Joins as `name`, waits for the whole crowd, sends `count` lines, reads
// until `expected` lines from others arrived, then until the server's EOF.
template <class Stream>
task<client_log> run_client(Stream stream, std::string name, int count, std::size_t padding,
                            std::size_t expected, crowd& everyone) {
  client_log log;
  co_await canopy::io::write_all(stream, name + "\n");
  canopy::io::buffered_reader<Stream&> lines(stream, 8192);
  std::size_t received = 0;
  bool welcomed = false;
  canopy::join_handle<void> writer;
  for (;;) {
    std::error_code error;
    std::optional<std::string> line = co_await lines.read_line(1 << 20, error);
    if (!line) {
      log.reached_eof = !error;
      break;
    }
    if (line->starts_with("* ")) {
      ++log.notices;
      log.told_shutdown = log.told_shutdown || *line == "* server shutting down";
      if (*line == "* welcome " + name) {
        welcomed = true;
      }
    } else {
      const std::size_t colon = line->find(": ");
      REQUIRE(colon != std::string::npos);
      log.heard[line->substr(0, colon)].push_back(std::stoi(line->substr(colon + 2)));
      if (++received == expected) {
        everyone.complete.fetch_add(1);
      }
      if (everyone.batch != 0 && received % everyone.batch == 0) {
        everyone.progress.release(1);
      }
    }
    if (welcomed && !writer.valid()) {
      if (everyone.joined.fetch_add(1) + 1 == everyone.size) {
        everyone.go.set();
      }
      co_await everyone.go;
      writer = canopy::spawn(send_lines(stream, count, padding, everyone));
      if (expected == 0) {
        everyone.complete.fetch_add(1);
      }
    }
  }
  if (writer.valid()) {
    co_await writer;
  }
  co_return log;
}

// Polls `counter` until it reaches `target` or about `seconds` (scaled).
bool wait_until(const std::atomic<std::size_t>& counter, std::size_t target, double seconds) {
  const auto limit = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(seconds * canopy::testing::timeout_scale());
  while (counter.load() < target && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(2ms);
  }
  return counter.load() >= target;
}

// A plain blocking client (no executor): for the misbehaving ones.
class plain_client {
 public:
  plain_client(const canopy::io::endpoint& server, int receive_buffer = 0) {
    fd_ = ::socket(server.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    if (receive_buffer > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    }
    const timeval limit{static_cast<time_t>(20 * canopy::testing::timeout_scale()), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    REQUIRE(::connect(fd_, server.data(), server.size()) == 0);
  }
  plain_client(const plain_client&) = delete;
  plain_client& operator=(const plain_client&) = delete;
  ~plain_client() { ::close(fd_); }

  void send(const std::string& text) const {
    REQUIRE(::send(fd_, text.data(), text.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(text.size()));
  }
  // The next line; empty at EOF, an error or the receive timeout.
  std::string line() const {
    std::string text;
    char c = 0;
    while (::recv(fd_, &c, 1, 0) == 1) {
      if (c == '\n') {
        return text;
      }
      text += c;
    }
    return {};
  }
  // Lines until EOF (or an error): how many.
  std::size_t drain() const {
    std::size_t count = 0;
    char chunk[4096];
    for (ssize_t got = 0; (got = ::recv(fd_, chunk, sizeof chunk, 0)) > 0;) {
      count += static_cast<std::size_t>(std::count(chunk, chunk + got, '\n'));
    }
    return count;
  }

 private:
  int fd_ = -1;
};

chat::options make_options(std::chrono::milliseconds max_run, std::chrono::milliseconds deadline) {
  chat::options config;
  config.max_run = max_run;
  config.drain_deadline = deadline;
  config.max_line = 64;
  return config;
}

}  // namespace

TEST_CASE("chat: every line reaches every other client once, in order; SIGTERM drains") {
  canopy::io::block_signals({SIGINT, SIGTERM});  // before any thread: the watchdog's too
  const canopy::testing::watchdog guard("chat fan-out", 120);
  const std::size_t fds_before = open_fd_count();
  const std::string socket_path = temp_name("fanout.sock");
  const std::string transcript = temp_name("fanout.log");
  ::unlink(transcript.c_str());
  constexpr int tcp_clients = 20;
  constexpr int unix_clients = 5;
  constexpr int total = tcp_clients + unix_clients;
  constexpr int lines_each = 20;
  {
    chat::report done;
    std::vector<client_log> logs;
    {
      chat::options config;
      config.unix_path = socket_path;
      config.transcript = transcript;
      config.max_run = 120s;
      config.drain_deadline = 10s;
      config.outbox_lines = 1024;  // all a client receives here: none of them is slow
      chat::server server(config);
      const canopy::io::endpoint address = server.tcp_endpoint();
      canopy::executor clients(client_config());
      crowd everyone;
      everyone.size = total;
      std::vector<canopy::join_handle<client_log>> handles;
      for (int i = 0; i < total; ++i) {
        const std::string name = "c" + std::to_string(i);
        const std::size_t expected = static_cast<std::size_t>((total - 1) * lines_each);
        if (i < tcp_clients) {
          handles.push_back(clients.spawn([](canopy::io::endpoint where, std::string who,
                                             std::size_t want, crowd* all) -> task<client_log> {
            canopy::io::tcp_stream stream = co_await canopy::io::tcp_stream::connect(where);
            co_return co_await run_client(std::move(stream), who, lines_each, 0, want, *all);
          }(address, name, expected, &everyone)));
        } else {
          handles.push_back(clients.spawn([](std::string where, std::string who, std::size_t want,
                                             crowd* all) -> task<client_log> {
            canopy::io::unix_stream stream =
                co_await canopy::io::unix_stream::connect(canopy::io::unix_endpoint::path(where));
            co_return co_await run_client(std::move(stream), who, lines_each, 0, want, *all);
          }(socket_path, name, expected, &everyone)));
        }
      }
      REQUIRE(wait_until(everyone.complete, total, 60));
      const auto signalled_at = std::chrono::steady_clock::now();
      REQUIRE(::kill(::getpid(), SIGTERM) == 0);
      done = server.wait();
      CHECK(std::chrono::steady_clock::now() - signalled_at < 10s);
      for (auto& handle : handles) {
        logs.push_back(handle.get());
      }
    }
    CHECK(done.signal == SIGTERM);
    CHECK(done.clients == total);
    CHECK(done.lines == static_cast<std::size_t>(total * lines_each));
    CHECK(done.dropped == 0);
    CHECK(done.forced == 0);
    CHECK(done.drain_time < 10s);
    std::vector<int> in_order(lines_each);
    for (int k = 0; k < lines_each; ++k) {
      in_order[static_cast<std::size_t>(k)] = k;
    }
    for (int i = 0; i < total; ++i) {
      const client_log& log = logs[static_cast<std::size_t>(i)];
      CHECK(log.reached_eof);
      CHECK(log.told_shutdown);
      CHECK(log.heard.size() == static_cast<std::size_t>(total - 1));
      CHECK(log.heard.count("c" + std::to_string(i)) == 0);  // not its own lines
      for (const auto& [sender, numbers] : log.heard) {
        CHECK_MESSAGE(numbers == in_order, "client c", i, " from ", sender);
      }
    }
    // run_blocking wrote each line to the transcript.
    std::ifstream written(transcript);
    std::size_t transcript_lines = 0;
    for (std::string line; std::getline(written, line);) {
      ++transcript_lines;
    }
    CHECK(transcript_lines == static_cast<std::size_t>(total * lines_each));
  }
  struct stat info {};
  CHECK(::stat(socket_path.c_str(), &info) != 0);  // the listener removed its file
  ::unlink(transcript.c_str());
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE("chat: a client that never reads is dropped without holding up the others") {
  canopy::io::block_signals({SIGINT, SIGTERM});
  const canopy::testing::watchdog guard("chat slow client", 120);
  const std::size_t fds_before = open_fd_count();
  constexpr int readers = 3;
  constexpr int talked = 4000;
  {
    chat::options config;
    config.max_run = 120s;
    config.drain_deadline = 10s;
    config.send_buffer = 16 * 1024;
    chat::server server(config);
    const canopy::io::endpoint address = server.tcp_endpoint();
    plain_client silent(address, 4096);
    silent.send("silent\n");
    REQUIRE(silent.line() == "* welcome silent");  // joined; never reads again

    canopy::executor clients(client_config());
    crowd everyone;
    everyone.size = readers + 1;
    everyone.batch = 100;
    everyone.pacers = readers;
    std::vector<canopy::join_handle<client_log>> handles;
    for (int i = 0; i <= readers; ++i) {
      const bool talker = i == readers;
      handles.push_back(
          clients.spawn([](canopy::io::endpoint where, std::string who, int count, std::size_t want,
                           crowd* all) -> task<client_log> {
            canopy::io::tcp_stream stream = co_await canopy::io::tcp_stream::connect(where);
            co_return co_await run_client(std::move(stream), who, count, 150, want, *all);
          }(address, talker ? "talker" : "r" + std::to_string(i), talker ? talked : 0,
                                       talker ? 0 : static_cast<std::size_t>(talked), &everyone)));
    }
    // ~600 KB to each reader; the silent one holds at most 256 lines and
    // its socket buffers (~80 KB), so it must be dropped.
    const auto started = std::chrono::steady_clock::now();
    REQUIRE(wait_until(everyone.complete, readers + 1, 60));
    CHECK(std::chrono::steady_clock::now() - started < 30s * canopy::testing::timeout_scale());
    const std::size_t silent_got = silent.drain();  // what was queued, then EOF or reset
    CHECK(silent_got < static_cast<std::size_t>(talked));

    REQUIRE(::kill(::getpid(), SIGTERM) == 0);
    const chat::report done = server.wait();
    CHECK(done.dropped == 1);
    CHECK(done.forced == 0);
    std::vector<int> in_order(talked);
    for (int k = 0; k < talked; ++k) {
      in_order[static_cast<std::size_t>(k)] = k;
    }
    for (int i = 0; i <= readers; ++i) {
      const client_log log = handles[static_cast<std::size_t>(i)].get();
      CHECK(log.reached_eof);
      if (i < readers) {
        REQUIRE(log.heard.count("talker") == 1);
        CHECK(log.heard.at("talker") == in_order);
      }
    }
  }
  CHECK(open_fd_count() == fds_before);
}

TEST_CASE(
    "chat: bad input is rejected; max_run stops it; a deaf client is closed at the deadline") {
  canopy::io::block_signals({SIGINT, SIGTERM});
  const canopy::testing::watchdog guard("chat deadline", 60);
  const std::size_t fds_before = open_fd_count();
  {
    const auto deadline = 300ms;
    const auto max_run = 1000ms * canopy::testing::timeout_scale();
    const auto started = std::chrono::steady_clock::now();
    chat::server server(
        make_options(std::chrono::duration_cast<std::chrono::milliseconds>(max_run), deadline));
    const canopy::io::endpoint address = server.tcp_endpoint();

    plain_client spaced(address);
    spaced.send("two words\n");
    CHECK(spaced.line().starts_with("* error: a name"));
    CHECK(spaced.drain() == 0);  // then closed

    plain_client verbose(address);
    verbose.send("verbose\n");
    REQUIRE(verbose.line() == "* welcome verbose");
    verbose.send(std::string(100, 'y'));  // no newline, past max_line
    CHECK(verbose.line() == "* error: line too long");
    CHECK(verbose.drain() == 0);

    // Joins, then ignores the shutdown notice and keeps its socket open.
    plain_client deaf(address);
    deaf.send("deaf\n");
    REQUIRE(deaf.line() == "* welcome deaf");

    const chat::report done = server.wait();
    const auto took = std::chrono::steady_clock::now() - started;
    CHECK(done.signal == 0);  // max_run, no signal
    CHECK(done.rejected == 2);
    CHECK(done.forced == 1);
    CHECK(done.drain_time >= deadline);
    CHECK(done.drain_time < deadline + 5s * canopy::testing::timeout_scale());
    CHECK(took >= max_run);
    CHECK(took < max_run + deadline + 5s * canopy::testing::timeout_scale());
    CHECK(deaf.line() == "* server shutting down");
    CHECK(deaf.drain() == 0);  // the server closed it
  }
  CHECK(open_fd_count() == fds_before);
}
