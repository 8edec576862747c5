#pragma once
// The run's outputs (docs/reference.md, "Outputs": a contract): report.json with schema
// commscript.report/2 and results.jsonl, one line per measurement, flushed as it is taken.
// Only the writing rank (rank 0) touches files; the others keep an empty document.
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace cs {

// The schema this version writes. /2: `time_us` (and algbw/busbw from it) became the whole-loop
// time / iterations averaged over ranks, as nccl-tests/OSU/IMB define it (docs/timing.md); /1's
// meaning (the mean of the slowest rank per iteration) is `iter_mean_us`. Readers (--replay,
// --baseline) take both.
inline constexpr const char* kReportSchema = "commscript.report/2";
// report.json is written indented up to this size (compact JSON), compact above it.
inline constexpr size_t kIndentedMaxBytes = size_t{16} << 20;
// True for a schema this version reads ("commscript.report/1" or "/2").
bool readable_report_schema(const nlohmann::json& schema);

class Report {
 public:
  Report() = default;
  // Creates `dir` (writer only) and opens results.jsonl.
  Report(const std::filesystem::path& dir, bool writer);
  ~Report();
  Report(const Report&) = delete;
  Report& operator=(const Report&) = delete;

  bool writer() const { return writer_; }
  // Held by add_result/add/write; other threads (coordinator, signal handler) that edit doc()
  // take it too.
  std::recursive_mutex& mutex() { return mu_; }
  const std::filesystem::path& dir() const { return dir_; }
  nlohmann::json& doc() { return doc_; }

  void add_result(nlohmann::json r);                                 // also appended to results.jsonl and flushed
  void add(const std::string& section, const nlohmann::json& item);  // findings, incidents, chaos
  size_t count(const std::string& section) const;
  // Writes report.json (via a temporary file and rename, so a reader never sees half of it).
  void write() { write(true); }
  // sync=false: renamed into place without waiting for the disk (an incident saved while
  // mpirun's SIGKILL is a second away: a killed process loses nothing of what it wrote); sync()
  // then waits for the disk and says whether it failed (a full disk).
  void write(bool sync);
  void sync();
  // Writes report.json over itself, in place (a disk too full for a second copy, when the
  // report only changes a little: an exit code). Returns 0 or the errno of the failure.
  int write_in_place();

 private:
  bool writer_ = false;
  std::filesystem::path dir_;
  std::FILE* jsonl_ = nullptr;
  size_t jsonl_bytes_ = 0;  // written to results.jsonl so far
  nlohmann::json doc_;
  std::recursive_mutex mu_;
};

// The one writer of report.json (the run's Report; rank 0's guardian, when rank 0 died): `doc`
// streamed into dir/tmp_name, indented when it is small (kIndentedMaxBytes), synced to the disk
// when `sync`, then renamed to dir/report.json, so that a reader never sees half of it. Returns ""
// or what failed ("cannot write PATH: the OS's reason"). Never holds the text whole: it goes
// through a 1 MiB buffer (105 MB at 1024 ranks).
std::string write_report_json(const std::filesystem::path& dir, const nlohmann::json& doc, bool sync,
                              const char* tmp_name);

// A new default output directory name: commscript-runs/<recipe>-<YYYYmmdd-HHMMSS>-<pid>.
std::string default_out_dir(const std::string& recipe_name);

}  // namespace cs
