#include "file_read.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cs {

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

FileRead failed(FileRead& r, ReadFailure f, const std::string& why, int err = 0) {
  r.failure = f;
  r.why = why;
  r.error = err;
  r.text.clear();
  return std::move(r);
}

// The failure of a system call, with its errno.
FileRead failed_call(FileRead& r, ReadFailure f, const char* what) {
  const int err = errno;
  return failed(r, f, std::string(what) + std::strerror(err), err);
}

FileRead not_regular(FileRead& r) {
  r.kind = file_kind(r.st.st_mode);
  return failed(r, ReadFailure::not_regular, "is " + r.kind + ", not a regular file");
}

// stat, then open only a regular file, then fstat the descriptor: r.st, and fd.fd >= 0 when ok.
FileRead open_regular(const std::string& path, Fd* fd) {
  FileRead r;
  if (::stat(path.c_str(), &r.st) != 0) return failed_call(r, ReadFailure::open, "cannot open: ");
  if (!S_ISREG(r.st.st_mode)) return not_regular(r);
  fd->fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd->fd < 0) return failed_call(r, ReadFailure::open, "cannot open: ");
  if (::fstat(fd->fd, &r.st) != 0) return failed_call(r, ReadFailure::read, "cannot read: ");
  if (!S_ISREG(r.st.st_mode)) return not_regular(r);  // replaced between stat and open
  return r;
}

}  // namespace

const char* file_kind(unsigned mode) {
  return S_ISDIR(mode)    ? "a directory"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
         : S_ISLNK(mode)  ? "a symbolic link"
                          : "not a regular file";
}

FileRead read_regular_file(const std::string& path, size_t max_bytes) {
  Fd fd;
  FileRead r = open_regular(path, &fd);
  if (!r.ok()) return r;
  const std::string too_large = "larger than " + std::to_string(max_bytes) + " bytes";
  if (static_cast<unsigned long long>(r.st.st_size) > max_bytes) return failed(r, ReadFailure::too_large, too_large);
  r.text.reserve(static_cast<size_t>(r.st.st_size));
  char buf[65536];
  for (;;) {  // at most max_bytes, whatever the size said
    const ssize_t n = ::read(fd.fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return failed_call(r, ReadFailure::read, "cannot read: ");
    if (n == 0) break;
    if (r.text.size() + static_cast<size_t>(n) > max_bytes) return failed(r, ReadFailure::too_large, too_large);
    r.text.append(buf, static_cast<size_t>(n));
  }
  return r;
}

FileRead probe_regular_file(const std::string& path) {
  Fd fd;
  return open_regular(path, &fd);
}

}  // namespace cs
