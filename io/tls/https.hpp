// https — the HTTP/1.1 server (io/http/http_server.hpp) over TLS: the same
// handler, options, keep-alive and pipelining, each connection a
// tls_stream<tcp_stream>. The public contract is in <canopy/io/tls.hpp>.
#pragma once

#include <stop_token>
#include <system_error>

#include "../../coroutine/task.hpp"
#include "../http/http_server.hpp"
#include "tls_stream.hpp"

namespace canopy::io::http {

// serve() (http_server.hpp) with every accepted connection served over TLS
// with `context` (a server context, shared with the caller's copies).
task<std::error_code> serve(tcp_listener& listener, tls_context context, server_options options,
                            handler respond, std::stop_token stop = {});

// One TLS connection, from its handshake (bounded by
// options.request_timeout; a failed or late one closes the connection
// quietly, and a stop closes at once one whose client has sent nothing
// yet, as an idle one) until it ends, as the plain serve_connection says (streamed
// answers included): a write ends the connection once the socket took
// nothing for write_timeout (each send that makes progress starts the
// limit again) with a reset, as the plain server's does (the unsent
// answer dropped, no close_notify); every end the stream survives (an
// answer with close, an error answer, an idle close, the drain's close of
// an idle connection, the client's close_notify) sends close_notify
// before the close (bounded by write_timeout, and cancelled with the
// connection at the drain's deadline), followed by the plain server's
// lingering close where input is left unread.
task<void> serve_connection(tls_stream<tcp_stream> stream, server_options options, handler respond,
                            std::stop_token stop = {});

}  // namespace canopy::io::http
