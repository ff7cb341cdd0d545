// The HTTP/1.1 server loop (io/http/http_server.hpp) against a plain blocking
// client on 127.0.0.1: keep-alive, pipelining, Connection: close, bad and
// oversized requests, a client that sends its headers too slowly, one that
// stops reading, an idle connection, and no descriptor left open
// afterwards; and against real clients, curl and ApacheBench (`ab`, Debian's
// apache2-utils; ./run.sh installs both), run as child processes with a
// time limit, against this process's server and against the example
// examples/http_hello. A missing curl or ab fails the test.
#include "io/http/http_server.hpp"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "coroutine/coroutine.hpp"
#include "io/io.hpp"
#include "io/timer/timer_binding.hpp"
#include "tests/child_process.hpp"
#include "tests/http_test_support.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

namespace http = canopy::io::http;
using namespace std::chrono_literals;

namespace {

// The largest send buffer TCP autotuning may give a socket (tcp_wmem's
// maximum; 4 MiB when it cannot be read).
std::size_t send_buffer_max() {
  std::ifstream wmem("/proc/sys/net/ipv4/tcp_wmem");
  std::size_t low = 0;
  std::size_t initial = 0;
  std::size_t high = 0;
  if (wmem >> low >> initial >> high && high > 0) {
    return high;
  }
  return std::size_t{4} << 20;
}

// The body of GET /big: more than the server's send buffer and a small
// receive buffer at the client hold together, so a client that does not
// read stalls the server's write.
const std::string& big_body() {
  static const std::string body(2 * send_buffer_max() + (std::size_t{4} << 20), 'b');
  return body;
}

void answer(const http::request& req, std::string& out) {
  if (req.target == "/") {
    http::append_response(out, 200, "OK", "text/plain", "Hello, World!", !req.keep_alive);
  } else if (req.target == "/big") {
    http::append_response(out, 200, "OK", "text/plain", big_body(), !req.keep_alive);
  } else {
    http::append_response(out, 404, "Not Found", "text/plain", std::string(req.target),
                          !req.keep_alive);
  }
}

// answer() on a free port of 127.0.0.1 for the duration of a test case,
// heads up to 1024 bytes.
class test_server : public canopy::testing::http_test_server {
 public:
  explicit test_server(std::chrono::milliseconds request_timeout = 5s,
                       std::chrono::milliseconds write_timeout = 30s)
      : http_test_server(options(request_timeout, write_timeout), &answer) {}

