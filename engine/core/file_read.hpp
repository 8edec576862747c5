#pragma once
// The one way the engine reads a file that a user, a recipe or the environment names (config,
// --baseline, --replay, --html, recipe files, NCCL conf files, *_FILE variables, the job token,
// COMMSCRIPT_STDLIB, sysfs roots, the hash cache): never blocking, regular files only, bounded.
//
// A path is stat'ed first and opened only when it is a regular file (a device is never opened: an
// open can have effects), then opened O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC (a FIFO that
// took the place of the file between the two does not block the open) and checked again on the
// descriptor, and at most max_bytes are read whatever the size says (a file that grows while read,
// /proc files of size 0). Issue 20 (class 16) and issue 30 (class 4): a FIFO named by
// NCCL_CONF_FILE or passed by a recipe blocked the rank in open() until the backstop fired.
#include <sys/stat.h>

#include <cstddef>
#include <string>

namespace cs {

enum class ReadFailure { none, open, not_regular, too_large, read };

struct FileRead {
  std::string text;  // the file's bytes when ok()
  ReadFailure failure = ReadFailure::none;
  // Why not, as a phrase to put after the path: "cannot open: No such file or directory", "is a
  // FIFO, not a regular file", "larger than 1048576 bytes", "cannot read: Input/output error".
  std::string why;
  std::string kind;   // not_regular: "a FIFO", "a directory", "a character device" ...
  int error = 0;      // errno of open/read
  struct stat st {};  // of the open descriptor (or of the path when it was not opened)
  bool ok() const { return failure == ReadFailure::none; }
};

// The text of `path` if it is a regular file of at most max_bytes.
FileRead read_regular_file(const std::string& path, size_t max_bytes);

// Whether `path` is a regular file this process can open for reading, without reading it (the
// same checks as read_regular_file, no size bound): why as FileRead::why. No side effect on the
// file system; never blocks on a FIFO or a device.
FileRead probe_regular_file(const std::string& path);

// "a FIFO", "a directory", "a character device", "a block device", "a socket", "a symbolic link",
// "not a regular file": the kind of file st_mode says.
const char* file_kind(unsigned mode);

}  // namespace cs
