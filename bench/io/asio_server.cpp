// asio_io_server — the Boost.Asio peer of the I/O benchmarks: the same
// HTTP hello server as examples/http_hello (same parser, io/http/http_parser.hpp,
// same answers, keep-alive, pipelining, a request timeout) and a 64-byte
// echo server, written as fast as we could in Asio's own style: completion
// handlers (no coroutines), one connection object per socket, reads into a
// reused buffer, all pipelined answers in one write.
//
//   asio_io_server PORT --mode http|echo [--threads N] [--layout per-thread|shared]
//                  [--tls-cert FILE --tls-key FILE]
//
// --tls-cert and --tls-key (PEM) serve the HTTP mode over TLS with
// asio::ssl::stream<tcp::socket> (the HTTPS peer of bench/io/tls_bench.py):
// TLS 1.2 or 1.3, TLS 1.3 suites and key exchange pinned to
// TLS_AES_128_GCM_SHA256 and X25519 (through the context's native handle,
// as Asio leaves those to OpenSSL), OpenSSL's default server session cache
// and tickets for resumption. The handshake runs under the request timeout.
//
// Layouts:
//   per-thread  N io_contexts, one thread each, each with its own
//               SO_REUSEPORT listener on the port: the kernel spreads the
//               connections, and nothing is shared between threads;
//   shared      one io_context run by N threads, one listener.
// The request timeout (10 s, as the Canopy server's default) is a per-
// connection timer that fires once a second and closes the connection if no
// complete request arrived in time: the cheap form of a per-request
// deadline in Asio (re-arming a steady_timer per request costs a cancel and
// a handler run each time).
// Prints "listening on 127.0.0.1:PORT" and serves until SIGINT/SIGTERM.
// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
// clang-format off
#include <utility>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
// clang-format on

#include <signal.h>

#include <canopy/detail/io/http/http_parser.hpp>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

namespace asio = boost::asio;
using asio::ip::tcp;
namespace http = canopy::io::http;

namespace {

using tls_socket = asio::ssl::stream<tcp::socket>;
using clock_type = std::chrono::steady_clock;
constexpr auto request_timeout = std::chrono::seconds(10);

void append_hello(const http::request& req, std::string& out) {
  const bool close = !req.keep_alive;
  const bool found = req.target == "/";
  const std::string_view body = found ? "Hello, World!" : "Not Found";
  out.append(found ? "HTTP/1.1 200 OK" : "HTTP/1.1 404 Not Found");
  out.append("\r\nContent-Length: ");
  char number[24];
  const auto [end, error] = std::to_chars(number, number + sizeof number, body.size());
  (void)error;
  out.append(number, end);
  out.append("\r\nContent-Type: text/plain");
  if (close) {
    out.append("\r\nConnection: close");
  }
  out.append("\r\n\r\n");
  out.append(body);
}

// Stream: tcp::socket, or tls_socket (HTTPS: the handshake first).
template <class Stream>
class http_connection : public std::enable_shared_from_this<http_connection<Stream>> {
 public:
  explicit http_connection(Stream socket)
      : socket_(std::move(socket)), watchdog_(socket_.get_executor()), input_(8192) {}