 private:
  static http::server_options options(std::chrono::milliseconds request_timeout,
                                      std::chrono::milliseconds write_timeout) {
    http::server_options made;
    made.request_timeout = request_timeout;
    made.write_timeout = write_timeout;
    made.limits.max_head_bytes = 1024;
    return made;
  }
};

// How a read to the end of a connection ended.
enum class ending : std::uint8_t { eof, reset, receive_timeout, other_error };

// A blocking client socket with a receive timeout (a hung server fails the
// test instead of hanging it).
class client {
 public:
  // `receive_buffer`: SO_RCVBUF before the connect (0: the default), small
  // for a client whose unread answer should back up into the server.
  explicit client(std::uint16_t port, int receive_buffer = 0)
      : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd_ >= 0);
    if (receive_buffer > 0) {
      REQUIRE(::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer) ==
              0);
    }
    // A hung server fails the test instead of hanging it (scaled for sanitizers).
    timeval timeout{static_cast<time_t>(10 * canopy::testing::timeout_scale()), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    // Receive timestamps (read_to_eof with an arrival time); on from the
    // start, so that the kernel stamps the answer whenever it arrives.
    const int on = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  }
  ~client() { ::close(fd_); }
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  void send(std::string_view data) const {
    REQUIRE(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(data.size()));
  }
  // Everything until the server closes (or the 10 s receive timeout).
  std::string read_to_eof() const {
    ending how{};
    return read_to_eof(how);
  }
  // The same, and how the reading ended.
  std::string read_to_eof(ending& how) const {
    std::string all;
    std::vector<char> buffer(65536);
    for (;;) {
      const ssize_t got = ::recv(fd_, buffer.data(), buffer.size(), 0);
      if (got > 0) {
        all.append(buffer.data(), static_cast<std::size_t>(got));
        continue;
      }
      if (got < 0 && errno == EINTR) {
        continue;
      }
      how = got == 0                                    ? ending::eof
            : errno == ECONNRESET                       ? ending::reset
            : (errno == EAGAIN || errno == EWOULDBLOCK) ? ending::receive_timeout
                                                        : ending::other_error;
      return all;
    }
  }
  // As read_to_eof(), and when the kernel received the first bytes of the
  // answer (SO_TIMESTAMPNS, CLOCK_REALTIME; empty if the kernel gave no
  // stamp). A test that times the server with it does not count the time
  // this thread waited for a CPU on a loaded machine.
  std::string read_to_eof(std::optional<std::chrono::nanoseconds>& first_arrival) const {
    first_arrival.reset();
    std::string all;
    char buffer[4096];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
    for (;;) {
      iovec vector{buffer, sizeof buffer};
      msghdr message{};
      message.msg_iov = &vector;
      message.msg_iovlen = 1;
      message.msg_control = control;
      message.msg_controllen = sizeof control;
      const ssize_t got = ::recvmsg(fd_, &message, 0);
      if (got <= 0) {
        return all;
      }
      for (cmsghdr* header = all.empty() ? CMSG_FIRSTHDR(&message) : nullptr; header != nullptr;
           header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_TIMESTAMPNS) {
          timespec stamp{};
          std::memcpy(&stamp, CMSG_DATA(header), sizeof stamp);
          first_arrival =
              std::chrono::seconds(stamp.tv_sec) + std::chrono::nanoseconds(stamp.tv_nsec);
        }
      }
      all.append(buffer, static_cast<std::size_t>(got));
    }
  }
  // At least `bytes` bytes (fewer only if the connection ends first).
  std::string read_exactly(std::size_t bytes) const {
    std::string all;
    char buffer[4096];
    while (all.size() < bytes) {
      const ssize_t got = ::recv(fd_, buffer, std::min(sizeof buffer, bytes - all.size()), 0);
      if (got <= 0) {
        break;
      }
      all.append(buffer, static_cast<std::size_t>(got));
    }
    return all;
  }

  [[nodiscard]] int fd() const noexcept { return fd_; }

 private:
  int fd_;
};

const std::string hello_response =
    "HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\nHello, World!";

std::size_t count(std::string_view text, std::string_view what) {
  std::size_t found = 0;
  for (std::size_t at = text.find(what); at != std::string_view::npos;
       at = text.find(what, at + 1)) {
    ++found;
  }
  return found;
}

// `seconds` from now, stretched by CANOPY_TIMEOUT_SCALE.
using canopy::testing::child_process;

// Runs a client program to its end (at most `seconds`, scaled): its exit
// status and output, and how long it ran.
struct program_run {
  int status = -1;
  bool timed_out = false;
  std::string output;
  std::chrono::duration<double> took{};
};
program_run run_program(std::vector<std::string> argv, double seconds) {
  const auto start = std::chrono::steady_clock::now();
  child_process program(std::move(argv));
  program_run run;
  run.status = program.wait(seconds);
  run.took = std::chrono::steady_clock::now() - start;
  run.timed_out = program.timed_out();
  run.output = program.output();
  return run;
}

std::string url(std::uint16_t port, std::string_view path = "/") {
  return "http://127.0.0.1:" + std::to_string(port) + std::string(path);
}

// `Label:   value` in ApacheBench's report, or -1.
long ab_field(std::string_view report, std::string_view label) {
  const std::size_t at = report.find(label);
  if (at == std::string_view::npos) {
    return -1;
  }
  std::size_t digits = report.find_first_not_of(' ', at + label.size());
  long value = -1;
  for (; digits < report.size() && report[digits] >= '0' && report[digits] <= '9'; ++digits) {
    value = (value < 0 ? 0 : value * 10) + (report[digits] - '0');
  }
  return value;
}

// examples/http_hello beside this test in the build tree (build/tests/ and
// build/examples/), as meson lays them out.
std::string example_path() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return (self.parent_path().parent_path() / "examples" / "http_hello").string();
}

const std::string hello_head =
    "HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\n";

}  // namespace

