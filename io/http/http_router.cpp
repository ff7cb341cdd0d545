// The response type's serialization and the router (http_handler.hpp).
#include <charconv>
#include <stdexcept>
#include <string>

#include "http_handler.hpp"

namespace canopy::io::http {

// The phrases of the IANA HTTP Status Code Registry: RFC 9110 15 (413 and
// 422 by its names, not the older "Payload Too Large", "Unprocessable
// Entity"), RFC 6585 (428, 429, 431, 511), RFC 7725 (451), RFC 8470 (425),
// WebDAV's (102, 207, 208, 423, 424, 507, 508), RFC 8297 (103), RFC 3229
// (226), RFC 2295 (506), RFC 2774 (510, marked obsoleted but registered).
// 306 and 418 are registered as unused; 104 only temporarily.
std::string_view reason_of(int status) noexcept {
  switch (status) {
    case 100:
      return "Continue";
    case 101:
      return "Switching Protocols";
    case 102:
      return "Processing";
    case 103:
      return "Early Hints";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 203:
      return "Non-Authoritative Information";
    case 204:
      return "No Content";
    case 205:
      return "Reset Content";
    case 206:
      return "Partial Content";
    case 207:
      return "Multi-Status";
    case 208:
      return "Already Reported";
    case 226:
      return "IM Used";
    case 300:
      return "Multiple Choices";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 305:
      return "Use Proxy";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 402:
      return "Payment Required";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 407:
      return "Proxy Authentication Required";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 411:
      return "Length Required";
    case 412:
      return "Precondition Failed";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 416:
      return "Range Not Satisfiable";
    case 417:
      return "Expectation Failed";
    case 421:
      return "Misdirected Request";
    case 422:
      return "Unprocessable Content";
    case 423:
      return "Locked";
    case 424:
      return "Failed Dependency";
    case 425:
      return "Too Early";
    case 426:
      return "Upgrade Required";
    case 428:
      return "Precondition Required";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 451:
      return "Unavailable For Legal Reasons";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    case 506:
      return "Variant Also Negotiates";
    case 507:
      return "Insufficient Storage";
    case 508:
      return "Loop Detected";
    case 510:
      return "Not Extended";
    case 511:
      return "Network Authentication Required";
    default:
      return {};  // unregistered: an empty reason-phrase (RFC 9112 4 allows it)
  }
}

void append_response(std::string& out, const response& r, bool close) {
  // A status the server cannot send as given becomes 500; the handler's
  // reason goes only with its own status.
  const int status = detail::sendable_status(r.status);
  const bool own_status = status == r.status;
  const bool content = detail::carries_content(status);
  char number[24];
  out.append("HTTP/1.1 ");
  out.append(number, std::to_chars(number, number + sizeof number, status).ptr);
  out.push_back(' ');
  out.append(own_status && !r.reason.empty() ? std::string_view(r.reason) : reason_of(status));
  if (content) {
    out.append("\r\nContent-Length: ");
    out.append(number, std::to_chars(number, number + sizeof number, r.body.size()).ptr);
  }
  if (!r.content_type.empty()) {
    out.append("\r\nContent-Type: ");
    out.append(r.content_type);
  }
  for (const auto& [name, value] : r.headers) {
    if (!content && detail::is_framing_field(name)) {
      continue;  // 204 and 304 have no content to frame (RFC 9110 8.6)
    }
    out.append("\r\n");
    out.append(name);
    out.append(": ");
    out.append(value);
  }
  if (close || r.close) {
    out.append("\r\nConnection: close");
  }
  out.append("\r\n\r\n");
  if (content) {
    out.append(r.body);
  }
}

router& router::add(std::string_view method, std::string_view path, handler respond) {
  if (method.empty()) {
    throw std::invalid_argument("canopy::io::http::router::add: an empty method");
  }
  if (path.empty() || path.front() != '/') {
    throw std::invalid_argument("canopy::io::http::router::add: the path \"" + std::string(path) +
                                "\" must start with '/'");
  }
  if (!respond) {
    throw std::invalid_argument("canopy::io::http::router::add: an empty handler for " +
                                std::string(method) + " " + std::string(path));
  }
  const bool prefix = path.back() == '*';
  if (prefix) {
    path.remove_suffix(1);
  }
  routes_.push_back({std::string(method), std::string(path), prefix, std::move(respond)});
  return *this;
}

task<response> router::operator()(const request& req, std::string& out,
                                  detail::body_sink* sink) const {
  const std::string_view path = req.path();
  const bool head = req.method == "HEAD";
  std::string allow;
  for (const route& each : routes_) {
    if (each.prefix ? !path.starts_with(each.path) : path != each.path) {
      continue;
    }
    if (req.method == each.method || (head && each.method == "GET")) {
      return each.respond(req, out, sink);
    }
    // Allow lists each method once (a method routed twice on this path
    // would otherwise repeat), and HEAD wherever GET is.
    const auto names = [&allow](std::string_view method) {
      for (std::size_t at = 0; at < allow.size();) {
        const std::size_t end = std::min(allow.find(", ", at), allow.size());
        if (std::string_view(allow).substr(at, end - at) == method) {
          return true;
        }
        at = end + 2;
      }
      return false;
    };
    for (const std::string_view method :
         {std::string_view(each.method), std::string_view(each.method == "GET" ? "HEAD" : "")}) {
      if (!method.empty() && !names(method)) {
        allow.append(allow.empty() ? "" : ", ").append(method);
      }
    }
  }
  response answer;
  answer.status = allow.empty() ? 404 : 405;
  answer.body = std::string(reason_of(answer.status));
  if (!allow.empty()) {
    answer.headers.emplace_back("Allow", std::move(allow));
  }
  append_response(out, answer, !req.keep_alive);
  return {};
}

}  // namespace canopy::io::http
