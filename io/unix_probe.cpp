#include "unix_probe.hpp"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>

namespace canopy::io::detail {

namespace {

// The kernel reports a Unix socket's listening state as TCP's.
constexpr unsigned listen_state = 10;  // TCP_LISTEN
// __SO_ACCEPTCON in /proc/net/unix's Flags: the socket listens.
constexpr unsigned accepting_flag = 0x10000;

// A dump is a few messages per page of sockets; the bounds only keep a
// misbehaving kernel from holding bind() for long.
constexpr int max_receives = 100'000;
constexpr std::chrono::seconds dump_time_limit{2};
constexpr std::size_t dump_buffer_size = std::size_t{32} * 1024;

// The kernel's own encoding of a device number (what sock_diag reports):
// 12 bits of major above 20 of minor, unlike glibc's dev_t.
bool same_device(std::uint32_t kernel_dev, dev_t user_dev) noexcept {
  return (kernel_dev >> 20U) == major(user_dev) && (kernel_dev & 0xfffffU) == minor(user_dev);
}

// One message of the dump: true when it is a listening socket bound to `file`.
bool bound_to(const nlmsghdr* header, const struct stat& file) noexcept {
  if (header->nlmsg_len < NLMSG_LENGTH(sizeof(unix_diag_msg))) {
    return false;
  }
  const auto* socket = static_cast<const unix_diag_msg*>(NLMSG_DATA(header));
  auto length = static_cast<int>(header->nlmsg_len - NLMSG_LENGTH(sizeof(unix_diag_msg)));
  // RTA_NEXT takes a mutable pointer; the attributes are only read.
  auto* attribute = const_cast<rtattr*>(reinterpret_cast<const rtattr*>(socket + 1));
  for (; RTA_OK(attribute, length); attribute = RTA_NEXT(attribute, length)) {
    if (attribute->rta_type == UNIX_DIAG_VFS && RTA_PAYLOAD(attribute) >= sizeof(unix_diag_vfs)) {
      unix_diag_vfs vfs{};
      std::memcpy(&vfs, RTA_DATA(attribute), sizeof vfs);
      // The inode is reported in 32 bits; the device check keeps a
      // truncated match from another file system out.
      return vfs.udiag_vfs_ino == static_cast<std::uint32_t>(file.st_ino) &&
             same_device(vfs.udiag_vfs_dev, file.st_dev);
    }
  }
  return false;
}

struct closing_fd {
  int fd;
  explicit closing_fd(int owned) noexcept : fd(owned) {}
  closing_fd(const closing_fd&) = delete;
  closing_fd& operator=(const closing_fd&) = delete;
  ~closing_fd() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
};

bool refused_connect(const unix_endpoint& local) noexcept {
  // Non-blocking: a live server whose backlog is full answers EAGAIN at
  // once, where a blocking connect would wait for it to accept.
  const closing_fd probe{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)};
  if (probe.fd < 0) {
    return false;
  }
  return ::connect(probe.fd, local.data(), local.size()) != 0 && errno == ECONNREFUSED;
}

}  // namespace

