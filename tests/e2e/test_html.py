"""report.html (stdlib/cs/html.lua): one self-contained page drawn from the report at the end of
every run. Checked with Python's html.parser only (no browser): well-formed nesting, nothing
that reaches the network or runs a script, one line per op/placement series, an n x n heatmap
(less the diagonal), findings and incidents shown, and every report string escaped."""
import html.parser
import json
import os
import re

import cs_e2e

EVIL = "<script>alert(1)</script>"
EVIL_ATTR = '"><img src=x onerror=alert(1)>'

# Elements that never have an end tag (HTML5 void elements).
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Page(html.parser.HTMLParser):
    """Parses a page, checking that every end tag closes the innermost open element, and keeps
    what the tests look at: every element (tag, attrs, enclosing svg classes) and the text."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.elements, self.texts = [], [], [], []
        self.svg_texts = []  # (class of the <text>, class of its svg, data)
        self.feed(text)
        self.close()
        if self.stack:
            self.errors.append("left open: %s" % self.stack)

    def _svg(self):
        for tag, attrs in reversed(self.stack):
            if tag == "svg":
                return attrs.get("class", "")
        return None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.elements.append((tag, a, self._svg()))
        if tag not in VOID:
            self.stack.append((tag, a))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs), self._svg()))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1][0] != tag:
            self.errors.append("</%s> closes %s" % (tag, self.stack[-1][0] if self.stack else "nothing"))
            return
        self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1][0] in ("style",):
            return
        self.texts.append(data)
        if self.stack and self.stack[-1][0] == "text":
            self.svg_texts.append((self.stack[-1][1].get("class", ""), self._svg(), data))

    # ---- queries ----
    def text(self):
        return "".join(self.texts)

    def find(self, tag, cls=None, svg=None):
        """Elements TAG (with class CLS among their classes) inside an svg whose class contains SVG."""
        out = []
        for t, a, s in self.elements:
            if t != tag:
                continue
            if cls is not None and cls not in a.get("class", "").split():
                continue
            if svg is not None and (s is None or svg not in s.split()):
                continue
            out.append(a)
        return out


class HtmlTest(cs_e2e.TestCase):

    def page(self, r):
        p = r.path("report.html")
        self.assertTrue(os.path.exists(p), "no report.html\n" + r.describe())
        with open(p, "rb") as f:
            text = f.read().decode("utf-8")
        self.assertNotIn("warning: report.html", r.stderr)
        return text, self.check_page(text)

    def check_page(self, text):
        """What holds for every page: well-formed, self-contained, no script."""
        self.assertTrue(text.startswith("<!DOCTYPE html>"), text[:100])
        pg = Page(text)
        self.assertEqual(pg.errors, [], "badly nested page")
        tags = [t for t, _, _ in pg.elements]
        for t in ("html", "head", "body", "style", "header"):
            self.assertTrue(t in tags, "no <%s> in the page" % t)
        self.assertEqual(tags.count("html"), 1)
        self.assertEqual(tags.count("body"), 1)
        for t in ("script", "link", "iframe", "img", "object", "embed", "foreignobject"):
            self.assertFalse(t in tags, "a <%s> element in the page" % t)
        self.assertIsNone(re.search(r"https?://", text, re.I), "a URL in the page")
        for t, a, _ in pg.elements:
            for k, v in a.items():
                self.assertFalse(k.startswith("on"), "event handler attribute %s on <%s>" % (k, t))
                if k in ("src", "href", "xlink:href"):
                    self.assertTrue(v.startswith("#"), "external reference %s=%r" % (k, v))
        self.assertNotIn("@import", text)
        self.assertNotIn("could not be drawn", text)
        return pg

    def render_reports(self, paths):
        """Renders report.json files with cs.html (a trusted recipe); returns [(text, Page)]."""
        probe = self.write("render.lua", """local cs = require "commscript"
local recipe = cs.recipe { name = "render", version = "0.1.0", options = { src = { {}, "report.json files" } } }
function recipe.run(ctx)
  for i, path in ipairs(ctx.opt.src) do
    local f = assert(io.open(path, "rb"))
    local doc = cs.json.decode(f:read("*a"))
    f:close()
    local o = assert(io.open(ctx.out_dir .. "/page" .. i .. ".html", "wb"))
    o:write(require("cs.html").render(doc))
    o:close()
  end
