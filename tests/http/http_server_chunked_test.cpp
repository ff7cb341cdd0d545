// Chunked request bodies through the HTTP/1.1 server (io/http/http_server.hpp)
// on 127.0.0.1: curl streaming stdin from a pipe (as `-T -`, which sends
// `Expect: 100-continue`, and as a POST with `Transfer-Encoding: chunked`),
// a raw socket sending the body a few bytes at a time with a pipelined
// request after it, 100-continue, the body limit (413; trailers over the
// head's limits 431), 501 for other codings,
// 400 for Transfer-Encoding with Content-Length or in HTTP/1.0, and a client
// that closes mid-chunk. Run once per backend (run.sh's http_server pattern).
// curl is installed by ./run.sh; a missing curl fails the test.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <canopy/io.hpp>
#include <canopy/io/http.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/child_process.hpp"
#include "tests/http_test_support.hpp"
#include "tests/io_test_support.hpp"
#include "tests/test_support.hpp"
#include "tests/watchdog.hpp"

namespace io = canopy::io;
namespace http = canopy::io::http;
using canopy::testing::watchdog;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t body_limit = 256 * 1024;

// Echoes the body: "<size>\n" then the body itself.
void echo(const http::request& req, std::string& out) {
  http::append_response(out, 200, "OK", "text/plain",
                        std::to_string(req.body.size()) + "\n" + std::string(req.body),
                        !req.keep_alive);
}

std::string echoed(std::string_view body) {
  return std::to_string(body.size()) + "\n" + std::string(body);
}

// The echo handler on a free port of 127.0.0.1, bodies up to body_limit.
class echo_server : public canopy::testing::http_test_server {
 public:
  echo_server() : http_test_server(canopy::testing::with_body_limit(body_limit), &echo) {}
};

using canopy::testing::raw_client;

// `sh -c command` as a child process, its stdout and stderr read here, for
// at most `seconds` (scaled; then it is killed). The exit status (128 + the
// signal if one ended it) and the output.
struct shell_run {
  int status = -1;
  std::string output;
};
shell_run run_shell(const std::string& command, double seconds) {
  canopy::testing::child_process shell({"sh", "-c", command});
  shell_run run;
  run.status = shell.wait(seconds);
  run.output = shell.output();
  return run;
}

// What `seq 1 count` prints.
std::string seq_output(int count) {
  std::string text;
  for (int i = 1; i <= count; ++i) {
    text += std::to_string(i) + "\n";
  }
  return text;
}

// `body` chunked, `piece` bytes a chunk.
std::string chunked(std::string_view body, std::size_t piece) {
  std::string out;
  char size[32];
  for (std::size_t at = 0; at < body.size(); at += piece) {
    const std::string_view chunk = body.substr(at, piece);
    std::snprintf(size, sizeof size, "%zx", chunk.size());
    out += size;
    out += "\r\n";
    out += chunk;
    out += "\r\n";
  }
  return out + "0\r\n\r\n";
}

const std::string chunked_head =
    "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";

}  // namespace

TEST_CASE("http server chunked: curl streaming a pipe (-T -, and POST with chunked)") {
  watchdog guard("http chunked curl", 120);
  echo_server server;
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/up";
  const std::string body = seq_output(20000);  // about 106 KiB: several chunks
  // -T - streams stdin as chunks (PUT) and asks Expect: 100-continue; -v
  // shows the interim answer arriving (--stderr -: in order with the body).
  const shell_run put =
      run_shell("seq 1 20000 | curl -sS -v --stderr - --max-time 30 -T - " + url, 60);
  CHECK(put.status == 0);
  CHECK(put.output.find("> Transfer-Encoding: chunked") != std::string::npos);
  CHECK(put.output.find("< HTTP/1.1 100 Continue") != std::string::npos);
  CHECK(put.output.find("< HTTP/1.1 200 OK") != std::string::npos);
  CHECK(put.output.find(echoed(body)) != std::string::npos);

  const shell_run post = run_shell(
      "seq 1 20000 | curl -sS --max-time 30 -H 'Transfer-Encoding: chunked' --data-binary @- " +
          url,
      60);
  CHECK(post.status == 0);
  CHECK(post.output == echoed(body));

  // Over body_limit (about 1.3 MiB decoded): refused with 413 mid-upload;
  // only the code curl reports is checked (stderr dropped), as curl may also
  // complain that the rest of its upload was not taken.
  const shell_run over = run_shell(
      "seq 1 200000 | curl -sS --max-time 30 -o /dev/null -w '%{http_code}' "
      "-H 'Transfer-Encoding: chunked' --data-binary @- " +
          url + " 2>/dev/null",
      60);
  CHECK(over.output == "413");
}