TEST_CASE("http server: keep-alive, pipelined requests in order, Connection: close") {
  canopy::testing::watchdog guard("http keep-alive", 60);
  const std::size_t fds_before = canopy::testing::open_fd_count();
  {
    test_server server;
    client peer(server.port());
    for (int round = 0; round < 3; ++round) {  // one connection, several requests
      peer.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
      CHECK(peer.read_exactly(hello_response.size()) == hello_response);
    }
    // Three pipelined requests in one write, the last asking to close.
    peer.send(
        "GET /first HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\nGET /third "
        "HTTP/1.1\r\nHost: x\r\n"
        "Connection: close\r\n\r\n");
    const std::string all = peer.read_to_eof();  // EOF: the server honoured the close
    const std::size_t first = all.find("/first");
    const std::size_t hello = all.find("Hello, World!");
    const std::size_t third = all.find("/third");
    REQUIRE(first != std::string::npos);
    REQUIRE(hello != std::string::npos);
    REQUIRE(third != std::string::npos);
    CHECK(first < hello);
    CHECK(hello < third);
    CHECK(count(all, "HTTP/1.1 ") == 3);
    CHECK(count(all, "Connection: close") == 1);
  }
  CHECK(canopy::testing::open_fd_count() == fds_before);
}

TEST_CASE("http server: HTTP/1.0 closes unless keep-alive is asked for") {
  canopy::testing::watchdog guard("http 1.0", 60);
  test_server server;
  client peer(server.port());
  peer.send("GET / HTTP/1.0\r\n\r\n");
  const std::string all = peer.read_to_eof();
  CHECK(count(all, "Hello, World!") == 1);
  CHECK(all.find("Connection: close") != std::string::npos);
}

TEST_CASE("http server: a malformed request gets 400 and the connection closed") {
  canopy::testing::watchdog guard("http bad request", 60);
  test_server server;
  SUBCASE("garbage") {
    client peer(server.port());
    peer.send("HELLO THERE\r\n\r\n");
    const std::string all = peer.read_to_eof();
    CHECK(all.rfind("HTTP/1.1 400 Bad Request\r\n", 0) == 0);
    CHECK(all.find("Connection: close") != std::string::npos);
  }
  SUBCASE("a good request, then a bad one: the first is answered, the second gets 400") {
    client peer(server.port());
    peer.send("GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.x\r\n\r\n");
    const std::string all = peer.read_to_eof();
    CHECK(all.rfind(hello_response, 0) == 0);
    CHECK(all.find("HTTP/1.1 400 Bad Request") != std::string::npos);
  }
}

// As nginx and hyper answer them (RFC 6585 5, RFC 9110 15.5.14), so a
// client or proxy can tell "too big" from "malformed".
TEST_CASE("http server: a head over the limits gets 431, a body over them 413, then a close") {
  canopy::testing::watchdog guard("http limits", 60);
  test_server server;  // max_head_bytes 1024; max_headers and max_body_bytes the defaults
  const auto refused_with = [](const std::string& all, std::string_view status_line) {
    CHECK(all.rfind(status_line, 0) == 0);
    CHECK(all.find("Connection: close") != std::string::npos);
  };
  SUBCASE("a header over the head limit") {
    client peer(server.port());
    peer.send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n");
    refused_with(peer.read_to_eof(), "HTTP/1.1 431 Request Header Fields Too Large\r\n");
  }
  SUBCASE("an unfinished head over the limit is refused without waiting for its end") {
    client peer(server.port());
    peer.send("GET /" + std::string(2000, 'a'));
    refused_with(peer.read_to_eof(), "HTTP/1.1 431 Request Header Fields Too Large\r\n");
  }
  SUBCASE("more header fields than max_headers, in few bytes") {
    std::string head = "GET / HTTP/1.1\r\nHost: x\r\n";
    for (std::size_t i = 0; i <= http::request_limits{}.max_headers; ++i) {
      head += "A: 1\r\n";
    }
    client peer(server.port());
    peer.send(head + "\r\n");
    refused_with(peer.read_to_eof(), "HTTP/1.1 431 Request Header Fields Too Large\r\n");
  }
  SUBCASE("a Content-Length over max_body_bytes, refused from the head alone") {
    client peer(server.port());
    peer.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " +
              std::to_string(http::request_limits{}.max_body_bytes + 1) + "\r\n\r\n");
    refused_with(peer.read_to_eof(), "HTTP/1.1 413 Content Too Large\r\n");
  }
}

