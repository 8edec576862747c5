#pragma once
// report.html beside report.json: rendered by a PageRenderer (run_host.hpp), written here.
// report.json is the contract; a page that fails to render is a warning, a page that cannot be
// written (disk full) is an unwritable output.
#include <filesystem>
#include <string>

#include "report.hpp"
#include "run_host.hpp"

namespace cs::run {

// Writes `page` to `path`, every write, the flush and the close checked: "" or the OS's reason
// (and no half page left behind).
std::string write_page(const std::filesystem::path& path, const std::string& page);

// report.html from `report`'s document: "" when written or not rendered (a render error is
// printed as a warning), else why it could not be written.
std::string write_html(const PageRenderer& pages, Report& report);

// The same on the way out (the coordinator, the signal thread): never throws; a page that could
// not be written is printed.
void write_html_on_the_way_out(const PageRenderer& pages, Report& report);

// report.html from a report.json on disk: what rank 0's guardian runs (in a child it bounds in
// time) after writing a partial report. False and *why when the file does not parse or the page
// does not render.
bool render_html_file(const PageRenderer& pages, const std::string& json_path, const std::string& html_path,
                      std::string* why);

}  // namespace cs::run
