// unix_probe — how unix_listener::bind (io/unix.cpp) tells a stale socket
// file (a crashed server's) from a live server's without disturbing the
// live one. Internal (canopy::io::detail).
//
// A connect is the one question every server answers, but a live server
// answers it with a connection in its accept queue: it then accepts a peer
// that sends nothing and closes. So the kernel's tables are asked first:
//   1. sock_diag (NETLINK_SOCK_DIAG, the table `ss -xl` reads): the
//      listening Unix sockets with the device and inode of the file each
//      is bound to, compared with the file's own (lstat), so a relative
//      name, a symlinked directory or a file replaced since is told apart;
//   2. where sock_diag is not there (a kernel without unix_diag),
//      /proc/net/unix: a listening socket whose name is the path, as
//      given or made absolute (a name another process bound relative to
//      its own directory is not recognised there);
// and a connect decides only what neither says is listening. That
// connect is still needed: a socket file whose socket is alive but does
// not listen (a datagram socket, one bound and not yet listening) and a
// listener in another network namespace (which neither table shows) are
// told from a stale file only by it.
#pragma once

#include <sys/stat.h>

#include <string>

#include "unix.hpp"

namespace canopy::io::detail {

enum class listener_answer {
  listening,  // a socket listens on the file
  none,       // the table was read and no listening socket is bound to it
  unknown,    // the table could not be read (or cannot tell)
};

// sock_diag: is a listening Unix socket of this network namespace bound
// to the file `file` (its lstat) describes?
listener_answer listening_by_diag(const struct stat& file) noexcept;

// /proc/net/unix (`table`: another file of its format, for tests): is a
// listening socket's name `path`, or `path` made absolute? Never `none`:
// a name bound relative to another directory cannot be matched.
listener_answer listening_by_table(const std::string& path,
                                   const char* table = "/proc/net/unix") noexcept;

// The stale socket file rule (io/unix.hpp): true when `local` names a
// socket file nobody accepts on, which bind may remove.
bool is_stale_socket_file(const unix_endpoint& local) noexcept;

}  // namespace canopy::io::detail