listener_answer listening_by_diag(const struct stat& file) noexcept {
  const closing_fd diag{::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG)};
  if (diag.fd < 0) {
    return listener_answer::unknown;
  }
  timeval wait{.tv_sec = 1, .tv_usec = 0};
  (void)::setsockopt(diag.fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);

  struct {
    nlmsghdr header;
    unix_diag_req request;
  } message{};
  constexpr std::uint32_t sequence = 1;
  message.header.nlmsg_len = sizeof message;
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  message.header.nlmsg_seq = sequence;
  message.request.sdiag_family = AF_UNIX;
  message.request.udiag_states = 1U << listen_state;
  message.request.udiag_show = UDIAG_SHOW_VFS;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(diag.fd, &message, sizeof message, 0, reinterpret_cast<const sockaddr*>(&kernel),
               sizeof kernel) != static_cast<ssize_t>(sizeof message)) {
    return listener_answer::unknown;
  }

  // On the heap: bind may run on a fiber's small stack.
  const std::unique_ptr<char[]> buffer(new (std::nothrow) char[dump_buffer_size]);
  if (!buffer) {
    return listener_answer::unknown;
  }
  const auto give_up = std::chrono::steady_clock::now() + dump_time_limit;
  for (int receive = 0; receive < max_receives; ++receive) {
    if (std::chrono::steady_clock::now() > give_up) {
      return listener_answer::unknown;
    }
    const ssize_t got = ::recv(diag.fd, buffer.get(), dump_buffer_size, 0);
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      return listener_answer::unknown;  // a timeout too
    }
    // The messages of this datagram, walked as NLMSG_OK/NLMSG_NEXT do,
    // with sizes kept unsigned.
    const auto total = static_cast<std::size_t>(got);
    std::size_t offset = 0;
    while (total - offset >= sizeof(nlmsghdr)) {
      const auto* header = reinterpret_cast<const nlmsghdr*>(buffer.get() + offset);
      if (header->nlmsg_len < sizeof(nlmsghdr) || header->nlmsg_len > total - offset) {
        return listener_answer::unknown;  // a truncated message: not a dump we can read
      }
      // The last message's padding may lie past the datagram's end.
      offset = std::min<std::size_t>(total, offset + NLMSG_ALIGN(header->nlmsg_len));
      if (header->nlmsg_seq != sequence) {
        continue;
      }
      if (header->nlmsg_type == NLMSG_DONE) {
        return listener_answer::none;
      }
      if (header->nlmsg_type == NLMSG_ERROR) {
        return listener_answer::unknown;  // no unix_diag in this kernel, say
      }
      if (header->nlmsg_type == SOCK_DIAG_BY_FAMILY && bound_to(header, file)) {
        return listener_answer::listening;
      }
    }
    if (got == 0) {
      return listener_answer::unknown;
    }
  }
  return listener_answer::unknown;
}

listener_answer listening_by_table(const std::string& path, const char* table) noexcept {
  std::FILE* sockets = std::fopen(table, "re");
  if (sockets == nullptr) {
    return listener_answer::unknown;
  }
  // The name a server in this directory would have bound, made absolute.
  std::string absolute;
  if (!path.empty() && path.front() != '/') {
    char directory[4096];
    if (::getcwd(directory, sizeof directory) != nullptr) {
      absolute = std::string(directory) + "/" + path;
    }
  }
  listener_answer answer = listener_answer::unknown;
  // A line is its fields and a name of at most 108 bytes; a longer one is
  // not of this format and is skipped whole.
  char line[512];
  bool skipping = false;
  while (std::fgets(line, sizeof line, sockets) != nullptr) {
    const std::size_t length = std::strlen(line);
    const bool whole = length > 0 && line[length - 1] == '\n';
    if (skipping || !whole) {
      skipping = !whole;
      continue;
    }
    line[length - 1] = '\0';
    // Num: RefCount Protocol Flags Type St Inode Path
    unsigned flags = 0;
    int name_at = -1;
    if (std::sscanf(line, "%*s %*x %*x %x %*x %*x %*u %n", &flags, &name_at) != 1 || name_at < 0 ||
        (flags & accepting_flag) == 0) {
      continue;
    }
    const char* name = line + name_at;
    if (path == name || (!absolute.empty() && absolute == name)) {
      answer = listener_answer::listening;
      break;
    }
  }
  std::fclose(sockets);
  return answer;
}

bool is_stale_socket_file(const unix_endpoint& local) noexcept {
  const std::string path = local.to_string();
  struct stat file{};
  if (::lstat(path.c_str(), &file) != 0 || !S_ISSOCK(file.st_mode)) {
    return false;
  }
  listener_answer answer = listening_by_diag(file);
  if (answer == listener_answer::unknown) {
    answer = listening_by_table(path);
  }
  if (answer == listener_answer::listening) {
    return false;  // live, and never connected to
  }
  return refused_connect(local);
}

}  // namespace canopy::io::detail
