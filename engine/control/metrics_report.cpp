// The families every run has, read from report.json as it stands (docs/monitoring.md lists them).
#include <chrono>
#include <map>
#include <tuple>

#include "metrics.hpp"

namespace cs {

namespace {

using json = nlohmann::json;

double num(const json& o, const char* key, double fallback = 0) {
  return o.is_object() && o.contains(key) && o[key].is_number() ? o[key].get<double>() : fallback;
}

std::string text(const json& o, const char* key) {
  return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
}

// o[key], or null: never a copy (the results of a large run are half a million records).
const json& at(const json& o, const char* key) {
  static const json none;
  if (!o.is_object()) return none;
  auto it = o.find(key);
  return it == o.end() ? none : *it;
}

std::string whole(double v) { return std::to_string(static_cast<long long>(v)); }

// A collective's measurement (comm:bench): op, bytes, busbw and the headline time are numbers.
bool is_bench(const json& r) {
  return r.is_object() && r.contains("op") && r["op"].is_string() && r.contains("bytes") && r["bytes"].is_number() &&
         r.contains("busbw") && r["busbw"].is_number() && r.contains("time_us") && r["time_us"].is_number();
}

struct PerCollective {
  MetricFamily busbw{"commscript_bus_bandwidth_bytes_per_second",
                     "Bus bandwidth of the last measurement of this collective and size (NCCL Inspector's "
                     "nccl_bus_bandwidth_gbs x 1e9)",
                     "gauge",
                     {}};
  MetricFamily algbw{"commscript_algorithm_bandwidth_bytes_per_second",
                     "Algorithm bandwidth (bytes / time) of the last measurement of this collective and size",
                     "gauge",
                     {}};
  MetricFamily time{"commscript_collective_exec_time_seconds",
                    "Headline time of one call (whole timed loop / iterations, mean over ranks) of the last "
                    "measurement (NCCL Inspector's nccl_collective_exec_time_microseconds x 1e-6)",
                    "gauge",
                    {}};
  MetricFamily iter{"commscript_collective_iteration_seconds",
                    "Per-iteration time (slowest rank per iteration) of the last measurement: quantile 0.5 "
                    "and 0.99",
                    "gauge",
                    {}};
  MetricFamily wrong{
      "commscript_wrong_elements", "Wrong elements in the last measurement's checked result", "gauge", {}};
};

struct Totals {
  double measurements = 0, errors = 0, wrong = 0;
};

void add_results(const json& results, std::vector<MetricFamily>& out) {
  PerCollective pc;
  Totals t;
  std::map<std::tuple<std::string, double, std::string, double>, const json*> last;  // op, bytes, dtype, ranks
  std::vector<std::tuple<std::string, double, std::string, double>> order;
  if (results.is_array())
    for (const auto& r : results) {
      if (!is_bench(r)) continue;
      t.measurements += 1;
      t.wrong += num(r, "wrong");
      if (num(r, "wrong") > 0) t.errors += 1;
      auto key = std::make_tuple(text(r, "op"), num(r, "bytes"), text(r, "dtype"), num(r, "ranks"));
      if (!last.count(key)) order.push_back(key);
      last[key] = &r;
    }
  for (const auto& key : order) {
    const json& r = *last[key];
    const MetricLabels l{{"collective", std::get<0>(key)},
                         {"message_size", whole(std::get<1>(key))},
                         {"dtype", std::get<2>(key)},
                         {"nranks", whole(std::get<3>(key))}};
    pc.busbw.samples.push_back({l, num(r, "busbw") * 1e9});
    pc.algbw.samples.push_back({l, num(r, "algbw") * 1e9});
    pc.time.samples.push_back({l, num(r, "time_us") * 1e-6});
    MetricLabels q50 = l, q99 = l;
    q50.emplace_back("quantile", "0.5");
    q99.emplace_back("quantile", "0.99");
    pc.iter.samples.push_back({q50, num(r, "p50_us") * 1e-6});
    pc.iter.samples.push_back({q99, num(r, "p99_us") * 1e-6});
    pc.wrong.samples.push_back({l, num(r, "wrong")});
  }
  for (auto* f : {&pc.busbw, &pc.algbw, &pc.time, &pc.iter, &pc.wrong}) out.push_back(std::move(*f));
  out.push_back({"commscript_measurements_total",
                 "Collective measurements taken so far in this run",
                 "counter",
                 {{{}, t.measurements}}});
  out.push_back({"commscript_measurement_errors_total",
                 "Measurements so far whose checked result had wrong elements",
                 "counter",
                 {{{}, t.errors}}});
  out.push_back({"commscript_wrong_elements_total",
                 "Wrong elements over all checked results so far",
                 "counter",
                 {{{}, t.wrong}}});
}

// Findings by severity; the soak alerts (findings of kind latency, utilisation, error_rate) by kind.
void add_findings(const json& doc, std::vector<MetricFamily>& out) {
  std::map<std::string, double> by_sev{{"info", 0}, {"warn", 0}, {"error", 0}};
  std::map<std::string, double> alerts{{"latency", 0}, {"utilisation", 0}, {"error_rate", 0}};
  bool any_alert = doc.is_object() && doc.contains("soak");
  const json& f = at(doc, "findings");
  if (f.is_array())
    for (const auto& x : f) {
      const std::string sev = text(x, "severity"), kind = text(x, "kind");
      if (by_sev.count(sev)) by_sev[sev] += 1;
      if (alerts.count(kind)) alerts[kind] += 1, any_alert = true;
    }
  MetricFamily fam{"commscript_findings", "Findings in the report so far, by severity", "gauge", {}};
  for (const auto& [k, v] : by_sev) fam.samples.push_back({{{"severity", k}}, v});
  out.push_back(std::move(fam));
  if (!any_alert) return;
  MetricFamily al{"commscript_alerts_total",
                  "Soak alerts fired so far, by alert (latency, utilisation, error_rate)",
                  "counter",
                  {}};
  for (const auto& [k, v] : alerts) al.samples.push_back({{{"alert", k}}, v});
  out.push_back(std::move(al));
}

void add_scorecard(const json& sc, std::vector<MetricFamily>& out) {
  if (!sc.is_object() || !sc.contains("total") || !sc["total"].is_number()) return;
  out.push_back({"commscript_score", "The scorecard's total (0-100)", "gauge", {{{}, sc["total"].get<double>()}}});
  MetricFamily part{"commscript_score_part", "A part of the scorecard: its score (0-100)", "gauge", {}};
  MetricFamily weight{"commscript_score_part_weight", "A part of the scorecard: its effective weight", "gauge", {}};
  if (sc.contains("parts") && sc["parts"].is_array())
    for (const auto& p : sc["parts"]) {
      const std::string name = text(p, "name");
      if (name.empty() || !p.contains("score") || !p["score"].is_number()) continue;
      part.samples.push_back({{{"part", name}}, p["score"].get<double>()});
      weight.samples.push_back({{{"part", name}}, num(p, "effective_weight", num(p, "weight"))});
    }
  out.push_back(std::move(part));
  out.push_back(std::move(weight));
}

void add_run(const json& doc, bool finished, std::vector<MetricFamily>& out) {
  const json &run = at(doc, "run"), &rec = at(doc, "recipe"), &ver = at(doc, "commscript");
  out.push_back({"commscript_run_info",
                 "The run: recipe version, backend, commscript version (value 1)",
                 "gauge",
                 {{{{"recipe_version", text(rec, "version")},
                    {"backend", text(run, "backend")},
                    {"version", text(ver, "version")},
                    {"nranks", whole(num(run, "ranks"))}},
                   1}}});
  out.push_back({"commscript_run_finished",
                 "1 once the run has ended (the values are final), else 0",
                 "gauge",
                 {{{}, finished ? 1.0 : 0.0}}});
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  out.push_back(
      {"commscript_last_update_timestamp_seconds", "When these values were written (Unix time)", "gauge", {{{}, now}}});
  if (!finished) return;
  out.push_back({"commscript_run_exit_code",
                 "The run's exit code (docs/reference.md, Exit codes)",
                 "gauge",
                 {{{}, num(run, "exit_code", -1)}}});
  out.push_back({"commscript_run_duration_seconds", "How long the run took", "gauge", {{{}, num(run, "duration_s")}}});
}

}  // namespace

std::vector<MetricFamily> metrics_from_report(const nlohmann::json& doc, bool finished) {
  std::vector<MetricFamily> out;
  add_run(doc, finished, out);
  add_results(at(doc, "results"), out);
  add_findings(doc, out);
  add_scorecard(at(doc, "scorecard"), out);
  return out;
}

}  // namespace cs
