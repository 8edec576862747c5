#include "report.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>

#include "error.hpp"
#include "json_text.hpp"

namespace cs {

bool readable_report_schema(const nlohmann::json& schema) {
  return schema.is_string() && (schema == "commscript.report/1" || schema == "commscript.report/2");
}

Report::Report(const std::filesystem::path& dir, bool writer) : writer_(writer), dir_(dir) {
  doc_ = {{"schema", kReportSchema},
          {"commscript", nlohmann::json::object()},
          {"recipe", nlohmann::json::object()},
          {"run", nlohmann::json::object()},
          {"env", nlohmann::json::object()},
          {"topology", nlohmann::json::object()},
          {"results", nlohmann::json::array()},
          {"findings", nlohmann::json::array()},
          {"scorecard", nlohmann::json::object()},
          {"chaos", nlohmann::json::array()},
          {"incidents", nlohmann::json::array()}};
  if (!writer_) return;
  // An output that cannot be written is exit 6 (docs/reference.md), whatever the reason: a
  // read-only mount, an existing file, /proc, a symlink loop, a name over PATH_MAX.
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (!ec && !std::filesystem::is_directory(dir_, ec) && !ec) ec = std::make_error_code(std::errc::not_a_directory);
  if (ec) throw Error(ExitCode::output, "--out " + dir_.string() + ": cannot create directory: " + ec.message());
  errno = 0;
  jsonl_ = std::fopen((dir_ / "results.jsonl").c_str(), "w");
  if (!jsonl_)
    throw Error(ExitCode::output,
                "--out " + dir_.string() + ": cannot write results.jsonl: " + std::strerror(errno ? errno : EIO));
}

Report::~Report() {
  if (jsonl_) std::fclose(jsonl_);
}

void Report::add_result(nlohmann::json r) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  if (!jsonl_) {
    doc_["results"].push_back(std::move(r));
    return;
  }
  const std::string line = json_text(r) + "\n";
  doc_["results"].push_back(std::move(r));              // moved, not copied: half a million of them at 1024 ranks
  const long before = static_cast<long>(jsonl_bytes_);  // what ftell would say, without a system call
  errno = 0;
  if (std::fwrite(line.data(), 1, line.size(), jsonl_) == line.size() && std::fflush(jsonl_) == 0) {
    jsonl_bytes_ += line.size();
    // Written, but perhaps into a file that is no longer there (the output directory removed
    // during the run): appending would go on silently into nothing.
    struct stat st {};
    if (fstat(fileno(jsonl_), &st) != 0 || st.st_nlink > 0) return;
    std::fclose(jsonl_);
    jsonl_ = nullptr;
    throw Error(ExitCode::output, (dir_ / "results.jsonl").string() +
                                      " was removed during the run (the output directory with it?): " +
                                      std::strerror(ENOENT) + "; the measurements in it are gone");
  }
  // Disk full, the directory gone, ...: cut the half line off so that every line stays a
  // measurement, stop appending, and end the run with the OS's reason.
  const int err = errno ? errno : EIO;
  std::fclose(jsonl_);
  jsonl_ = nullptr;
  if (before >= 0) {
    if (std::FILE* f = std::fopen((dir_ / "results.jsonl").c_str(), "r+")) {
      (void)ftruncate(fileno(f), before);
      std::fclose(f);
    }
  }
  throw Error(ExitCode::output, "cannot append to " + (dir_ / "results.jsonl").string() + ": " + std::strerror(err) +
                                    " (the measurements before this one are in it)");
}

void Report::add(const std::string& section, const nlohmann::json& item) {
  std::lock_guard<std::recursive_mutex> g(mu_);
  doc_[section].push_back(item);
}

size_t Report::count(const std::string& section) const {
  auto it = doc_.find(section);
  return it == doc_.end() ? 0 : it->size();
}

namespace {

// nlohmann's serializer writing straight into a file through a buffer: report.json is never
// held as one string (105 MB at 1024 ranks: the string's growth and copy cost as much as the
// serialisation). Counts what it wrote; remembers the first error.
class FileOutput : public nlohmann::detail::output_adapter_protocol<char> {
 public:
  explicit FileOutput(std::FILE* f) : f_(f) { buf_.reserve(kBuf); }
  void write_character(char c) override {
    if (buf_.size() == kBuf) flush();
    buf_.push_back(c);
  }
  void write_characters(const char* s, std::size_t n) override {
    if (buf_.size() + n > kBuf) flush();
    if (n >= kBuf) {
      put(s, n);
      return;
    }
    buf_.append(s, n);
  }
  // Writes what is buffered; false once any write failed.
  bool flush() {
    put(buf_.data(), buf_.size());
    buf_.clear();
    return ok_;
  }
  size_t bytes() const { return bytes_; }
  int error() const { return err_; }

