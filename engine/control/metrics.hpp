#pragma once
// Metrics a scraper reads (docs/monitoring.md): a run's numbers in Prometheus' text exposition
// format (0.0.4), written atomically to --metrics FILE (node_exporter's textfile collector) and
// served at --metrics-listen ADDR:PORT/metrics while the run lasts. Rank 0 publishes: the
// numbers every recipe has (from report.json as it stands: results, findings, scorecard, run)
// plus the families a recipe adds (soak: once per interval, through cs.metrics.publish), and
// once more at the run's end from the final report.
//
// Names follow Prometheus' rules (base units: seconds, bytes; _total for counters; HELP and
// TYPE lines); the labels that mean what NCCL Inspector's do carry its names (collective,
// message_size, nranks, slurm_job_id).
#include <atomic>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cs {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

struct MetricSample {
  MetricLabels labels;
  double value = 0;
};

struct MetricFamily {
  std::string name, help, type;  // type: gauge, counter or untyped
  std::vector<MetricSample> samples;
};

// A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) and a label name ([a-zA-Z_][a-zA-Z0-9_]*, not "__...").
bool metric_name_valid(const std::string& name);
bool label_name_valid(const std::string& name);

// A label value escaped for the text format: \ as \\, " as \", a newline as \n.
std::string escape_label_value(const std::string& v);

// The text of `families`, each with its HELP and TYPE lines; every sample gets `common` labels
// after its own. Throws InputError on an invalid name, type, or a family named twice.
std::string metrics_text(const std::vector<MetricFamily>& families, const MetricLabels& common = {});

// Families from their JSON form ([{name, help, type, samples = [{labels = {k = v}, value}]}], what
// cs.metrics builds). Throws InputError naming what is wrong.
std::vector<MetricFamily> metric_families_from_json(const nlohmann::json& j);

// The families every run has, from report.json as it stands (results, findings, scorecard, run;
// a recipe's own section `soak` for its counters). `finished`: the run is over (exit code,
// duration).
std::vector<MetricFamily> metrics_from_report(const nlohmann::json& doc, bool finished);

// `base` and those of `extra` whose names `base` does not have.
std::vector<MetricFamily> merge_families(std::vector<MetricFamily> base, const std::vector<MetricFamily>& extra);

// "127.0.0.1:9400" -> {"127.0.0.1", 9400}: an IPv4 address (not 0.0.0.0: name the interface)
// and a port 1..65535. Throws InputError saying why.
std::pair<std::string, int> parse_listen_address(const std::string& text);

// --metrics-listen: a minimal HTTP/1.0 server on one address, GET /metrics answered with the last
// published text; one request at a time, at most kMaxRequest bytes, each connection closed after
// its answer. The thread ends when the object does.
class MetricsServer {
 public:
  static constexpr size_t kMaxRequest = 8192;
  explicit MetricsServer(const std::string& address);  // binds and listens; throws InputError
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  void set_text(std::string text);
  int port() const { return port_; }

 private:
  void serve();
  void answer(int fd);
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string text_;
  std::thread thread_;
};

// Where rank 0's metrics go: the file and/or the server. publish() never throws: a write that
// fails after the first is a warning (once), not the end of the run.
class MetricsSink {
 public:
  // Opens the server (throws InputError: bad address, port taken) and writes the file once
  // (throws Error with ExitCode::output when it cannot be written).
  MetricsSink(const std::string& file, const std::string& listen, MetricLabels common);
  // doc: report.json as it stands; extra: the recipe's families (kept for the final publish).
  void publish(const nlohmann::json& doc, const std::vector<MetricFamily>& extra);
  void publish_final(const nlohmann::json& doc);

 private:
  void write(const std::string& text, bool first);
  std::string file_;
  std::unique_ptr<MetricsServer> server_;
  MetricLabels common_;
  std::vector<MetricFamily> extra_;
  bool warned_ = false;
};

// The labels every sample of this run carries: recipe, and slurm_job_id when SLURM_JOB_ID is set.
MetricLabels metrics_common_labels(const std::string& recipe);

}  // namespace cs
