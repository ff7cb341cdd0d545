// The response type's serialization and the router (http_handler.hpp).
#include <charconv>
#include <stdexcept>
#include <string>

#include "http_handler.hpp"

namespace canopy::io::http {

std::string_view reason_of(int status) noexcept {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";  // RFC 9110 15.5.14 (was "Payload Too Large")
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";  // RFC 6585 5
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

void append_response(std::string& out, const response& r, bool close) {
  char number[24];
  out.append("HTTP/1.1 ");
  const auto status_end = std::to_chars(number, number + sizeof number, r.status).ptr;
  out.append(number, status_end);
  out.push_back(' ');
  out.append(r.reason.empty() ? reason_of(r.status) : std::string_view(r.reason));
  out.append("\r\nContent-Length: ");
  const auto length_end = std::to_chars(number, number + sizeof number, r.body.size()).ptr;
  out.append(number, length_end);
  if (!r.content_type.empty()) {
    out.append("\r\nContent-Type: ");
    out.append(r.content_type);
  }
  for (const auto& [name, value] : r.headers) {
    out.append("\r\n");
    out.append(name);
    out.append(": ");
    out.append(value);
  }
  if (close || r.close) {
    out.append("\r\nConnection: close");
  }
  out.append("\r\n\r\n");
  out.append(r.body);
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
  std::string_view path = req.target;
  path = path.substr(0, path.find('?'));
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