 private:
  static constexpr size_t kBuf = size_t{1} << 20;
  void put(const char* s, size_t n) {
    if (!ok_ || n == 0) return;
    errno = 0;
    if (std::fwrite(s, 1, n, f_) != n) {
      ok_ = false;
      err_ = errno ? errno : EIO;
      return;
    }
    bytes_ += n;
  }
  std::FILE* f_;
  std::string buf_;
  size_t bytes_ = 0;
  bool ok_ = true;
  int err_ = 0;
};

// Serialises `doc` into `f` (indent -1: compact). Returns 0 or the errno of the failure.
int dump_to(std::FILE* f, const nlohmann::json& doc, int indent, size_t* bytes) {
  auto out = std::make_shared<FileOutput>(f);
  nlohmann::detail::serializer<nlohmann::json> ser(out, ' ', nlohmann::json::error_handler_t::replace);
  ser.dump(doc, indent >= 0, false, static_cast<unsigned int>(indent >= 0 ? indent : 0));
  out->write_character('\n');
  const bool ok = out->flush() && std::fflush(f) == 0;
  *bytes = out->bytes();
  return ok ? 0 : (out->error() ? out->error() : (errno ? errno : EIO));
}

}  // namespace

void Report::sync() {
  if (!writer_) return;
  std::lock_guard<std::recursive_mutex> g(mu_);
  errno = 0;
  const int fd = ::open((dir_ / "report.json").c_str(), O_RDONLY | O_CLOEXEC);
  int err = fd < 0 ? (errno ? errno : EIO) : 0;
  if (fd >= 0 && ::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) err = errno ? errno : EIO;
  if (fd >= 0) ::close(fd);
  if (jsonl_ && err == 0 && ::fsync(fileno(jsonl_)) != 0 && errno != EINVAL && errno != EROFS)
    err = errno ? errno : EIO;
  if (err != 0)
    throw Error(ExitCode::output, "cannot write " + (dir_ / "report.json").string() + ": " + std::strerror(err));
}

void Report::write(bool sync) {
  if (!writer_) return;
  std::lock_guard<std::recursive_mutex> g(mu_);
  // results.jsonl is on the disk with the report: its flush and sync checked (a full disk that
  // only they report is an unwritable output too; it stays open for a run that goes on).
  if (jsonl_) {
    errno = 0;
    int jerr = std::fflush(jsonl_) == 0 ? 0 : (errno ? errno : EIO);
    if (sync && jerr == 0 && ::fsync(fileno(jsonl_)) != 0 && errno != EINVAL && errno != EROFS)
      jerr = errno ? errno : EIO;
    if (jerr != 0)
      throw Error(ExitCode::output, "cannot write " + (dir_ / "results.jsonl").string() + ": " + std::strerror(jerr));
  }
  if (const std::string why = write_report_json(dir_, doc_, sync, "report.json.tmp"); !why.empty())
    throw Error(ExitCode::output, why);
}

std::string write_report_json(const std::filesystem::path& dir, const nlohmann::json& doc, bool sync,
                              const char* tmp_name) {
  const auto tmp = dir / tmp_name;
  // Streamed into the file, compact; then, when that is small, again indented for reading
  // (thousands of ranks: per-pair results and matrices, where indentation more than doubles
  // the file; docs/scale.md).
  errno = 0;
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  int err = f ? 0 : (errno ? errno : EIO);
  size_t bytes = 0;
  if (f) err = dump_to(f, doc, -1, &bytes);
  if (f && err == 0 && bytes <= kIndentedMaxBytes + 1) {
    errno = 0;
    if (std::fseek(f, 0, SEEK_SET) != 0 || ftruncate(fileno(f), 0) != 0)
      err = errno ? errno : EIO;
    else
      err = dump_to(f, doc, 2, &bytes);
  }
  // On the disk before the process ends (a report that appeared a second after mpirun returned;
  // a full disk that only a later write-back would have told).
  if (sync && f && err == 0 && ::fsync(fileno(f)) != 0 && errno != EINVAL && errno != EROFS) err = errno ? errno : EIO;
  if (f && std::fclose(f) != 0 && err == 0) err = errno ? errno : EIO;
  if (err != 0) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return "cannot write " + tmp.string() + ": " + std::strerror(err);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, dir / "report.json", ec);
  if (ec) return "cannot write " + (dir / "report.json").string() + ": " + ec.message();
  return {};
}

int Report::write_in_place() {
  if (!writer_) return 0;
  std::lock_guard<std::recursive_mutex> g(mu_);
  errno = 0;
  std::FILE* f = std::fopen((dir_ / "report.json").c_str(), "r+");
  if (!f) return errno ? errno : EIO;
  size_t bytes = 0;
  int err = dump_to(f, doc_, 2, &bytes);
  if (err == 0 && ftruncate(fileno(f), static_cast<off_t>(bytes)) != 0) err = errno ? errno : EIO;
  if (err == 0 && ::fsync(fileno(f)) != 0 && errno != EINVAL && errno != EROFS) err = errno ? errno : EIO;
  if (std::fclose(f) != 0 && err == 0) err = errno ? errno : EIO;
  return err;
}

std::string default_out_dir(const std::string& recipe) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return "commscript-runs/" + recipe + "-" + stamp + "-" + std::to_string(getpid());
}

}  // namespace cs