  void start() {
    deadline_ = clock_type::now() + request_timeout;
    watch();
    if constexpr (std::is_same_v<Stream, tls_socket>) {
      socket_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](boost::system::error_code error) {
                                if (error) {
                                  self->close();
                                  return;
                                }
                                self->read();
                              });
    } else {
      read();
    }
  }

 private:
  void watch() {
    watchdog_.expires_after(std::chrono::seconds(1));
    watchdog_.async_wait([self = this->shared_from_this()](boost::system::error_code error) {
      if (error || !self->socket_.lowest_layer().is_open()) {
        return;
      }
      if (clock_type::now() >= self->deadline_) {
        boost::system::error_code ignored;
        self->socket_.lowest_layer().close(ignored);
        return;
      }
      self->watch();
    });
  }

  void read() {
    if (end_ == input_.size()) {
      if (begin_ > 0) {
        std::memmove(input_.data(), input_.data() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
      } else {
        close();  // a head over the buffer: the parser reports head_too_large first
        return;
      }
    }
    socket_.async_read_some(
        asio::buffer(input_.data() + end_, input_.size() - end_),
        [self = this->shared_from_this()](boost::system::error_code error, std::size_t got) {
          if (error) {
            self->close();
            return;
          }
          self->end_ += got;
          self->answer();
        });
  }

  void answer() {
    bool closing = false;
    bool answered = false;
    for (;;) {
      const std::string_view pending(input_.data() + begin_, end_ - begin_);
      const http::detail::parse_outcome outcome = http::detail::parse_request(pending, request_);
      if (outcome.status == http::detail::parse_status::incomplete) {
        break;
      }
      // A chunked body (chunked_body) is refused as before: this peer
      // answers GETs; request_reader would be needed to decode one.
      if (outcome.status != http::detail::parse_status::complete) {
        output_.append(
            "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        closing = true;
        break;
      }
      append_hello(request_, output_);
      answered = true;
      begin_ += outcome.consumed;
      if (!request_.keep_alive) {
        closing = true;
        break;
      }
    }
    if (begin_ == end_) {
      begin_ = end_ = 0;
    }
    if (answered) {
      deadline_ = clock_type::now() + request_timeout;
    }
    if (output_.empty()) {
      read();
      return;
    }
    asio::async_write(socket_, asio::buffer(output_),
                      [self = this->shared_from_this(), closing](boost::system::error_code error,
                                                                 std::size_t /*sent*/) {
                        self->output_.clear();
                        if (error) {
                          self->close();
                          return;
                        }
                        if (closing) {
                          self->finish();
                          return;
                        }
                        self->read();
                      });
  }

  // After the last answer (Connection: close): over TLS our close_notify
  // first, since a client that meets a bare end of stream drops the session
  // it would resume with; the watchdog still bounds the wait for the peer's.
  void finish() {
    if constexpr (std::is_same_v<Stream, tls_socket>) {
      socket_.async_shutdown(
          [self = this->shared_from_this()](boost::system::error_code) { self->close(); });
    } else {
      close();
    }
  }

  // Abrupt (errors, the timeout): no close_notify.
  void close() {
    boost::system::error_code ignored;
    watchdog_.cancel();
    socket_.lowest_layer().shutdown(tcp::socket::shutdown_both, ignored);
    socket_.lowest_layer().close(ignored);
  }

  Stream socket_;
  asio::steady_timer watchdog_;
  std::vector<char> input_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  std::string output_;
  http::request request_;
  clock_type::time_point deadline_;
};

class echo_connection : public std::enable_shared_from_this<echo_connection> {
 public:
  explicit echo_connection(tcp::socket socket) : socket_(std::move(socket)) {}

  void start() { read(); }

 private:
  void read() {
    socket_.async_read_some(
        asio::buffer(buffer_),
        [self = shared_from_this()](boost::system::error_code error, std::size_t got) {
          if (error) {
            return;
          }
          asio::async_write(self->socket_, asio::buffer(self->buffer_.data(), got),
                            [self](boost::system::error_code write_error, std::size_t) {
                              if (!write_error) {
                                self->read();
                              }
                            });
        });
  }

  tcp::socket socket_;
  std::array<char, 4096> buffer_{};
};

// tls: the server context when Connection is http_connection<tls_socket>.
template <class Connection>
void accept_loop(tcp::acceptor& acceptor, asio::ssl::context* tls) {
  acceptor.async_accept([&acceptor, tls](boost::system::error_code error, tcp::socket socket) {
    if (!error) {
      socket.set_option(tcp::no_delay(true));
      if constexpr (std::is_same_v<Connection, http_connection<tls_socket>>) {
        std::make_shared<Connection>(tls_socket(std::move(socket), *tls))->start();
      } else {
        std::make_shared<Connection>(std::move(socket))->start();
      }
    } else if (error == asio::error::operation_aborted) {
      return;
    }
    accept_loop<Connection>(acceptor, tls);
  });
}

std::unique_ptr<asio::ssl::context> make_tls_context(const std::string& certificate,
                                                     const std::string& key) {
  auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1);
  context->use_certificate_chain_file(certificate);
  context->use_private_key_file(key, asio::ssl::context::pem);
  if (SSL_CTX_set_ciphersuites(context->native_handle(), "TLS_AES_128_GCM_SHA256") != 1 ||
      SSL_CTX_set1_groups_list(context->native_handle(), "X25519") != 1) {
    throw std::runtime_error("could not pin the TLS 1.3 suite and group");
  }
  return context;
}

