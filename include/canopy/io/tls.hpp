// <canopy/io/tls.hpp> — TLS on OpenSSL 3: tls_context, tls_stream over a
// tcp_stream or unix_stream, and HTTPS for the HTTP/1.1 server
// (docs/tls.md is the guide). Built where meson finds OpenSSL
// (libssl-dev; -Dtls=auto|enabled|disabled); link canopy-tls (pkg-config
// canopy-tls; meson dependency('canopy-tls')), which brings libssl.
//
//   namespace io = canopy::io;
//   io::tls_context server = io::tls_context::server({.certificate_chain_file = "cert.pem",
//                                                     .private_key_file = "key.pem"});
//   auto hello = [](const io::http::request&) { return std::string("hello"); };
//   co_await io::http::serve(listener, server, {}, hello, token);   // HTTPS
//
//   io::tls_context client = io::tls_context::client({.ca_file = "ca.pem"});
//   const io::endpoint site = io::endpoint::loopback_v4(8443);
//   io::tls_stream<io::tcp_stream> tls(co_await io::tcp_stream::connect(site), client,
//                                      "example.org");   // SNI and the host-name check
//   co_await tls.handshake();
//   co_await tls.write_all(payload);
//   std::size_t got = co_await tls.read_some(buffer);   // 0: the peer's close_notify
//   co_await tls.shutdown();                             // our close_notify
//
// Contexts (io/tls/tls_context.hpp): server(options): a certificate chain
// and private key (PEM, file or memory; a key that does not match the
// certificate throws std::system_error tls_errc::key_mismatch here), ALPN
// protocols, min/max version (TLS 1.2 by default; 1.3), session
// resumption (on by default; see below). client(options):
// the trusted CAs (ca_file, ca_pem, or the system's store), verification
// on by default (verify_peer), ALPN, versions. A server picks a context
// per SNI name: add_server_name(name, context) or select_by_server_name(f).
// Copies share one SSL_CTX; set everything before the context is used.
// Mutual TLS: a server with verify_client = true requires a client
// certificate leading to client_ca_file or client_ca_pem and refuses a
// client without one ("peer did not return a certificate") or with
// another (a certificate error); a client presents certificate_chain_* and
// private_key_* (as a server's). tls_stream::peer_verified() and
// peer_subject() ("CN=...", RFC 2253) tell whom after the handshake. A
// context chosen by SNI brings its own verify_client and client CA, and
// with verify_client resumes only its own sessions (a TLS 1.3 client
// offering one made on another context is refused).
//
// Streams (io/tls/tls_stream.hpp), for coroutine tasks (the fibers' forms:
// <canopy/io/tls_fiber.hpp>, the same contract):
//   * OpenSSL never touches the socket: the SSL reads and writes two memory
//     BIOs and the stream moves the bytes with the next layer's own
//     read_some/write_all, so TLS works on both reactor backends (epoll,
//     io_uring) and a task waiting on TLS holds no worker;
//   * buffers: read_some decrypts into the caller's buffer; write_all
//     encrypts the caller's bytes into the stream's own output buffer and
//     sends that (the caller's span need only live until the write ends);
//     the stream owns a 17 KiB input buffer and OpenSSL's state;
//   * handshake() first, alone (no read or write may run meanwhile); then
//     one read and one write may run at once, in different tasks on
//     different workers (as on a tcp_stream); a second operation in a
//     direction already busy fails at once with
//     std::errc::connection_already_in_progress; before the handshake
//     succeeded: tls_errc::not_handshaken. A stream moves (and is
//     destroyed) only while no operation runs;
//   * errors: each operation has a std::error_code& form and a throwing
//     form (std::system_error with the same code). TLS failures are in
//     tls_category() and name the problem: a refused certificate
//     (is_certificate_error(code); "certificate verify failed: certificate
//     has expired", "... hostname mismatch", "... self-signed certificate",
//     "... unable to get local issuer certificate"), OpenSSL's reason
//     ("unsupported protocol", "tlsv1 alert protocol version", "wrong
//     version number", "http request"); the next layer's errors
//     (ECONNRESET, ...) as they are. A peer that closes the connection
//     without close_notify: tls_errc::truncated (a clean close_notify is a
//     read of 0 bytes, EOF); during the handshake:
//     tls_errc::closed_in_handshake. Renegotiation is refused;
//   * read_some (and read_some_until) of an empty buffer does what a
//     tcp_stream's does: returns 0 at once and takes nothing, on an idle
//     stream too (std::errc::bad_file_descriptor where the next layer is
//     closed); 0 means EOF only for a non-empty buffer;
//   * write_all and write_all_within of nothing (an empty buffer) end at
//     once, as a tcp_stream's: after the checks every write makes
//     (not_handshaken, unusable, a write already running), no error on an
//     open stream and std::errc::bad_file_descriptor on one whose next
//     layer is closed, as a write of bytes there; the stream stays usable;
//   * the cancel rule: a task cancelled (with_timeout, race, a handle's
//     cancel) during handshake(), write_all() or shutdown(), or during the
//     rare send a read makes, may leave a handshake or a record half sent:
//     the stream is then unusable, and every later operation fails with
//     tls_errc::unusable (close it). No half-written record is completed
//     as if whole. A read cancelled while it waits for the socket loses
//     nothing and the stream stays usable (the bytes already read are kept);
//     any error also makes the stream unusable, except EOF;
//   * bounded forms without a child task (with_timeout over read_some runs
//     the read as a child task): read_some_until(buffer, deadline, error)
//     returns 0 with std::errc::timed_out at the steady_clock deadline,
//     and the stream stays usable (nothing is lost: later bytes are the
//     next read's); write_all_within(bytes, stall_limit, error) fails with
//     std::errc::timed_out once the socket took nothing for stall_limit
//     (each send that makes progress starts it again), and the stream is
//     then unusable. time_point::max() and milliseconds::max(): no limit;
//   * shutdown() sends close_notify and does not wait for the peer's; close
//     the stream after it (close(), or next_layer()).
//   * It is a readable_stream: buffered_reader<tls_stream<tcp_stream>&>
//     reads lines and frames over it (<canopy/io/buffered.hpp>).
//
// HTTPS (io/tls/https.hpp): serve(listener, tls_context, options, handler,
// stop) and serve_connection(tls_stream, ...) serve as their plain forms
// in <canopy/io/http.hpp> (options, keep-alive, pipelining, streamed
// answers through response_writer, the drain), with the handshake bounded
// by request_timeout (a connection whose client has sent nothing yet is
// idle: the drain closes it at once); a write (a streamed piece's too) ends the
// connection once the socket took nothing for write_timeout (each send
// that makes progress starts the limit again), resetting it as the plain
// server does (SO_LINGER 0: the unsent answer is dropped, no
// close_notify); every end the stream survives (also the drain's close of
// a connection idle between requests) sends close_notify before the
// close, bounded by write_timeout and by the drain's deadline (with input
// left unread, e.g. a 413 to a client still sending,
// the plain server's lingering close follows, so no reset discards the
// answer). Both run the one connection loop, each over its
// own stream; the plain server's per-request code is as before.
//
// Session resumption: a server resumes by default
// (tls_server_options::session_resumption: TLS 1.3 and 1.2 tickets
// sealed with keys the context draws when made, and a cache of 20,480
// sessions for TLS 1.2 clients without tickets; a session lives 2 hours;
// false turns both off). A client takes tls_stream::session() after a
// connection (on TLS 1.3 only after its first read_some: the ticket comes
// after the handshake; before it, and with no ticket, the session is
// empty) and offers it with offer_session(session) on a new client stream
// to the same server, before handshake() (std::logic_error otherwise or on
// a server stream); resumed() then says whether the server accepted it (a
// declined session just means a full handshake). session() may run
// alongside a read or a write; a tls_session is a value any thread may
// copy and keep (native_handle(): its SSL_SESSION*; tls_session::adopt(p)
// takes over one reference to one). A resumed handshake checks no
// certificate, so offer_session offers a session only on a stream made for
// the same host (the exact string) from the same client context as the
// stream it came from, and quietly offers nothing otherwise (a full
// handshake; an adopted session is checked against the host name OpenSSL
// recorded in it only). Shut a stream down before dropping it: OpenSSL
// makes the session of a stream freed without close_notify unresumable.
//
// compile: fragment
//   namespace io = canopy::io;
//   io::tls_context client = io::tls_context::client({.ca_file = "ca.pem"});
//   const io::endpoint site = io::endpoint::loopback_v4(8443);
//   io::tls_session saved;   // from an earlier connection to site: its session()
//   io::tls_stream<io::tcp_stream> again(co_await io::tcp_stream::connect(site), client,
//                                        "example.org");
//   again.offer_session(saved);
//   co_await again.handshake();
//   const bool quick = again.resumed();   // true when the server took the session
//
// Benchmark beside nginx, Asio and tokio-rustls: bench/io/tls_bench.py.
// Cipher choices (both option structs): ciphersuites (TLS 1.3), cipher_list
// (TLS 1.2) and groups (key exchange), in OpenSSL's syntax; empty: OpenSSL's
// defaults; a string OpenSSL rejects throws std::invalid_argument from the
// factory, naming the option and the string; a peer sharing none of them
// fails the handshake.
#pragma once

#include "../detail/io/tls/https.hpp"
#include "../detail/io/tls/tls_context.hpp"
#include "../detail/io/tls/tls_stream.hpp"
#include "../io.hpp"
#include "http.hpp"