TEST_CASE("http server: a client that sends its headers too slowly is timed out") {
  canopy::testing::watchdog guard("http slow headers", 60);
  const std::size_t fds_before = canopy::testing::open_fd_count();
  {
    test_server server(300ms);
    // Before the connect: the server's deadline runs from its accept, which
    // may come before connect() returns here (a waited of 298.8 ms was seen
    // with `start` taken after it, on one loaded CPU).
    const auto start = std::chrono::steady_clock::now();
    timespec start_wall{};
    ::clock_gettime(CLOCK_REALTIME, &start_wall);  // the clock of the receive timestamps
    client peer(server.port());
    peer.send("GET / HTTP/1.1\r\nHost: x\r\n");
    std::this_thread::sleep_for(100ms);
    const auto slept = std::chrono::steady_clock::now() - start;
    peer.send("Host: x\r\n");  // progress, but the request is still not complete
    std::optional<std::chrono::nanoseconds> arrival;
    const std::string all = peer.read_to_eof(arrival);
    const auto waited = std::chrono::steady_clock::now() - start;
    CHECK(all.rfind("HTTP/1.1 408 Request Timeout\r\n", 0) == 0);
    // Never early: a delay of this thread only makes `waited` longer.
    CHECK(waited >= 300ms);
    // Not late, timed by when the kernel received the answer rather than by
    // when this thread next ran to read it. On a loaded 2-core machine this
    // thread once read the 408 22.6 s after `start`, which a late server
    // cannot explain: an answer later than ~10.1 s ends the first recv on
    // the 10 s receive timeout with nothing read, and an earlier one is
    // followed at once by its FIN. So this thread (or the whole machine) was
    // stalled. Without a stamp, `waited` bounds the answer's time from above.
    const auto answered_after = arrival
                                    ? *arrival - (std::chrono::seconds(start_wall.tv_sec) +
                                                  std::chrono::nanoseconds(start_wall.tv_nsec))
                                    : std::chrono::duration_cast<std::chrono::nanoseconds>(waited);
    INFO("client: its 100 ms sleep took ", std::chrono::duration<double>(slept).count(),
         " s; it read the answer ", std::chrono::duration<double>(waited).count(),
         " s after start; the kernel received it ",
         std::chrono::duration<double>(answered_after).count(), " s after start",
         std::string(arrival ? "" : " (no receive timestamp: the read time)"));
    CHECK(answered_after < std::chrono::duration<double>(5 * canopy::testing::timeout_scale()));
  }
  CHECK(canopy::testing::open_fd_count() == fds_before);
}

TEST_CASE("http server: many connections at once, and clients that vanish") {
  canopy::testing::watchdog guard("http many", 60);
  const std::size_t fds_before = canopy::testing::open_fd_count();
  {
    test_server server;
    {
      std::vector<std::unique_ptr<client>> peers;
      for (int i = 0; i < 50; ++i) {
        peers.push_back(std::make_unique<client>(server.port()));
        peers.back()->send("GET / HTTP/1.1\r\nHost: x\r\n");  // half a request, then gone
      }
    }
    std::vector<std::unique_ptr<client>> peers;
    for (int i = 0; i < 50; ++i) {
      peers.push_back(std::make_unique<client>(server.port()));
    }
    for (int round = 0; round < 20; ++round) {
      for (auto& peer : peers) {
        peer->send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
      }
      for (auto& peer : peers) {
        REQUIRE(peer->read_exactly(hello_response.size()) == hello_response);
      }
    }
  }
  CHECK(canopy::testing::open_fd_count() == fds_before);
}