tcp::acceptor make_acceptor(asio::io_context& context, unsigned short port, bool reuse_port) {
  tcp::acceptor acceptor(context);
  const tcp::endpoint local(asio::ip::address_v4::loopback(), port);
  acceptor.open(local.protocol());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  if (reuse_port) {
    const int on = 1;
    if (::setsockopt(acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) {
      throw std::runtime_error("SO_REUSEPORT failed");
    }
  }
  acceptor.bind(local);
  acceptor.listen(1024);
  return acceptor;
}

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr,
               "asio_io_server: %s\nusage: asio_io_server PORT --mode http|echo [--threads N] "
               "[--layout per-thread|shared] [--tls-cert FILE --tls-key FILE]\n",
               message);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage("the port is required");
  }
  unsigned port = 0;
  if (std::from_chars(argv[1], argv[1] + std::strlen(argv[1]), port).ec != std::errc() ||
      port > 65535) {
    usage("the port must be 0..65535");
  }
  bool echo = false;
  bool per_thread = true;
  unsigned threads = std::max(1U, std::thread::hardware_concurrency());
  std::string tls_cert;
  std::string tls_key;
  for (int i = 2; i < argc; ++i) {
    const std::string_view argument = argv[i];
    if (i + 1 >= argc) {
      usage("an option needs a value");
    }
    const std::string_view value = argv[++i];
    if (argument == "--mode" && (value == "http" || value == "echo")) {
      echo = value == "echo";
    } else if (argument == "--tls-cert" || argument == "--tls-key") {
      (argument == "--tls-cert" ? tls_cert : tls_key) = value;
    } else if (argument == "--layout" && (value == "per-thread" || value == "shared")) {
      per_thread = value == "per-thread";
    } else if (argument == "--threads" &&
               std::from_chars(value.data(), value.data() + value.size(), threads).ec ==
                   std::errc() &&
               threads > 0) {
    } else {
      usage("bad option");
    }
  }

  if (tls_cert.empty() != tls_key.empty() || (echo && !tls_cert.empty())) {
    usage("--tls-cert and --tls-key go together, in the http mode");
  }
  std::unique_ptr<asio::ssl::context> tls;
  if (!tls_cert.empty()) {
    try {
      tls = make_tls_context(tls_cert, tls_key);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "asio_io_server: TLS: %s\n", error.what());
      return 1;
    }
  }

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const unsigned context_count = per_thread ? threads : 1;
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<tcp::acceptor> acceptors;
  for (unsigned i = 0; i < context_count; ++i) {
    // concurrency hint 1 for a context run by one thread: Asio drops its locks.
    contexts.push_back(
        std::make_unique<asio::io_context>(per_thread ? 1 : static_cast<int>(threads)));
    acceptors.push_back(
        make_acceptor(*contexts.back(), static_cast<unsigned short>(port), per_thread));
    if (port == 0) {
      port = acceptors.back().local_endpoint().port();  // the others share it (SO_REUSEPORT)
    }
  }
  for (auto& acceptor : acceptors) {
    if (echo) {
      accept_loop<echo_connection>(acceptor, nullptr);
    } else if (tls) {
      accept_loop<http_connection<tls_socket>>(acceptor, tls.get());
    } else {
      accept_loop<http_connection<tcp::socket>>(acceptor, nullptr);
    }
  }
  std::vector<std::thread> runners;
  for (unsigned i = 0; i < threads; ++i) {
    asio::io_context& context = *contexts[per_thread ? i : 0];
    runners.emplace_back([&context] { context.run(); });
  }
  std::printf("listening on 127.0.0.1:%u\n", port);
  std::fflush(stdout);
  int received = 0;
  sigwait(&stop_signals, &received);
  for (auto& context : contexts) {
    context->stop();
  }
  for (auto& runner : runners) {
    runner.join();
  }
  return 0;
}
