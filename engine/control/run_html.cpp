#include "run_html.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <system_error>

namespace cs::run {

std::string write_page(const std::filesystem::path& path, const std::string& page) {
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return "cannot write " + path.string() + ": " + std::strerror(errno ? errno : EIO);
  int err = 0;
  errno = 0;
  if (std::fwrite(page.data(), 1, page.size(), f) != page.size() || std::fflush(f) != 0) err = errno ? errno : EIO;
  if (err == 0 && ::fsync(fileno(f)) != 0 && errno != EINVAL && errno != EROFS) err = errno ? errno : EIO;
  if (std::fclose(f) != 0 && err == 0) err = errno ? errno : EIO;
  if (err == 0) return "";
  std::error_code ec;
  std::filesystem::remove(path, ec);  // no 0-byte or half page left looking like a report
  return "cannot write " + path.string() + ": " + std::strerror(err);
}

std::string write_html(const PageRenderer& pages, Report& report) {
  try {
    std::string why;
    const std::string page = pages.render_html(report.doc(), &why);
    if (!page.empty()) return write_page(report.dir() / "report.html", page);
    if (!why.empty()) std::fprintf(stderr, "commscript: warning: report.html not written: %s\n", why.c_str());
  } catch (const std::exception&) {  // on the way out: never throw from here
  }
  return "";
}

void write_html_on_the_way_out(const PageRenderer& pages, Report& report) {
  const std::string why = write_html(pages, report);
  if (!why.empty()) std::fprintf(stderr, "commscript: %s\n", why.c_str());
}

bool render_html_file(const PageRenderer& pages, const std::string& json_path, const std::string& html_path,
                      std::string* why) {
  nlohmann::json doc;
  try {
    std::ifstream in(json_path, std::ios::binary);
    if (!in) throw Error(ExitCode::bad_input, "cannot open " + json_path);
    doc = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return false;
  }
  if (!doc.is_object()) {
    if (why) *why = json_path + " is not a JSON object";
    return false;
  }
  std::string w;
  const std::string page = pages.render_html(doc, &w);
  if (page.empty()) {
    if (why) *why = w.empty() ? "cs.html is not in this stdlib" : w;
    return false;
  }
  const std::string w2 = write_page(html_path, page);
  if (!w2.empty()) {
    if (why) *why = w2;
    return false;
  }
  return true;
}

}  // namespace cs::run