TEST_CASE("http server chunked: a body sent a few bytes at a time, then a pipelined request") {
  watchdog guard("http chunked pieces", 60);
  echo_server server;
  raw_client client(server.port());
  const std::string body = "Chunked bodies arrive split anywhere: in a size, a CRLF, the data.";
  const std::string request = chunked_head + chunked(body, 7);
  for (std::size_t at = 0; at < request.size(); at += 3) {
    client.send(std::string_view(request).substr(at, 3));
    std::this_thread::sleep_for(1ms);  // separate reads at the server, most of the time
  }
  REQUIRE(client.read_until("\r\n\r\n" + echoed(body)));
  CHECK(client.received.rfind("HTTP/1.1 200 OK", 0) == 0);

  // A chunked request with extensions and trailers, and a plain one after
  // it in the same write: both answered, in order, on the same connection.
  client.received.clear();
  client.send(chunked_head +
              "3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n");
  REQUIRE(client.read_until("\r\n\r\n" + echoed("")));
  const std::size_t first = client.received.find(echoed("abc"));
  CHECK(first != std::string::npos);
  CHECK(client.received.find(echoed(""), first) != std::string::npos);
}

TEST_CASE("http server chunked: Expect: 100-continue gets 100 Continue before the body") {
  watchdog guard("http chunked 100-continue", 60);
  echo_server server;
  raw_client client(server.port());
  client.send(
      "PUT /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n");
  REQUIRE(client.read_until("\r\n\r\n"));
  CHECK(client.received == "HTTP/1.1 100 Continue\r\n\r\n");
  client.send(chunked("after the interim answer", 5));
  REQUIRE(client.read_until(echoed("after the interim answer")));
  CHECK(client.received.find("HTTP/1.1 200 OK") != std::string::npos);
}

TEST_CASE("http server chunked: over the limit, other codings, TE with CL or in HTTP/1.0") {
  watchdog guard("http chunked refusals", 60);
  echo_server server;
  SUBCASE("exactly the limit is served; a size past it is refused before its data") {
    raw_client at_limit(server.port());
    const std::string body(body_limit, 'L');
    at_limit.send(chunked_head + chunked(body, 60000));
    CHECK(at_limit.read_until("\r\n\r\n" + echoed(body)));

    raw_client over(server.port());
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", body_limit + 1);
    over.send(chunked_head + size);  // no data follows: the size alone is refused
    CHECK(over.read_to_eof());
    CHECK(over.received.rfind("HTTP/1.1 413 Content Too Large", 0) == 0);
    CHECK(over.received.find("limit") != std::string::npos);

    raw_client in_pieces(server.port());
    in_pieces.send(chunked_head + "20000\r\n" + std::string(0x20000, 'a') + "\r\n20001\r\n");
    CHECK(in_pieces.read_to_eof());
    CHECK(in_pieces.received.rfind("HTTP/1.1 413 Content Too Large", 0) == 0);

    // A size past 64 bits passes the body limit first, digit by digit: 413
    // too (400 only where no limit stops it: http_chunked_parser_test).
    raw_client overflowing(server.port());
    overflowing.send(chunked_head + "10000000000000000\r\n");
    CHECK(overflowing.read_to_eof());
    CHECK(overflowing.received.rfind("HTTP/1.1 413 Content Too Large", 0) == 0);
  }
  SUBCASE("trailers over the head's limits are refused as a head would be: 431") {
    raw_client client(server.port());
    client.send(chunked_head + "0\r\nX-Trailer: " + std::string(10000, 't') + "\r\n\r\n");
    CHECK(client.read_to_eof());
    CHECK(client.received.rfind("HTTP/1.1 431 Request Header Fields Too Large", 0) == 0);
  }
  SUBCASE("malformed chunks: 400 and a close") {
    for (const std::string_view chunks : {"zz\r\n", "5\r\nhelloXX", "5\nhello\r\n0\r\n\r\n"}) {
      CAPTURE(chunks);
      raw_client client(server.port());
      client.send(chunked_head + std::string(chunks));
      CHECK(client.read_to_eof());
      CHECK(client.received.rfind("HTTP/1.1 400 Bad Request", 0) == 0);
      CHECK(client.received.find("Connection: close") != std::string::npos);
    }
  }
  SUBCASE("a coding other than chunked alone: 501 and a close") {
    for (const std::string_view codings : {"gzip", "identity", "gzip, chunked", "x-new"}) {
      CAPTURE(codings);
      raw_client client(server.port());
      client.send("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + std::string(codings) +
                  "\r\n\r\n0\r\n\r\n");
      CHECK(client.read_to_eof());
      CHECK(client.received.rfind("HTTP/1.1 501 Not Implemented", 0) == 0);
      CHECK(client.received.find("Connection: close") != std::string::npos);
    }
  }
  SUBCASE("Transfer-Encoding with Content-Length, or in HTTP/1.0: 400 and a close") {
    for (const std::string_view head :
         {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
          "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
          "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"}) {
      CAPTURE(head);
      raw_client client(server.port());
      client.send(std::string(head) + "0\r\n\r\n");
      CHECK(client.read_to_eof());
      CHECK(client.received.rfind("HTTP/1.1 400 Bad Request", 0) == 0);
    }
  }
  SUBCASE("clients that close mid-chunk do not disturb the next one") {
    for (int round = 0; round < 10; ++round) {
      raw_client quitter(server.port());
      quitter.send(chunked_head + (round % 2 == 0 ? "1f" : "10\r\nonly eight"));
      quitter.close();
    }
    raw_client next(server.port());
    next.send(chunked_head + chunked("still served", 4));
    CHECK(next.read_until("\r\n\r\n" + echoed("still served")));
  }
}
