#include "config.hpp"

#include <toml++/toml.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "error.hpp"
#include "json_text.hpp"
#include "run_inputs.hpp"

namespace cs {

namespace {

const char* const kSections[] = {"options",  "env",   "run",   "thresholds", "scorecard",
                                 "baseline", "chaos", "rules", "recipe"};

nlohmann::json to_json(const toml::node& n) {
  if (auto t = n.as_table()) {
    nlohmann::json o = nlohmann::json::object();
    for (auto&& [k, v] : *t) o[std::string(k.str())] = to_json(v);
    return o;
  }
  if (auto a = n.as_array()) {
    nlohmann::json o = nlohmann::json::array();
    for (auto&& v : *a) o.push_back(to_json(v));
    return o;
  }
  if (auto v = n.as_string()) return v->get();
  if (auto v = n.as_integer()) return v->get();
  if (auto v = n.as_floating_point()) return v->get();
  if (auto v = n.as_boolean()) return v->get();
  std::ostringstream os;  // dates and times: keep their TOML text
  n.visit([&](auto&& x) { os << x; });
  return os.str();
}

std::string where(const std::string& src, const toml::source_region& r) {
  return src + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
}

void check_sections(const toml::table& t, const std::string& src) {
  for (auto&& [k, v] : t) {
    bool known = false;
    for (const char* s : kSections) known = known || k.str() == s;
    if (!known) {
      std::string all;
      for (const char* s : kSections) all += (all.empty() ? "" : ", ") + std::string(s);
      throw InputError(where(src, k.source()) + ": unknown section '" + std::string(k.str()) + "' (known: " + all +
                       ")");
    }
    if (k.str() == "env") {
      if (!v.is_table()) throw InputError(where(src, v.source()) + ": [env] must be a table");
      for (auto&& [ek, ev] : *v.as_table())
        if (ev.is_table() || ev.is_array())
          throw InputError(where(src, ev.source()) + ": env." + std::string(ek.str()) +
                           " must be a string, number or boolean");
    }
  }
}

// A float whose literal is not zero but reads as 0 or a subnormal (1e-400): refused, so that no
// setting becomes 0 ("none": --set run.timeout=1e-400 meant no deadline at all) unnoticed.
void refuse_underflow(const toml::node& n, const std::string& text, const std::string& what) {
  if (auto t = n.as_table()) {
    for (auto&& [k, v] : *t) refuse_underflow(v, text, what);
    return;
  }
  if (auto a = n.as_array()) {
    for (auto&& v : *a) refuse_underflow(v, text, what);
    return;
  }
  auto f = n.as_floating_point();
  if (!f) return;
  const int cls = std::fpclassify(f->get());
  if (cls != FP_ZERO && cls != FP_SUBNORMAL) return;
  const auto& r = n.source();
  size_t pos = 0;
  for (size_t line = 1; line < r.begin.line && pos != std::string::npos; ++line) {
    pos = text.find('\n', pos);
    if (pos != std::string::npos) ++pos;
  }
  if (pos == std::string::npos) return;
  pos += r.begin.column > 0 ? r.begin.column - 1 : 0;
  std::string token;
  while (pos < text.size() && std::strchr("0123456789eE+-._", text[pos]) && text[pos] != '\0') token += text[pos++];
  const std::string mantissa = token.substr(0, token.find_first_of("eE"));
  if (mantissa.find_first_of("123456789") == std::string::npos) return;
  throw InputError(what + ": " + token +
                   " is too small a number to represent (it would read as 0, which means 'none' for a "
                   "deadline); write 0 for zero");
}

bool finite_number(const nlohmann::json& v) { return v.is_number() && std::isfinite(v.get<double>()); }

// Every leaf of `v` (a table, or tables of tables `depth` deep) a finite number; `positive`
// names the keys that must be > 0.
void check_numbers(const nlohmann::json& v, const std::string& path, const std::string& src, int depth,
                   std::initializer_list<const char*> positive = {}) {
  if (!v.is_object()) throw InputError(src + ": " + path + " must be a table, not " + json_text(v));
  for (auto& [k, x] : v.items()) {
    const std::string p = path + "." + k;
    if (x.is_object() && depth > 0) {
      check_numbers(x, p, src, depth - 1);
      continue;
    }
    if (!finite_number(x)) throw InputError(src + ": " + p + " must be a finite number, not " + json_text(x));
    for (const char* pk : positive)
      if (k == pk && !(x.get<double>() > 0)) throw InputError(src + ": " + p + " must be > 0, not " + json_text(x));
    if (x.get<double>() < 0) throw InputError(src + ": " + p + " must not be negative, not " + json_text(x));
  }
}

}  // namespace

void Config::check() const {
  const std::string& src = path_.empty() ? std::string("config") : path_;
  if (!data_.is_object()) throw InputError(src + ": the config must be a table");
  for (auto& [k, v] : data_.items()) {
    if (k == "chaos") {
      if (!v.is_array()) throw InputError(src + ": chaos must be an array of tables ([[chaos]] in TOML)");
      continue;
    }
    if (!v.is_object()) throw InputError(src + ": [" + k + "] must be a table, not " + json_text(v));
  }
  const nlohmann::json env = section("env");  // keep it alive: items() is a view
  for (auto& [k, v] : env.items()) {
    if (k.empty() || k.find('=') != std::string::npos)
      throw InputError(src + ": env: '" + k + "' is not a variable name");
    if (v.is_object() || v.is_array() || v.is_null())
      throw InputError(src + ": env." + k + " must be a string, number or boolean");
  }
  // What full_diag, the scorecard and the rules read, checked before anything is measured.
  if (data_.contains("rules")) {
    for (auto& [k, v] : data_["rules"].items()) {
      if (k != "files") throw InputError(src + ": unknown setting rules." + k + " (known: files)");
      bool ok = v.is_string() || v.is_array();
      if (v.is_array())
        for (auto& f : v) ok = ok && f.is_string();
      if (!ok) throw InputError(src + ": rules.files must be a file name or a list of them, not " + json_text(v));
    }
  }
  if (data_.contains("thresholds"))
    check_numbers(data_["thresholds"], "thresholds", src, 2, {"busbw_min_gbps", "latency_max_us"});
  if (data_.contains("scorecard"))
    check_numbers(data_["scorecard"], "scorecard", src, 1,
                  {"bandwidth_reference_gbps", "latency_target_us", "p2p_latency_target_us", "bandwidth_good",
                   "cv_limit", "error_rate_limit"});
}

Config Config::parse(const std::string& text, const std::string& src) {
  Config c;
  c.path_ = src;
  try {
    toml::table t = toml::parse(text, src);
    check_sections(t, src);
    refuse_underflow(t, text, src);
    c.data_ = to_json(t);
  } catch (const toml::parse_error& e) {
    throw InputError(where(src, e.source()) + ": " + std::string(e.description()));
  }
  c.check();
  return c;
}

Config Config::from_json(const nlohmann::json& data, const std::string& src) {
  if (!data.is_object()) throw InputError(src + ": the recorded config is not a table");
  for (auto& [k, v] : data.items()) {
    bool known = false;
    for (const char* s : kSections) known = known || k == s;
    if (!known) throw InputError(src + ": unknown section '" + k + "' in the recorded config");
  }
  Config c;
  c.path_ = src;
  c.data_ = data;
  c.check();
  return c;
}

Config Config::load(const std::string& path) {
  // A regular file of bounded size (a FIFO hung, a directory read as an empty config).
  return parse(read_input_file(path, path + ": config file", kMaxConfigBytes), path);
}

void Config::set(const std::string& a) {
  const size_t eq = a.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError("--set '" + a + "': expected key=value (e.g. --set env.NCCL_DEBUG=INFO)");
  std::string key = a.substr(0, eq);
  const std::string text = a.substr(eq + 1);
  if (key.find('.') == std::string::npos) {
    bool section = false;  // --set chaos=[{kind="hang", ranks=[2]}] replaces a whole section
    for (const char* s : kSections) section = section || key == s;
    if (!section) key = "options." + key;
  }
  nlohmann::json value;
  try {
    const std::string line = "v = " + text;
    toml::table t = toml::parse(line);
    refuse_underflow(t, line, "--set '" + a + "'");
    value = to_json(*t.get("v"));
  } catch (const toml::parse_error&) {
    value = text;
  }
  nlohmann::json* node = &data_;
  size_t pos = 0;
  while (true) {
    const size_t dot = key.find('.', pos);
    const std::string part = key.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (part.empty()) throw InputError("--set '" + a + "': empty key component");
    if (node == &data_) {
      bool known = false;
      for (const char* s : kSections) known = known || part == s;
      if (!known) throw InputError("--set '" + a + "': unknown section '" + part + "'");
    }
    if (dot == std::string::npos) {
      (*node)[part] = value;
      break;
    }
    if (!(*node).contains(part) || !(*node)[part].is_object()) (*node)[part] = nlohmann::json::object();
    node = &(*node)[part];
    pos = dot + 1;
  }
}

nlohmann::json Config::section(const std::string& name) const {
  auto it = data_.find(name);
  return it == data_.end() ? nlohmann::json::object() : *it;
}

std::vector<std::pair<std::string, std::string>> Config::env() const {
  std::vector<std::pair<std::string, std::string>> out;
  const nlohmann::json env = section("env");  // keep it alive: items() is a view
  for (auto& [k, v] : env.items()) {
    if (v.is_string())
      out.emplace_back(k, v.get<std::string>());
    else if (v.is_boolean())
      out.emplace_back(k, v.get<bool>() ? "1" : "0");
    else
      out.emplace_back(k, json_text(v));
  }
  return out;
}

void Config::apply_env() const {
  for (auto& [k, v] : env()) setenv(k.c_str(), v.c_str(), 1);
}

}  // namespace cs
