// <canopy/io/http.hpp> — the small HTTP/1.1 server of examples/http_hello
// and the demo: keep-alive, pipelining, strict parsing, Content-Length and
// chunked request bodies, request and write timeouts, handlers with state
// or coroutines, streamed (chunked) answers, a router, and a drain on a
// stop token (docs/io.md, "HTTP").
// Link canopy.
//
//   #include <atomic>
//   #include <canopy/io/http.hpp>
//   #include <canopy/sync.hpp>                                      // canopy::mutex
//   #include <stop_token>
//   #include <string>
//   namespace http = canopy::io::http;
//   std::atomic<long> hits{0};
//   canopy::mutex lock;
//   http::router routes;
//   routes.get("/hits", [&hits](const http::request&) {        // state
//           return std::to_string(hits.fetch_add(1) + 1);           // 200 text/plain
//         })
//         .post("/put", [&lock](const http::request& req) -> canopy::task<http::response> {
//           auto held = co_await lock.lock();                       // it may await
//           http::response answer;
//           answer.status = 201;
//           answer.body = std::string(req.body);
//           co_return answer;
//         })
//         .get("/count", [](const http::request&, http::response_writer& body)
//                            -> canopy::task<void> {                 // streamed, chunked
//           body.head().content_type = "text/csv";
//           for (int i = 0; i < 1000; ++i) {
//             if (!co_await body.write(std::to_string(i) + "\n")) {
//               co_return;                                          // client gone, or HEAD
//             }
//           }
//         });
//   std::stop_source stop;   // stop.request_stop() from any thread
//   std::error_code error =
//       co_await http::serve(listener, {}, std::move(routes), stop.get_token());
//
// Types (namespace canopy::io::http):
//   request          what the handler gets: method, target, version_minor,
//                    headers (find(name), case-insensitive), body (a
//                    chunked body already decoded), keep_alive. Its views
//                    point into the connection's buffer: valid until the
//                    handler's answer is complete (also across a coroutine
//                    handler's awaits), not after;
//   response         status (200), reason (empty: the standard phrase,
//                    reason_of(status): those of the IANA registry, RFC
//                    9110's and the rest; empty for an unregistered status),
//                    content_type ("text/plain"; empty: none), headers (more
//                    fields, as given), body, close. The server writes the
//                    status line, Content-Length, the fields, and
//                    `Connection: close` where the connection ends. A
//                    status outside 200-599 (an interim 1xx, 0, negative,
//                    600 and above) is the handler's mistake and goes out
//                    as 500 Internal Server Error (the standard reason; the
//                    fields and body as set). 204 and 304 have no content
//                    (RFC 9110 8.6): sent without Content-Length and
//                    without body — a body set on them is dropped, and so
//                    are Content-Length and Transfer-Encoding fields among
//                    headers (append_response does the same);
//   response_writer  a body sent in pieces, for a handler that does not know
//                    its length up front or makes it over time (reading a
//                    channel, a file through run_blocking). head(): the
//                    response to answer with (set before the first write;
//                    its body, if any, goes out first). co_await
//                    write(piece) -> bool: the head goes with the first
//                    write, with `Transfer-Encoding: chunked` and no
//                    Content-Length (never a Content-Length or
//                    Transfer-Encoding field of the handler's own); each
//                    write sends its piece as one chunk and completes once
//                    the socket took it (a client that reads slowly holds
//                    the handler back; one that reads nothing for
//                    write_timeout ends the connection; every 16th write
//                    yields the worker, so a handler that makes its pieces
//                    without waiting neither starves other connections nor
//                    escapes the drain's cancel), an empty piece
//                    sends only the head; false: no more of the body goes
//                    out (the client is gone, or the request is HEAD) —
//                    return, later writes return false at once. When the
//                    handler returns, the server sends the last chunk; if
//                    it wrote nothing, head() is sent as a complete
//                    response (Content-Length). HTTP/1.0 (which knows no
//                    chunks): the body is sent as written and ends at the
//                    close (`Connection: close`, also for a 1.0 keep-alive
//                    request). HEAD, and a head() with status 204 or 304:
//                    the head only (no chunked framing; writes return
//                    false). The status rule of response applies. An exception from the
//                    handler, or its cancel, after the head went out closes
//                    the connection without the last chunk (HTTP/1.0:
//                    resets it), so the answer never looks complete; a drain
//                    stop requested before the head goes out adds
//                    `Connection: close`, one after it closes the
//                    connection after the last chunk. Requests pipelined
//                    behind a streamed answer wait until it ends. Over
//                    HTTPS (<canopy/io/tls.hpp>) the same: a write's send
//                    ends once the socket took nothing for write_timeout
//                    (each send that makes progress starts it again), and
//                    the connection is then reset. The writer
//                    lives for the handler's call: use it from that
//                    handler's task, one write at a time (not from a task
//                    it spawns);
//   handler          any of these, copied in once (its state shared by every
//                    connection, never copied per request):
//                      void (*)(const request&, std::string& out)  the plain
//                        form: appends exactly one complete response
//                        (append_response helps);
//                      a callable (lambda with captures, std::function, ...)
//                        (const request&) -> response | std::string (the body
//                        of a 200 text/plain) | task<response>;
//                      a callable (const request&, std::string& out) -> void
//                        (appends) or task<response> (an empty task: it
//                        appended; else the server awaits it);
//                      a callable (const request&, response_writer&) ->
//                        task<void>: a streamed answer (response_writer).
//                    It is called on the worker running the connection, one
//                    request at a time per connection but concurrently for
//                    different connections: its state must be safe for
//                    that (atomics, canopy::mutex). A task<response> it
//                    returns is awaited inline by the connection (no spawn),
//                    so it may co_await anything a task may: a lock, a
//                    channel, canopy::run_blocking, a sleep. An exception
//                    from it (or from its task) ends the connection (the
//                    socket is closed; its request is not answered, the
//                    answers of requests pipelined before it go out
//                    first); under serve() it goes to the
//                    executor's on_detached_exception handler. An empty
//                    handler (a null function pointer, an empty
//                    std::function): serve() and serve_connection() throw
//                    std::invalid_argument;
//   router           add(method, path, handler), get(path, h), post(path, h):
//                    a path matches the target's path (before '?'; of an
//                    absolute-form target, "http://host/p?q" as sent
//                    through a proxy, the part after the authority, "/" if
//                    none) exactly, or, ending in '*', every path that
//                    starts with what precedes it; the first route added that matches wins
//                    (GET routes answer HEAD too). No path matches: 404; a
//                    path matches but not the method: 405 with an Allow
//                    field. Routes are added before serving (not thread-safe
//                    while served). add() throws std::invalid_argument for an
//                    empty method, a path not starting with '/', an empty
//                    handler. A router is a handler (std::move it in);
//   server_options   limits (max_head_bytes 8192, max_headers 64,
//                    max_body_bytes 1 MiB; a byte limit at SIZE_MAX: no
//                    limit but memory), request_timeout (10 s),
//                    write_timeout (30 s), drain_timeout (5 s); each timeout
//                    positive (milliseconds::max(): no limit), else
//                    std::invalid_argument naming the field; max_headers at
//                    most 64 (request::header_capacity: the parsed fields
//                    live in a fixed array, no allocation per request),
//                    else std::invalid_argument naming the cap;
//   server_counters  counters(): connections, requests (each once its
//                    answer is ready to go out, also on a connection still
//                    open), bad_requests, timeouts (408), idle_closes,
//                    write_timeouts, over the process (relaxed reads).
// Calls:
//   serve(listener, options, handler, stop_token = {}) -> task<error_code>:
//     accepts until the stop (never, without a stop source), one child task
//     per connection; after the stop (or a non-transient accept error,
//     returned) it stops accepting, lets each connection finish the request
//     under way (answered with `Connection: close`; requests pipelined
//     behind it, even those already read, are not answered: the connection
//     closes after it), closes the connections idle between requests at
//     once, waits up to drain_timeout, then cancels the rest (their
//     sockets close), and returns only once every connection task has
//     ended. The token may come from any
//     std::stop_source (request_stop() from any thread: a signal_set task,
//     a task_group's stop_token()). Cancelling serve's task (or racing it
//     with canopy::stopped and losing) cancels every connection at once,
//     with no drain;
//   serve_connection(stream, options, handler, stop_token = {}) -> task<void>:
//     one connection until it ends (or, after the stop, as above);
//   append_response(out, status, reason, content_type, body, close) and
//   append_response(out, response, close): append one complete response
//   (the status rule and the 204/304 rule of response apply; reason
//   goes out with its own status only).
// Per connection, the server itself:
//   * keep-alive until the client closes, sends `Connection: close`
//     (answered, then closed), speaks HTTP/1.0 without keep-alive, or the
//     answer says `Connection: close` (response::close, or the field an
//     appending handler wrote: closed after it, requests pipelined behind
//     it unanswered); an HTTP/1.0 request kept alive gets
//     `Connection: keep-alive` added (unless the handler wrote a
//     Connection field);
//   * HEAD: only the head of the handler's answer goes out (a handler
//     answers HEAD as GET; Content-Length is the GET answer's);
//   * request bodies by Content-Length or `Transfer-Encoding: chunked`
//     (decoded; extensions ignored, trailers dropped), within
//     max_body_bytes;
//   * pipelining: every complete request that arrived is answered in order,
//     the answers in one write (a streamed answer sends those before it with
//     its head, and those after it wait until it ends);
//   * `Expect: 100-continue` (HTTP/1.1): `100 Continue` once the head passed
//     the limits;
//   * answered with `Connection: close`, then closed: 400 for a malformed
//     request (also a bare LF line end, a byte >= 0x80 in the target, a bad
//     chunk, Transfer-Encoding with Content-Length or in HTTP/1.0; a
//     request with two Host fields or one that is not host[:port], RFC
//     9112 3.2; one without Host is served, HTTP/1.1 too); 413 for
//     a body over max_body_bytes (from the Content-Length, or as a chunked
//     body grows); 431 for a head over max_head_bytes or max_headers (also
//     chunked trailers); 501 for a transfer coding other than chunked
//     alone; 505 for a version of another major number than 1 (HTTP/2.0,
//     HTTP/0.9; HTTP/1 with a minor other than 0 or 1 is 400); 408 for a request begun but not complete within
//     request_timeout of the previous answer (or the accept);
//   * closed quietly: a connection idle for request_timeout (no 408 the
//     client did not ask for); a write that makes no progress for
//     write_timeout (reset, the unsent answer dropped; a slow client that
//     keeps reading is served); I/O errors (reset, EPIPE).
// Who may call: serve and serve_connection inside a task (co_await them, or
// spawn them); their bad options or an empty handler throw
// std::invalid_argument at their first co_await (or from the spawned
// handle's get()). The timeouts need the executor's timers: with_reactor
// has them unless reactor_options::timers is false; without them the first
// timed wait throws std::logic_error naming what to create.
#pragma once

#include "../detail/io/http/http_server.hpp"
#include "../io.hpp"
