// <canopy/io/http.hpp> — the small HTTP/1.1 server of examples/http_hello
// and the demo: keep-alive, pipelining, strict parsing, Content-Length and
// chunked request bodies, request and write timeouts, a handler per request
// (docs/io.md, "HTTP"). The contract is at the top of
// detail/io/http/http_server.hpp. Link canopy.
#pragma once

#include "../detail/io/http/http_server.hpp"
#include "../io.hpp"
