// What the documentation's code fragments take as given (doc_blocks.py
// includes every installed public header before this one): the free names
// fragments use, declared only, for the fragments are compiled, never
// linked. A fragment that declares one of these names itself shadows it
// (each fragment has a namespace of its own).
#pragma once

#include <sys/epoll.h>

#include <array>
#include <boost/asio.hpp>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <mutex>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

using namespace std::chrono_literals;

// The executor, its reactor and the I/O objects a fragment works with.
extern canopy::executor pool;
extern canopy::executor_config config;
extern canopy::io::reactor& reactor;
extern canopy::io::tcp_listener listener;
extern canopy::io::tcp_stream stream;
extern canopy::io::tcp_stream peer;
extern canopy::io::registration reg;
extern canopy::io::signal_set signals;
extern std::array<std::byte, 4096> buffer;
extern std::span<const std::byte> header, body, bytes, payload;
extern int fd;
extern std::chrono::steady_clock::time_point deadline;
extern std::stop_token token;

// Work to run: tasks and plain callables.
canopy::task<int> work();
canopy::task<int> work(int i);
canopy::task<int> more();
canopy::task<int> compute();
canopy::task<int> left();
canopy::task<int> right();
canopy::task<bool> step();
extern std::vector<canopy::task<int>> tasks;
int f();
int g();
int h();
long sum(long from, long to);
extern long lo, mid, hi;
extern int n;
extern long total;
std::string slurp(const char* path);
std::string read_whole_file(const char* path);
void consume(std::span<const std::byte> bytes);
void use(auto&&...) {}
void log(std::string_view what, const std::string& value);
void handle(const std::string& line);
canopy::task<void> handle(canopy::io::tcp_stream peer);
extern canopy::channel<int> ch;
extern canopy::mutex m;
extern canopy::semaphore sem;
extern canopy::task_group<int> group;

// An event loop the executor is embedded in (docs/embedding.md).
struct reply {};
struct connection {
  void write(const reply& out);
};
struct request {
  ::connection& connection;
};
reply compute(const request& r);
extern connection c;
extern request r;
extern int loop;
extern epoll_event events[64];
void handle_socket(const epoll_event& event);
extern boost::asio::io_context io;
extern boost::asio::steady_timer timer;
struct any_handler {  // an Asio completion handler, or an HTTP handler
  void operator()() const;
  void operator()(const boost::system::error_code& error) const;
  std::string operator()(const canopy::io::http::request& request) const;
};
extern any_handler handler;
boost::asio::awaitable<void> coro();

// Members of a room (docs/toolkit.md).
struct member {};
extern std::vector<member> members;