end
return recipe
""")
        r = self.cs(["--trusted", probe, "--src", ",".join(paths)])
        self.assertExit(r, cs_e2e.OK)
        out = []
        for i in range(len(paths)):
            with open(r.path("page%d.html" % (i + 1)), "rb") as f:
                text = f.read().decode("utf-8")
            out.append((text, self.check_page(text)))
        return out

    # ---- real runs ----
    def test_bw_sweep_curves(self):
        r = self.cs(["bw_sweep", "--ops", "allreduce,allgather,broadcast", "--max", "64K"], np=4)
        self.assertExit(r, cs_e2e.OK)
        text, pg = self.page(r)
        rep = r.report()
        series = {"%s %s" % (x["op"], x["placement"]) for x in rep["results"] if "busbw" in x}
        self.assertEqual(len(series), 6)
        lines = pg.find("polyline", "series", svg="bw")
        self.assertEqual(len(lines), len(series), "one line per op and placement")
        self.assertEqual({a["data-series"] for a in lines}, series)
        self.assertEqual(len(pg.find("polyline", "series", svg="lat")), len(series))
        # log2 x axis labelled with sizes (8, 1K, 64K ...); a legend entry per series
        ticks = [d for c, svg, d in pg.svg_texts if c == "tick" and "bw" in svg.split()]
        self.assertIn("1K", ticks)
        self.assertIn("64K", ticks)
        for t in ticks:
            self.assertRegex(t, r"^[0-9.]+[KMGT]?$")
        legend = [d for c, svg, d in pg.svg_texts if c == "legend" and "bw" in svg.split()]
        self.assertEqual(set(legend), series)
        svg_text = pg.text()
        # the header: recipe, version, ranks, exit code and its meaning
        self.assertIn("bw_sweep", svg_text)
        self.assertIn(rep["recipe"]["version"], svg_text)
        self.assertRegex(svg_text, r"ranks\s*4")
        self.assertIn("nothing failed", svg_text)
        self.assertEqual(pg.find("rect", "cell"), [], "no pairs, no heatmap")

    def test_chaos_slow_findings_and_heatmap(self):
        r = self.cs(["chaos_slow"], np=4)
        self.assertExit(r, cs_e2e.OK)
        text, pg = self.page(r)
        rep = r.report()
        self.assertTrue(rep["findings"], "chaos_slow names the slow rank")
        body = pg.text()
        for f in rep["findings"]:
            self.assertIn(f["message"], body)
            self.assertIn(f["remedy"], body)
        classes = " ".join(a.get("class", "") for _, a, _ in pg.elements)
        self.assertIn("sev-warn", classes)
        ranks = {x[k] for x in rep["results"] if x.get("kind") == "pair" for k in ("a", "b")}
        n = max(ranks) + 1
        self.assertEqual(n, 4)
        self.assertEqual(len(pg.find("rect", "cell", svg="heatmap")), n * (n - 1), "n x n cells less the diagonal")
        self.assertEqual(len(pg.find("rect", "diag", svg="heatmap")), n)
        self.assertGreaterEqual(text.count("<title>"), n * (n - 1), "values in tooltips")
        self.assertIn('id="chaos"', text)

    def test_chaos_hang_incident(self):
        r = self.cs(["--timeout", "2", "chaos_hang"], np=4, timeout=60)
        self.assertExit(r, cs_e2e.TIMEOUT)
        # The CLI writes report.html only when the recipe returns; on a timeout only report.json
        # is saved (from the coordinator's thread), so render that one through cs.html here.
        pages = self.render_reports([r.path("report.json")])
        if os.path.exists(r.path("report.html")):
            pages.append(self.page(r))
        inc = r.report()["incidents"][0]
        for text, pg in pages:
            body = pg.text()
            self.assertIn(inc["line"], body)
            self.assertIn("missing", body)
            self.assertIn("timeout / hang detected", body)
            self.assertIn("did not finish", body)
            self.assertNotIn('id="curves"', text)

    # ---- escaping: strings a recipe (someone else's code) puts in the report ----
    def test_recipe_strings_are_escaped(self):
        evil = json.dumps(EVIL)
        attr = json.dumps(EVIL_ATTR)
        body = """
  local E, A = %s, %s
  ctx.report:finding { severity = "warn", subject = { host = E, rank = 1 }, message = "bad " .. E,
                       evidence = { [E] = A, note = E }, remedy = "fix " .. A }
  for _, b in ipairs({ 8, 1024, 65536 }) do
    ctx.report:result { op = A, placement = E, bytes = b, busbw = b / 1e4, time_us = b / 100 }
  end
  ctx.report:result { kind = "pair", a = 0, b = 1, min_us = 3 }
  ctx.report:result { kind = "pair", a = 0, b = 2, min_us = 4 }
  ctx.report:result { kind = "pair", a = 1, b = 2, min_us = 30 }
  -- incidents are engine-owned (report:set refuses them): the engine's own entry point, --trusted
  local native = require "commscript.native"
  native.report_add("incidents", { kind = "timeout", line = E, missing = { { rank = 2, host = A, state = E } } })
  local card = require("cs.scorecard").compute {
    bandwidth = { busbw = 40, reference = 50, source = E },
    stability = { cv = 0.1, operations = 100 },
  }
  card.parts[1].formula = card.parts[1].formula .. A
  ctx.report:set("scorecard", card)