TEST_CASE("http server: an idle connection is closed quietly after request_timeout, no 408") {
  canopy::testing::watchdog guard("http idle close", 60);
  const std::size_t fds_before = canopy::testing::open_fd_count();
  {
    test_server server(300ms);
    const http::server_counters before = http::counters();
    // Idle after an answer (keep-alive).
    const auto start = std::chrono::steady_clock::now();
    client kept(server.port());
    kept.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    REQUIRE(kept.read_exactly(hello_response.size()) == hello_response);
    ending kept_end{};
    const std::string after_answer = kept.read_to_eof(kept_end);
    const auto closed_after = std::chrono::steady_clock::now() - start;
    CHECK(after_answer.empty());  // was "HTTP/1.1 408 Request Timeout ..."
    CHECK(kept_end == ending::eof);
    CHECK(closed_after >= 300ms);  // never before the timeout
    // Idle since the accept: not a byte sent.
    client silent(server.port());
    ending silent_end{};
    CHECK(silent.read_to_eof(silent_end).empty());
    CHECK(silent_end == ending::eof);
    // The server counted both as idle closes (before closing), none as a 408.
    CHECK(canopy::testing::eventually(
        [&] { return http::counters().idle_closes >= before.idle_closes + 2; }));
    CHECK(http::counters().timeouts == before.timeouts);
    // A request begun and not finished still gets its 408.
    client partial(server.port());
    partial.send("GET / HTTP/1.1\r\nHost: x\r\nHost");
    CHECK(partial.read_to_eof().rfind("HTTP/1.1 408 Request Timeout\r\n", 0) == 0);
    CHECK(http::counters().timeouts == before.timeouts + 1);
  }
  CHECK(canopy::testing::open_fd_count() == fds_before);
}

