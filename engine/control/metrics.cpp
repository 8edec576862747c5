#include "metrics.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "error.hpp"

namespace cs {

namespace {

bool name_char(char c, bool first, bool colon) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
  return alpha || (!first && c >= '0' && c <= '9');
}

bool valid_name(const std::string& n, bool colon) {
  if (n.empty() || n.size() > 200) return false;
  for (size_t i = 0; i < n.size(); ++i)
    if (!name_char(n[i], i == 0, colon)) return false;
  return true;
}

// The shortest text that reads back as the same double; NaN and the infinities as Prometheus
// writes them.
std::string number_text(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char b[64];
  const auto r = std::to_chars(b, b + sizeof b, v);
  return std::string(b, r.ptr);
}

// HELP text: \ as \\ and a newline as \n (the format's rule for HELP).
std::string escape_help(const std::string& h) {
  std::string out;
  for (char c : h) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void append_labels(std::string& out, const MetricLabels& own, const MetricLabels& common, const std::string& family) {
  std::set<std::string> seen;
  bool first = true;
  for (const auto* list : {&own, &common})
    for (const auto& [k, v] : *list) {
      if (!label_name_valid(k)) throw InputError("metric " + family + ": '" + k + "' is not a valid label name");
      if (!seen.insert(k).second) continue;  // a sample's own label wins over a common one
      out += first ? "{" : ",";
      out += k + "=\"" + escape_label_value(v) + "\"";
      first = false;
    }
  if (!first) out += "}";
}

void check_family(const MetricFamily& f, std::set<std::string>& names) {
  if (!metric_name_valid(f.name)) throw InputError("'" + f.name + "' is not a valid metric name");
  if (f.type != "gauge" && f.type != "counter" && f.type != "untyped")
    throw InputError("metric " + f.name + ": type '" + f.type + "' (gauge, counter or untyped expected)");
  if (f.type == "counter" && f.name.size() < 6) throw InputError("counter " + f.name + " must end in _total");
  if (f.type == "counter" && f.name.compare(f.name.size() - 6, 6, "_total") != 0)
    throw InputError("counter " + f.name + " must end in _total");
  if (!names.insert(f.name).second) throw InputError("metric " + f.name + " is given twice");
}

}  // namespace

bool metric_name_valid(const std::string& name) { return valid_name(name, true); }

bool label_name_valid(const std::string& name) { return valid_name(name, false) && name.rfind("__", 0) != 0; }

std::string escape_label_value(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string metrics_text(const std::vector<MetricFamily>& families, const MetricLabels& common) {
  std::string out;
  std::set<std::string> names;
  for (const auto& f : families) {
    check_family(f, names);
    out += "# HELP " + f.name + " " + escape_help(f.help) + "\n";
    out += "# TYPE " + f.name + " " + f.type + "\n";
    for (const auto& s : f.samples) {
      out += f.name;
      append_labels(out, s.labels, common, f.name);
      out += " " + number_text(s.value) + "\n";
    }
  }
  return out;
}

namespace {

MetricSample sample_from_json(const nlohmann::json& s, const std::string& family) {
  if (!s.is_object() || !s.contains("value") || !s["value"].is_number())
    throw InputError("metric " + family + ": a sample is { labels = {...}, value = number }");
  MetricSample out;
  out.value = s["value"].get<double>();
  if (s.contains("labels")) {
    const auto& l = s["labels"];
    if (l.is_array() && l.empty()) return out;  // an empty Lua table
    if (!l.is_object()) throw InputError("metric " + family + ": labels must be a table of name = value");
    for (const auto& [k, v] : l.items()) {
      if (!v.is_string() && !v.is_number())
        throw InputError("metric " + family + ": label " + k + " must be a string or a number");
      out.labels.emplace_back(k, v.is_string() ? v.get<std::string>() : number_text(v.get<double>()));
    }
  }
  return out;
}

}  // namespace

std::vector<MetricFamily> metric_families_from_json(const nlohmann::json& j) {
  std::vector<MetricFamily> out;
  if (j.is_object() && j.empty()) return out;  // an empty Lua table
  if (!j.is_array()) throw InputError("metrics: a list of families expected");
  for (const auto& f : j) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string())
      throw InputError("metrics: a family is { name =, help =, type =, samples = {...} }");
    MetricFamily m;
    m.name = f["name"].get<std::string>();
    m.help = f.value("help", std::string());
    m.type = f.value("type", std::string("gauge"));
    const auto samples = f.value("samples", nlohmann::json::array());
    if (!samples.is_array() && !(samples.is_object() && samples.empty()))
      throw InputError("metric " + m.name + ": samples must be a list");
    for (const auto& s : samples) m.samples.push_back(sample_from_json(s, m.name));
    out.push_back(std::move(m));
  }
  std::set<std::string> names;
  for (const auto& f : out) check_family(f, names);
  return out;
}

std::vector<MetricFamily> merge_families(std::vector<MetricFamily> base, const std::vector<MetricFamily>& extra) {
  std::set<std::string> names;
  for (const auto& f : base) names.insert(f.name);
  for (const auto& f : extra)
    if (!names.count(f.name)) base.push_back(f);
  return base;
}

MetricLabels metrics_common_labels(const std::string& recipe) {
  MetricLabels l{{"recipe", recipe}};
  if (const char* id = std::getenv("SLURM_JOB_ID"); id && *id) l.emplace_back("slurm_job_id", id);
  return l;
}

std::pair<std::string, int> parse_listen_address(const std::string& text) {
  const std::string how = " (ADDRESS:PORT, e.g. 127.0.0.1:9400)";
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw InputError("--metrics-listen '" + text + "': not ADDRESS:PORT" + how);
  const std::string ip = text.substr(0, colon), port = text.substr(colon + 1);
  int parts = 0;
  for (size_t i = 0, start = 0; i <= ip.size(); ++i) {
    if (i < ip.size() && ip[i] != '.') continue;
    const std::string p = ip.substr(start, i - start);
    start = i + 1;
    ++parts;
    if (p.empty() || p.size() > 3 || p.find_first_not_of("0123456789") != std::string::npos || std::stoi(p) > 255)
      throw InputError("--metrics-listen '" + text + "': '" + ip + "' is not an IPv4 address" + how);
  }
  if (parts != 4) throw InputError("--metrics-listen '" + text + "': '" + ip + "' is not an IPv4 address" + how);
  if (ip == "0.0.0.0")
    throw InputError("--metrics-listen '" + text +
                     "': name the address to listen on (127.0.0.1, or the interface Prometheus reaches), "
                     "not every interface");
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) < 1 ||
      std::stoi(port) > 65535)
    throw InputError("--metrics-listen '" + text + "': port '" + port + "' is not 1..65535" + how);
  return {ip, std::stoi(port)};
}

}  // namespace cs
