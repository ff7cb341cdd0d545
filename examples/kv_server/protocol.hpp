// protocol.hpp — the kv_server's line protocol: parsing a request line into
// a command, and the reply lines (the protocol itself is described at the
// top of main.cpp). Pure functions, no I/O.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kv {

inline constexpr std::size_t max_line = 4096;
inline constexpr std::size_t max_key = 256;
inline constexpr std::uint64_t max_expire_seconds = 1'000'000'000;

enum class verb { get, set, del, expire, ttl, ping, quit, invalid };

struct command {
  verb what = verb::invalid;
  std::string key;
  std::string value;          // SET's value
  std::uint64_t seconds = 0;  // EXPIRE's
  std::string error;          // verb::invalid: why, sent as "-ERR <error>"
};

namespace detail {

inline bool is_space(char c) { return c == ' ' || c == '\t'; }

// The next space-separated word of `rest` (and `rest` advanced past it).
inline std::string_view next_word(std::string_view& rest) {
  std::size_t begin = 0;
  while (begin < rest.size() && is_space(rest[begin])) {
    ++begin;
  }
  std::size_t end = begin;
  while (end < rest.size() && !is_space(rest[end])) {
    ++end;
  }
  const std::string_view word = rest.substr(begin, end - begin);
  rest.remove_prefix(end);
  return word;
}

inline bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const char x = (a[i] >= 'a' && a[i] <= 'z') ? static_cast<char>(a[i] - 32) : a[i];
    if (x != b[i]) {
      return false;
    }
  }
  return true;
}

inline command invalid(std::string why) {
  command bad;
  bad.error = std::move(why);
  return bad;
}

}  // namespace detail

// Parses one request line (without its "\n"; a trailing "\r" is dropped).
inline command parse(std::string_view line) {
  using detail::next_word;
  if (!line.empty() && line.back() == '\r') {
    line.remove_suffix(1);
  }
  std::string_view rest = line;
  const std::string_view name = next_word(rest);
  if (name.empty()) {
    return detail::invalid("empty command");
  }
  struct known {
    std::string_view name;
    verb what;
    int words;  // arguments after the name; -1: SET (a key, then the rest)
  };
  static constexpr known table[] = {
      {"GET", verb::get, 1},       {"SET", verb::set, -1}, {"DEL", verb::del, 1},
      {"EXPIRE", verb::expire, 2}, {"TTL", verb::ttl, 1},  {"PING", verb::ping, 0},
      {"QUIT", verb::quit, 0},
  };
  const known* found = nullptr;
  for (const known& each : table) {
    if (detail::equals_ignoring_case(name, each.name)) {
      found = &each;
    }
  }
  if (found == nullptr) {
    // Echoed back printable: at most 32 bytes, others shown as '?'.
    std::string shown(name.substr(0, 32));
    for (char& c : shown) {
      c = (c >= 0x20 && c < 0x7f) ? c : '?';
    }
    return detail::invalid("unknown command '" + shown + "'");
  }
  command parsed;
  parsed.what = found->what;
  if (found->words != 0) {
    const std::string_view key = next_word(rest);
    if (key.empty()) {
      return detail::invalid("wrong number of arguments for " + std::string(found->name));
    }
    if (key.size() > max_key) {
      return detail::invalid("key longer than 256 bytes");
    }
    parsed.key = key;
  }
  if (found->what == verb::set) {
    // The value: everything after the one separator following the key
    // (it may hold spaces, and may be empty).
    if (rest.empty()) {
      return detail::invalid("wrong number of arguments for SET");
    }
    parsed.value = rest.substr(1);
    return parsed;
  }
  if (found->what == verb::expire) {
    const std::string_view seconds = next_word(rest);
    const auto [end, error] =
        std::from_chars(seconds.data(), seconds.data() + seconds.size(), parsed.seconds);
    if (seconds.empty() || error != std::errc() || end != seconds.data() + seconds.size() ||
        parsed.seconds == 0 || parsed.seconds > max_expire_seconds) {
      return detail::invalid("EXPIRE takes a whole number of seconds, 1..1000000000");
    }
  }
  if (!next_word(rest).empty()) {
    return detail::invalid("wrong number of arguments for " + std::string(found->name));
  }
  return parsed;
}

// Reply lines, each with its "\n".
inline std::string reply_ok() { return "+OK\n"; }
inline std::string reply_value(std::string_view value) {
  std::string line;
  line.reserve(value.size() + 2);
  line += '$';
  line += value;
  line += '\n';
  return line;
}
inline std::string reply_nil() { return "(nil)\n"; }
inline std::string reply_integer(long long number) { return ":" + std::to_string(number) + "\n"; }
inline std::string reply_error(std::string_view message) {
  return "-ERR " + std::string(message) + "\n";
}

}  // namespace kv