""" % (evil, attr)
        rec = self.recipe("evil", body, decl_extra=', options = { note = { "x", "a note" } }')
        r = self.cs(["--trusted", rec, "--note", EVIL])
        self.assertExit(r, cs_e2e.OK)
        text, pg = self.page(r)
        self.assertNotIn(EVIL, text)
        self.assertNotIn("<img", text)
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;", text)
        shown = pg.text()
        self.assertIn("bad " + EVIL, shown)     # escaped, so shown as text
        self.assertIn("fix " + EVIL_ATTR, shown)
        self.assertGreaterEqual(shown.count(EVIL), 6)
        lines = pg.find("polyline", "series", svg="bw")
        self.assertEqual([a["data-series"] for a in lines], ["%s %s" % (EVIL_ATTR, EVIL)])
        # the scorecard: total, band, each part with its reference, measured values and formula
        card = r.report()["scorecard"]
        self.assertIn("%.0f" % card["total"], shown)
        self.assertIn(card["band"], shown)
        for p in card["parts"]:
            self.assertIn(p["name"], shown)
            self.assertIn(p["formula"], shown)
        self.assertIn("busbw_gbps", shown)
        # pairs of three ranks, measured one way: both directions drawn
        self.assertEqual(len(pg.find("rect", "cell", svg="heatmap")), 6)

    # ---- partial and odd reports never break the page ----
    def test_partial_reports(self):
        killed = self.cs(["chaos_exit"], np=4, timeout=60)
        self.assertFalse(killed.timed_out, killed.describe())
        killed_json = killed.path("report.json")
        probe = self.write("probe.lua", """local cs = require "commscript"
local recipe = cs.recipe { name = "probe", version = "0.1.0" }
function recipe.run(ctx)
  local render = require("cs.html").render
  local docs = {
    empty = {},
    none = nil,
    killed_synthetic = { run = { exit_code = 143, ranks = 2 }, results = {},
      incidents = { { kind = "killed", signal = "SIGTERM", dead_ranks = { { rank = 1, host = "h" } } } } },
    odd = { recipe = "x", run = { ranks = "four", exit_code = 77 }, results = { 5, "s", { bytes = "x", busbw = {} },
      { op = "allreduce", bytes = 0, busbw = 1 }, { kind = "pair", a = 0, b = 1 },
      { kind = "pair", a = 1.5, b = 0, min_us = 1 }, { kind = "pair", a = 0, b = 1e9, min_us = 2 } },
      findings = { "oops", {}, { severity = "fatal", subject = { 1, 2 }, message = 3, evidence = { 1, { 2 } } } },
      scorecard = { parts = { {}, { name = "x", score = 250, reference = 1 } } }, matrix = { values = "x", n = 3 },
      topology = { hosts = { a = "b", c = { 0, 1, 2, 5 } } }, chaos = { 1, { kind = {} } }, incidents = { "x" },
      env = { A = 1 } },
    matrix = { matrix = { metric = "latency", unit = "us", n = 3, values = { { nil, 1, 2 }, { 3, nil, 4 }, { 5, 6 } } } },
  }
  for name, doc in pairs(docs) do
    local o = assert(io.open(ctx.out_dir .. "/" .. name .. ".html", "wb"))
    o:write(render(doc))
    o:close()
  end
  local o = assert(io.open(ctx.out_dir .. "/none.html", "wb"))
  o:write(render(nil))
  o:close()
end
return recipe
""")
        r = self.cs(["--trusted", probe])
        self.assertExit(r, cs_e2e.OK)
        pages = {}
        for name in ["empty", "none", "killed_synthetic", "odd", "matrix"]:
            with open(r.path(name + ".html"), "rb") as f:
                text = f.read().decode("utf-8")
            pages[name] = text
        # A killed run's report.json (saved by the signal handler; the CLI writes no report.html then).
        # Saving it races mpirun's kill, so it may be missing.
        if os.path.exists(killed_json):
            pages["killed_run"] = self.render_reports([killed_json])[0][0]
        for name, text in pages.items():
            with self.subTest(name):
                pg = self.check_page(text)
                if name == "killed_synthetic":  # a run ended by SIGTERM
                    self.assertIn("killed by signal 15 (SIGTERM)", pg.text())
                    self.assertIn("dead_ranks", pg.text())
                if name == "killed_run":  # chaos_exit: the coordinator's rank_died incident
                    self.assertIn("dead_ranks", pg.text())
                    self.assertIn("died", pg.text())
                if name == "matrix":
                    self.assertEqual(len(pg.find("rect", "cell", svg="heatmap")), 6)
                    self.assertEqual(len(pg.find("rect", "diag", svg="heatmap")), 3)


if __name__ == "__main__":
    cs_e2e.main()
