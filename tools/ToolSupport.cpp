//===- ToolSupport.cpp - What the command-line tools share -----------------===//

#include "tools/ToolSupport.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <iterator>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace nimble::tools {

std::string displayName(const std::string &path) { return path == "-" ? "<stdin>" : path; }

bool readInput(const std::string &path, std::string &out, std::string &error) {
  if (path == "-") {
    out.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return true;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    error = "cannot read '" + path + "': it is a directory";
    return false;
  }
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  out.clear();
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  bool bad = std::ferror(f);
  std::fclose(f);
  if (bad) {
    error = "cannot read '" + path + "': " + std::strerror(errno);
    return false;
  }
  return true;
}

namespace {
/// Writes all of `data` to `fd`, retrying on EINTR; false with errno set.
bool writeAll(int fd, std::string_view data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t w = ::write(fd, data.data() + off, data.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    off += static_cast<size_t>(w);
  }
  return true;
}

bool writeAll(int fd, const std::vector<std::string_view> &pieces) {
  for (std::string_view p : pieces)
    if (!writeAll(fd, p)) return false;
  return true;
}
} // namespace

bool writeOutputAtomically(const std::string &path, std::string_view data, std::string &error) {
  return writeOutputAtomically(path, std::vector<std::string_view>{data}, error);
}

bool writeOutputAtomically(const std::string &path, const std::vector<std::string_view> &data,
                           std::string &error) {
  if (path == "-") {
    for (std::string_view p : data) std::cout.write(p.data(), static_cast<std::streamsize>(p.size()));
    std::cout.flush();
    if (!std::cout) {
      error = "cannot write to standard output";
      return false;
    }
    return true;
  }
  // A device, FIFO or socket (`-o /dev/null`, a pipe) is written in place:
  // renaming a temporary over it would replace the special file itself.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    int out = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (out < 0) {
      error = "cannot write '" + path + "': " + std::strerror(errno);
      return false;
    }
    bool ok = writeAll(out, data);
    int saved = errno;
    if (::close(out) != 0 && ok) {
      ok = false;
      saved = errno;
    }
    if (!ok) error = "cannot write '" + path + "': " + std::strerror(saved);
    return ok;
  }
  return writeOutputAtomicallyWith(
      path,
      [&](int fd, std::string &why) {
        if (writeAll(fd, data)) return true;
        why = std::strerror(errno);
        return false;
      },
      error);
}

bool isRegularOutput(const std::string &path) {
  if (path == "-") return false;
  struct stat st;
  return ::stat(path.c_str(), &st) != 0 ? errno == ENOENT : S_ISREG(st.st_mode);
}

bool writeOutputAtomicallyWith(const std::string &path, const std::function<bool(int fd, std::string &why)> &produce,
                               std::string &error) {
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    error = "cannot write '" + path + "': " + std::strerror(errno);
    return false;
  }
  if (std::string why; !produce(fd, why)) {
    error = "cannot write '" + path + "': " + why;
    ::close(fd);
    ::unlink(tmp.c_str());
    return false;
  }
  // Keep the usual permissions of a new file (mkstemp creates 0600).
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot write '" + path + "': " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

std::vector<Chunk> splitInput(std::string_view text) {
  std::vector<Chunk> chunks;
  size_t start = 0, pos = 0;
  uint32_t line = 1, startLine = 1;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    std::string_view l = text.substr(pos, end == std::string_view::npos ? text.npos : end - pos);
    std::string_view trimmed = l;
    while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\r')) trimmed.remove_suffix(1);
    if (trimmed == "// -----") {
      chunks.push_back({text.substr(start, pos - start), startLine});
      start = end == std::string_view::npos ? text.size() : end + 1;
      startLine = line + 1;
    }
    if (end == std::string_view::npos) break;
    pos = end + 1;
    ++line;
  }
  chunks.push_back({text.substr(start), startLine});
  return chunks;
}

int usageError(std::string_view tool, const std::string &msg) {
  std::cerr << tool << ": error: " << msg << "\nRun '" << tool << " --help' for usage.\n";
  return kExitUsage;
}

void addCommaSeparated(std::set<std::string> &to, const std::string &list) {
  std::stringstream ss(list);
  std::string n;
  while (std::getline(ss, n, ','))
    if (!n.empty()) to.insert(n);
}

std::optional<std::string> flagValue(std::string_view arg, std::string_view flag) {
  if (!arg.starts_with(flag)) return std::nullopt;
  std::string_view rest = arg.substr(flag.size());
  if (rest.empty()) return std::string();
  if (rest[0] != '=') return std::nullopt;
  return std::string(rest.substr(1));
}

bool boolFlag(std::string_view arg, std::string_view flag, bool &value, std::string &error) {
  if (flag.starts_with("--") && arg == "--no-" + std::string(flag.substr(2))) {
    value = false;
    return true;
  }
  std::optional<std::string> v = flagValue(arg, flag);
  if (!v) return false;
  if (v->empty() || *v == "true") value = true;
  else if (*v == "false") value = false;
  else error = std::string(flag) + " takes true or false, got '" + *v + "'";
  return true;
}

} // namespace nimble::tools