TEST_CASE("http server: HEAD gets the GET answer's head and no body (raw, and curl -I)") {
  canopy::testing::watchdog guard("http head", 120);
  test_server server;
  SUBCASE("raw: the bytes, exactly, and the connection stays in step") {
    client peer(server.port());
    peer.send(
        "HEAD / HTTP/1.1\r\nHost: x\r\n\r\nHEAD /missing HTTP/1.1\r\nHost: x\r\n\r\n"
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    CHECK(peer.read_to_eof() ==
          hello_head +
              "HTTP/1.1 404 Not Found\r\nContent-Length: 8\r\nContent-Type: text/plain\r\n\r\n"
              "HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n"
              "Connection: close\r\n\r\nHello, World!");
  }
  SUBCASE("curl -I twice on one connection, then GET") {
    const program_run curl =
        run_program({"curl", "--silent", "--show-error", "--verbose", "--max-time", "20", "--head",
                     "--write-out", "transfer connects=%{num_connects} code=%{http_code}\n",
                     url(server.port()), url(server.port()), "--next", "--silent", "--write-out",
                     "\ntransfer connects=%{num_connects} code=%{http_code}\n", url(server.port())},
                    30);
    INFO("curl said:\n", curl.output);
    CHECK_FALSE(curl.timed_out);
    CHECK(curl.status == 0);
    CHECK(count(curl.output, "< Content-Length: 13") == 3);  // -v: every head received
    // curl -v says "Excess found" when a HEAD answer carries a body.
    CHECK(curl.output.find("Excess") == std::string::npos);
    CHECK(count(curl.output, "transfer connects=1 code=200") == 1);
    CHECK(count(curl.output, "transfer connects=0 code=200") == 2);  // one connection for all
    CHECK(count(curl.output, "Hello, World!") == 1);                 // the GET's body only
  }
}

TEST_CASE("http server: HTTP/1.0 keep-alive is confirmed with Connection: keep-alive (ab -k)") {
  canopy::testing::watchdog guard("http 1.0 keep-alive", 180);
  test_server server;
  SUBCASE("raw: confirmed, kept, then closed when not asked for") {
    client peer(server.port());
    const std::string kept =
        "HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n"
        "Connection: keep-alive\r\n\r\nHello, World!";
    peer.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    CHECK(peer.read_exactly(kept.size()) == kept);
    peer.send("HEAD / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    CHECK(peer.read_exactly(kept.size() - 13) == kept.substr(0, kept.size() - 13));
    peer.send("GET / HTTP/1.0\r\n\r\n");  // the same connection, now without keep-alive
    CHECK(peer.read_to_eof() ==
          "HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n"
          "Connection: close\r\n\r\nHello, World!");
  }
  SUBCASE("ab -k -n 3 -c 1: no wait for a close that never comes") {
    // Before: ab waited out its 30 s timeout (Keep-Alive requests: 0).
    const program_run ab =
        run_program({"ab", "-k", "-n", "3", "-c", "1", "-s", "60", url(server.port())}, 90);
    INFO("ab said:\n", ab.output);
    CHECK_FALSE(ab.timed_out);
    CHECK(ab.status == 0);
    CHECK(ab_field(ab.output, "Complete requests:") == 3);
    CHECK(ab_field(ab.output, "Failed requests:") == 0);
    CHECK(ab_field(ab.output, "Keep-Alive requests:") == 3);
    // Each connection's answers are complete when the bytes arrive: well
    // under the server's 5 s request timeout on any machine.
    CHECK(ab.took < std::chrono::duration<double>(4 * canopy::testing::timeout_scale()));
  }
  SUBCASE("ab -k -n 2000 -c 50") {
    const program_run ab =
        run_program({"ab", "-k", "-n", "2000", "-c", "50", "-s", "60", url(server.port())}, 120);
    INFO("ab said:\n", ab.output);
    CHECK_FALSE(ab.timed_out);
    CHECK(ab.status == 0);
    CHECK(ab_field(ab.output, "Complete requests:") == 2000);
    CHECK(ab_field(ab.output, "Failed requests:") == 0);
    CHECK(ab_field(ab.output, "Keep-Alive requests:") == 2000);
  }
}

TEST_CASE("http server: a client that stops reading is reset after write_timeout") {
  canopy::testing::watchdog guard("http write stall", 120);
  const std::size_t fds_before = canopy::testing::open_fd_count();
  const std::size_t answer_size =
      big_body().size() + 100;  // at least: the head adds ~60 bytes more
  SUBCASE("reads nothing: reset") {
    test_server server(30s, 300ms);
    const std::uint64_t before = http::counters().write_timeouts;
    client peer(server.port(), 4096);
    const auto sent_at = std::chrono::steady_clock::now();
    peer.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
    // The server gives up on its own: nothing here reads until it has.
    REQUIRE(
        canopy::testing::eventually([&] { return http::counters().write_timeouts > before; }, 20));
    // Never early: the write cannot stall before the request is sent.
    CHECK(std::chrono::steady_clock::now() - sent_at >= 300ms);
    ending how{};
    const std::string got = peer.read_to_eof(how);
    INFO("read ", got.size(), " of ", big_body().size(), " body bytes");
    CHECK(got.size() < big_body().size());
    CHECK((how == ending::reset || how == ending::eof));  // not the receive timeout
  }
  SUBCASE("reads slowly but keeps reading: served in full") {
    // Each pause is a third of the write timeout; together they are longer
    // than it, so a deadline on the whole write (not on progress) would cut
    // the answer. Scaled for sanitizer builds, at most 3 times: 2.7 s
    // without a send is far more than even TSan needs, and the pauses add up.
    const double scale = std::min(canopy::testing::timeout_scale(), 3.0);
    const auto write_timeout = std::chrono::milliseconds(static_cast<long>(900 * scale));
    const auto pause = std::chrono::milliseconds(static_cast<long>(300 * scale));
    test_server server(30s, write_timeout);
    const std::uint64_t before = http::counters().write_timeouts;
    client peer(server.port(), 4096);
    peer.send("GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    std::string got;
    int pauses = 0;
    std::vector<char> buffer(65536);
    const std::size_t pause_every = big_body().size() / 5;
    std::size_t next_pause = pause_every;
    for (;;) {
      const ssize_t read = ::recv(peer.fd(), buffer.data(), buffer.size(), 0);
      if (read <= 0) {
        break;  // EOF after the whole answer, or an error (checked below)
      }
      got.append(buffer.data(), static_cast<std::size_t>(read));
      if (got.size() >= next_pause && pauses < 4) {
        std::this_thread::sleep_for(pause);  // the client's pace, not synchronisation
        ++pauses;
        next_pause += pause_every;
      }
    }
    CHECK(pauses == 4);
    CHECK(got.size() > big_body().size());
    CHECK(got.size() < answer_size);
    CHECK(got.ends_with(big_body().substr(0, 1000)));
    CHECK(http::counters().write_timeouts == before);
  }
  CHECK(canopy::testing::open_fd_count() == fds_before);
}

TEST_CASE("http server: a head with bare LF line endings gets 400 at once, not a 408") {
  canopy::testing::watchdog guard("http bare LF", 60);
  // A 30 s request timeout: a server that waited for the CRLF CRLF would
  // answer 408 long after the client's 10 s receive timeout.
  test_server server(30s);
  const std::string reason(http::detail::describe(http::detail::parse_error::bad_line_ending));
  for (const std::string_view request :
       {"GET / HTTP/1.1\nHost: x\n\n", "GET / HTTP/1.1\r\nHost: x\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\nAccept: */*\r\n\r\n", "GET / HTTP/1.1\rHost: x\r\n"}) {
    CAPTURE(request);
    client peer(server.port());
    peer.send(request);
    ending how{};
    const std::string all = peer.read_to_eof(how);
    CHECK(all.rfind("HTTP/1.1 400 Bad Request\r\n", 0) == 0);
    CHECK(all.find(reason) != std::string::npos);
    CHECK(how == ending::eof);
  }
}

TEST_CASE("http server: a byte of 0x80 or above in the target gets 400; in a field value, not") {
  canopy::testing::watchdog guard("http non-ASCII target", 60);
  test_server server;
  {
    client peer(server.port());
    peer.send("GET /caf\xC3\xA9 HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string all = peer.read_to_eof();
    CHECK(all.rfind("HTTP/1.1 400 Bad Request\r\n", 0) == 0);
    CHECK(all.find(http::detail::describe(http::detail::parse_error::bad_target)) !=
          std::string::npos);
  }
  {
    client peer(server.port());
    peer.send("GET / HTTP/1.1\r\nHost: x\r\nX-Name: caf\xC3\xA9\r\nConnection: close\r\n\r\n");
    CHECK(peer.read_to_eof().rfind("HTTP/1.1 200 OK\r\n", 0) == 0);  // obs-text is allowed there
  }
}

TEST_CASE("http_hello, the example: HEAD (curl -I), HTTP/1.0 keep-alive (ab -k), its stats") {
  canopy::testing::watchdog guard("http_hello example", 180);
  const std::string program = example_path();
  REQUIRE_MESSAGE(::access(program.c_str(), X_OK) == 0, "no ", program,
                  ": build examples/http_hello (meson builds it with the tests)");
  child_process server({program, "0", "--threads", "2"});
  REQUIRE(server.read_until("\n", 30));
  INFO("http_hello said:\n", server.output());
  const std::string_view prefix = "listening on 127.0.0.1:";
  REQUIRE(server.output().rfind(prefix, 0) == 0);
  const auto port = static_cast<std::uint16_t>(std::stoul(server.output().substr(prefix.size())));
  REQUIRE(port != 0);

  const program_run curl =
      run_program({"curl", "--silent", "--show-error", "--verbose", "--max-time", "20", "--head",
                   "--write-out", "transfer code=%{http_code}\n", url(port), url(port)},
                  30);
  INFO("curl said:\n", curl.output);
  CHECK(curl.status == 0);
  CHECK(count(curl.output, "transfer code=200") == 2);
  CHECK(count(curl.output, "< Content-Length: 13") == 2);
  CHECK(curl.output.find("Excess") == std::string::npos);

  // The path decides, not the query: "/?name=x" is "/", "/missing" is not.
  const program_run query =
      run_program({"curl", "--silent", "--show-error", "--max-time", "20", "--output", "/dev/null",
                   "--write-out", "code=%{http_code}\n", url(port) + "?name=x",
                   "--output", "/dev/null", url(port) + "missing"},
                  30);
  INFO("curl said:\n", query.output);
  CHECK(query.status == 0);
  CHECK(query.output == "code=200\ncode=404\n");

  const program_run ab = run_program({"ab", "-k", "-n", "3", "-c", "1", "-s", "60", url(port)}, 90);
  INFO("ab said:\n", ab.output);
  CHECK(ab.status == 0);
  CHECK(ab_field(ab.output, "Complete requests:") == 3);
  CHECK(ab_field(ab.output, "Keep-Alive requests:") == 3);
  CHECK(ab.took < std::chrono::duration<double>(4 * canopy::testing::timeout_scale()));

  // SIGTERM: the example stops and prints its counters; 7 requests served.
  server.signal(SIGTERM);
  CHECK(server.wait(60) == 0);
  CHECK(server.output().find(" requests=7 bad_requests=0 timeouts=0") != std::string::npos);
}
