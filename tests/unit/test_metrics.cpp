// Metrics a scraper reads (control/metrics.hpp): the text format (names, escaping, HELP/TYPE),
// the families read from a report, the listen address, the HTTP server and the atomic file.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "error.hpp"
#include "metrics.hpp"

namespace {

std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const cs::InputError& e) {
    return e.what();
  }
  return "";
}

// One request to 127.0.0.1:port; the whole answer.
std::string http(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// A port nobody listens on right now.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

TEST_CASE("metrics: label values escape backslash, quote and newline; HELP escapes backslash and newline") {
  CHECK(cs::escape_label_value("a\\b\"c\nd") == "a\\\\b\\\"c\\nd");
  const cs::MetricFamily f{"x_total", "help \\ with\nnewline", "counter", {{{{"host", "n\"1\\\n"}}, 2}}};
  const std::string t = cs::metrics_text({f}, {{"recipe", "soak"}});
  CHECK(t ==
        "# HELP x_total help \\\\ with\\nnewline\n# TYPE x_total counter\n"
        "x_total{host=\"n\\\"1\\\\\\n\",recipe=\"soak\"} 2\n");
}

TEST_CASE("metrics: numbers read back exactly; NaN and infinities as Prometheus writes them") {
  const cs::MetricFamily f{"v", "", "gauge", {{{{"k", "a"}}, 0.1}, {{{"k", "b"}}, 1e-7}, {{{"k", "c"}}, 1.0 / 0.0}}};
  const std::string t = cs::metrics_text({f});
  CHECK(t.find("v{k=\"a\"} 0.1\n") != std::string::npos);
  CHECK(t.find("v{k=\"b\"} 1e-07\n") != std::string::npos);
  CHECK(t.find("v{k=\"c\"} +Inf\n") != std::string::npos);
}

TEST_CASE("metrics: invalid names, types, a counter without _total and a family named twice are refused") {
  CHECK(cs::metric_name_valid("commscript_bus_bandwidth_bytes_per_second"));
  CHECK(cs::metric_name_valid("a:b_c1"));
  CHECK_FALSE(cs::metric_name_valid("1abc"));
  CHECK_FALSE(cs::metric_name_valid("a-b"));
  CHECK_FALSE(cs::metric_name_valid(""));
  CHECK(cs::label_name_valid("message_size"));
  CHECK_FALSE(cs::label_name_valid("__name__"));
  CHECK_FALSE(cs::label_name_valid("a:b"));
  CHECK(input_error([] {
          cs::metrics_text({{"a b", "", "gauge", {}}});
        }).find("not a valid metric name") != std::string::npos);
  CHECK(input_error([] {
          cs::metrics_text({{"a", "", "histogram", {}}});
        }).find("type 'histogram'") != std::string::npos);
  CHECK(input_error([] {
          cs::metrics_text({{"a", "", "counter", {}}});
        }).find("must end in _total") != std::string::npos);
  CHECK(input_error([] {
          cs::metrics_text({{"a", "", "gauge", {}}, {"a", "", "gauge", {}}});
        }).find("given twice") != std::string::npos);
  CHECK(input_error([] {
          cs::metrics_text({{"a", "", "gauge", {{{{"bad-label", "x"}}, 1}}}});
        }).find("not a valid label name") != std::string::npos);
}

TEST_CASE("metrics: the families of a report: results (last per op+size, base units), findings, scorecard") {
  const auto doc = nlohmann::json::parse(R"({
    "recipe": {"name": "x", "version": "1.0.0"}, "run": {"ranks": 2, "backend": "mpi", "exit_code": 0, "duration_s": 3.5},
    "results": [
      {"op": "allreduce", "bytes": 1024, "dtype": "float32", "ranks": 2, "busbw": 1.0, "algbw": 1.0, "time_us": 10,
       "p50_us": 9, "p99_us": 20, "wrong": 0},
      {"kind": "pair", "op": "sendrecv", "a": 0, "b": 1, "busbw": 3},
      {"op": "allreduce", "bytes": 1024, "dtype": "float32", "ranks": 2, "busbw": 2.5, "algbw": 2.5, "time_us": 4,
       "p50_us": 3, "p99_us": 8, "wrong": 7}],
    "findings": [{"severity": "warn", "kind": "latency"}, {"severity": "error", "kind": "error_rate"}],
    "scorecard": {"total": 87.5, "parts": [{"name": "bandwidth", "score": 90, "weight": 0.5, "effective_weight": 0.6}]}
  })");
  const std::string t = cs::metrics_text(cs::metrics_from_report(doc, true));
  const std::string l = R"({collective="allreduce",message_size="1024",dtype="float32",nranks="2"})";
  CHECK(t.find("commscript_bus_bandwidth_bytes_per_second" + l + " 2.5e+09\n") != std::string::npos);
  CHECK(t.find("commscript_collective_exec_time_seconds" + l + " 4e-06\n") != std::string::npos);
  CHECK(
      t.find(
          R"(commscript_collective_iteration_seconds{collective="allreduce",message_size="1024",dtype="float32",nranks="2",quantile="0.99"} 8e-06)") !=
      std::string::npos);
  CHECK(t.find("commscript_measurements_total 2\n") != std::string::npos);  // the pair is no collective
  CHECK(t.find("commscript_measurement_errors_total 1\n") != std::string::npos);
  CHECK(t.find("commscript_wrong_elements_total 7\n") != std::string::npos);
  CHECK(t.find("commscript_findings{severity=\"warn\"} 1\n") != std::string::npos);
  CHECK(t.find("commscript_alerts_total{alert=\"error_rate\"} 1\n") != std::string::npos);
  CHECK(t.find("commscript_score 87.5\n") != std::string::npos);
  CHECK(t.find("commscript_score_part{part=\"bandwidth\"} 90\n") != std::string::npos);
  CHECK(t.find("commscript_score_part_weight{part=\"bandwidth\"} 0.6\n") != std::string::npos);
  CHECK(t.find("commscript_run_exit_code 0\n") != std::string::npos);
  CHECK(t.find("commscript_run_finished 1\n") != std::string::npos);
  // While the run lasts: no exit code, no duration, not finished.
  const std::string during = cs::metrics_text(cs::metrics_from_report(doc, false));
  CHECK(during.find("commscript_run_exit_code") == std::string::npos);
  CHECK(during.find("commscript_run_finished 0\n") != std::string::npos);
}

TEST_CASE("metrics: families from their JSON form (what cs.metrics hands over), checked") {
  const auto j = nlohmann::json::parse(
      R"([{"name": "a_total", "help": "h", "type": "counter", "samples": [{"labels": {"k": "v", "n": 3}, "value": 1}]}])");
  const auto f = cs::metric_families_from_json(j);
  REQUIRE(f.size() == 1);
  CHECK(cs::metrics_text(f) == "# HELP a_total h\n# TYPE a_total counter\na_total{k=\"v\",n=\"3\"} 1\n");
  CHECK(input_error([] {
          cs::metric_families_from_json(nlohmann::json::parse(R"([{"name": "x", "samples": [{}]}])"));
        }).find("value = number") != std::string::npos);
  CHECK(input_error([] {
          cs::metric_families_from_json(nlohmann::json::parse(R"({"name": "x"})"));
        }).find("a list of families") != std::string::npos);
}

TEST_CASE("metrics: --metrics-listen takes IPV4:PORT and refuses garbage, the wildcard and bad ports") {
  CHECK(cs::parse_listen_address("127.0.0.1:9400") == std::make_pair(std::string("127.0.0.1"), 9400));
  for (const char* bad : {"", "9400", ":9400", "127.0.0.1:", "localhost:9400", "127.0.0.1:0", "127.0.0.1:65536",
                          "127.0.0.1:x", "1.2.3:80", "1.2.3.4.5:80", "256.1.1.1:80", "0.0.0.0:9400", "[::1]:80"})
    CHECK_FALSE(input_error([bad] { cs::parse_listen_address(bad); }).empty());
  CHECK(input_error([] { cs::parse_listen_address("0.0.0.0:9400"); }).find("not every interface") != std::string::npos);
}

TEST_CASE("metrics: the server answers GET /metrics with the text, refuses other paths, methods and long requests") {
  const int port = free_port();
  auto server = std::make_unique<cs::MetricsServer>("127.0.0.1:" + std::to_string(port));
  server->set_text("up 1\n");
  const std::string ok = http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(ok.rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
  CHECK(ok.find("text/plain; version=0.0.4") != std::string::npos);
  CHECK(ok.substr(ok.size() - 5) == "up 1\n");
  CHECK(http(port, "GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.0 404", 0) == 0);
  CHECK(http(port, "POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.0 405", 0) == 0);
  CHECK(http(port, "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n").rfind("HTTP/1.0 431", 0) ==
        0);
  // A client that trickles its request holds the server at most its 2 s: the next one is answered.
  {
    const int slow = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    REQUIRE(::connect(slow, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    std::thread trickle([slow] {
      for (int i = 0; i < 40; ++i) {
        if (::send(slow, "G", 1, MSG_NOSIGNAL) <= 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(http(port, "GET /metrics HTTP/1.0\r\n\r\n").rfind("HTTP/1.0 200 OK", 0) == 0);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(3000));
    trickle.join();
    ::close(slow);
  }
  // A second server on the same port is refused, with the reason.
  CHECK(input_error([port] {
          cs::MetricsServer again("127.0.0.1:" + std::to_string(port));
        }).find("cannot listen there") != std::string::npos);
  server.reset();  // the thread ends, the port is closed
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  CHECK(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0);
  ::close(fd);
}

TEST_CASE("metrics: the sink writes the file whole (renamed into place) and refuses one it cannot write") {
  char dir[] = "/tmp/cs_metrics_XXXXXX";
  REQUIRE(::mkdtemp(dir));
  const std::string file = std::string(dir) + "/run.prom";
  {
    cs::MetricsSink sink(file, "", {{"recipe", "t"}});
    sink.publish(nlohmann::json::object(), {{"commscript_extra", "", "gauge", {{{}, 5}}}});
    std::ifstream f(file);
    std::stringstream ss;
    ss << f.rdbuf();
    CHECK(ss.str().find("commscript_extra{recipe=\"t\"} 5\n") != std::string::npos);
    CHECK(ss.str().find("commscript_run_finished{recipe=\"t\"} 0\n") != std::string::npos);
    sink.publish_final(nlohmann::json::object());  // the recipe's last families are kept
    std::ifstream g(file);
    std::stringstream s2;
    s2 << g.rdbuf();
    CHECK(s2.str().find("commscript_extra{recipe=\"t\"} 5\n") != std::string::npos);
    CHECK(s2.str().find("commscript_run_finished{recipe=\"t\"} 1\n") != std::string::npos);
    std::ifstream tmp(file + ".tmp");
    CHECK_FALSE(tmp.good());
  }
  try {
    cs::MetricsSink bad(std::string(dir) + "/no/such/dir/run.prom", "", {});
    FAIL("an unwritable --metrics file was accepted");
  } catch (const cs::Error& e) {
    CHECK(e.code() == cs::ExitCode::output);
  }
  std::remove(file.c_str());
  ::rmdir(dir);
}
