-- report.html: one self-contained page (inline CSS and SVG; no script, no external URL) drawn
-- from the report document (report.json as a Lua table). render(report) -> string.
-- Every string taken from the report is escaped; every section is optional and draws what
-- exists, and a section that fails to draw is replaced by a note instead of failing the page.
local M = {}

local fmt, concat, floor, ceil, abs, log = string.format, table.concat, math.floor, math.ceil, math.abs, math.log
local U = require "cs.html.util"
local esc, T, num, str, keys, fnum, fsize, text = U.esc, U.T, U.num, U.str, U.keys, U.fnum, U.fsize, U.text
local kvtable, records, section, ranges, cellv, islist = U.kvtable, U.records, U.section, U.ranges, U.cellv, U.islist
local X = require("commscript").exit  -- the codes, one table (stdlib/commscript.lua)
local EXIT = { [X.ok] = "ok: the recipe ran and nothing failed", [X.bad_input] = "bad input",
  [X.runtime] = "recipe runtime error", [X.health] = "health verdict failed",
  [X.corruption] = "data corruption detected", [X.hang_or_desync] = "timeout / hang detected",
  [X.output] = "the outputs could not be written", [X.internal] = "internal error" }
local SIG = { [1] = "SIGHUP", [2] = "SIGINT", [6] = "SIGABRT", [9] = "SIGKILL", [11] = "SIGSEGV", [15] = "SIGTERM" }
local function exit_meaning(c)
  if EXIT[c] then return EXIT[c] end
  if c > 128 and c < 160 then return fmt("killed by signal %d%s", c - 128, SIG[c - 128] and " (" .. SIG[c - 128] .. ")" or "") end
  return "unknown exit code"
end

local function header(r)
  local rec, run, cs = T(r.recipe), T(r.run), T(r.commscript)
  local facts = {}
  local function fact(k, v) if v ~= nil then facts[#facts + 1] = "<div><dt>" .. esc(k) .. "</dt><dd>" .. v .. "</dd></div>" end end
  fact("ranks", num(run.ranks) and esc(fnum(run.ranks)))
  local hosts = keys(T(r.topology).hosts)
  fact("hosts", num(run.hosts) and esc(fnum(run.hosts) .. (#hosts > 0 and #hosts <= 4 and " (" .. concat(hosts, ", ") .. ")" or "")))
  fact("backend", str(run.backend) and esc(run.backend))
  fact("start", str(run.start) and esc(run.start))
  fact("duration", num(run.duration_s) and esc(fmt("%.2f s", run.duration_s)) or "<i>did not finish</i>")
  fact("seed", num(run.seed) and esc(fnum(run.seed)))
  fact("commscript", str(cs.version) and esc(cs.version))
  local nf = {}
  for _, f in ipairs(T(r.findings)) do local sv = tostring(T(f).severity); nf[sv] = (nf[sv] or 0) + 1 end
  if #T(r.findings) > 0 then
    fact("findings", esc(fmt("%d error, %d warn, %d info", nf.error or 0, nf.warn or 0, nf.info or 0)))
  end
  local code = num(run.exit_code)
  if code then
    fact("exit code", fmt('<span class="badge %s">%s</span> %s', code == 0 and "ok" or "bad", esc(fnum(code)),
      esc(exit_meaning(code))))
  end
  local title = "commscript report: " .. tostring(str(rec.name) or "(unknown recipe)")
  return fmt('<header><h1>%s%s</h1>\n<dl class="facts">%s</dl></header>\n', esc(title),
    str(rec.version) and ' <span class="ver">v' .. esc(rec.version) .. "</span>" or "", concat(facts))
end

local function band_class(b) return b == "excellent" and "ok" or b == "good" and "mid" or "bad" end
local function bar(score)
  local s = math.max(0, math.min(100, score))
  return fmt('<svg class="bar" width="104" height="12" role="img"><rect x="0" y="1" width="104" height="10" fill="#eee"/>'
    .. '<rect x="2" y="3" width="%.1f" height="6" fill="%s"/></svg>', s, s >= 85 and "#1a9850" or s >= 70 and "#e0a30b" or "#d73027")
end

local function scorecard(r)
  local sc = T(r.scorecard)
  if not num(sc.total) and #T(sc.parts) == 0 then return nil end
  local out = {}
  if num(sc.total) then
    out[1] = fmt('<p class="total"><span class="big %s">%.0f</span>/100 <span class="band %s">%s</span></p>',
      band_class(sc.band), sc.total, band_class(sc.band), esc(str(sc.band) or ""))
  end
  out[#out + 1] = '<table class="grid score"><tr><th>part</th><th>weight</th><th>score</th><th>reference</th><th>measured</th><th>formula</th></tr>'
  for _, p in ipairs(T(sc.parts)) do
    p = T(p)
    local w = num(p.weight) and fmt("%.2f", p.weight) or ""
    if num(p.effective_weight) and num(p.weight) and abs(p.effective_weight - p.weight) > 1e-6 then
      w = w .. fmt(" (used %.2f)", p.effective_weight)
    end
    out[#out + 1] = fmt("<tr><th>%s</th><td>%s</td><td>%s %s</td><td>%s</td><td>%s</td><td><code>%s</code></td></tr>",
      esc(str(p.name) or "?"), esc(w), num(p.score) and esc(fmt("%.1f", p.score)) or "", num(p.score) and bar(p.score) or "",
      kvtable(T(p.reference)), kvtable(T(p.measured)), esc(str(p.formula) or ""))
  end
  for _, l in ipairs(T(sc.left_out)) do
    l = T(l)
    out[#out + 1] = fmt('<tr><th>%s</th><td>%s</td><td colspan="4"><i>left out, its weight re-spread over the others:</i> %s</td></tr>',
      esc(str(l.name) or "?"), num(l.weight) and esc(fmt("%.2f", l.weight)) or "", esc(str(l.why) or ""))
  end
  out[#out + 1] = "</table>"
  if str(sc.formula) then out[#out + 1] = '<p class="note">total = <code>' .. esc(sc.formula) .. "</code></p>" end
  local extra = {}
  for _, k in ipairs({ "weights", "bands", "config" }) do if sc[k] ~= nil then extra[k] = sc[k] end end
  out[#out + 1] = kvtable(extra)
  return section("scorecard", "Scorecard", concat(out, "\n"))
end

local SUBJ = { rank = 1, ranks = 2, pair = 3, link = 4, host = 5, hosts = 6, variable = 7 }
local function subject(s)
  if type(s) ~= "table" then return num(s) and "rank " .. fnum(s) or tostring(s or "") end
  local parts, ks = {}, keys(s)
  table.sort(ks, function(a, b) return (SUBJ[a] or 9) < (SUBJ[b] or 9) or ((SUBJ[a] or 9) == (SUBJ[b] or 9) and tostring(a) < tostring(b)) end)
  for _, k in ipairs(ks) do
    local v = s[k]
    if type(v) == "table" and islist(v) then
      local items = {}
      for i = 1, #v do items[i] = text(v[i]) end
      parts[#parts + 1] = tostring(k) .. " " .. concat(items, k == "pair" and "-" or ", ")
    else
      parts[#parts + 1] = tostring(k) .. " " .. text(v)
    end
  end
  return concat(parts, ", ")
end

-- A finding's evidence for a reader: each entry in a line of words and numbers (a list of
-- records counted, a table's own numbers flattened one level, a confidence in per cent), the
-- whole raw table behind a "details" toggle.
local MAX_ITEMS = 8
local function fact(k, v)
  if type(v) ~= "table" then
    if k == "confidence" and num(v) and v >= 0 and v <= 1 then return fmt("%.2f %%", 100 * v) end
    return cellv(k, v)
  end
  if islist(v) then
    if #v == 0 then return "none" end
    if type(v[1]) == "table" then return fmt("%d %s", #v, #v == 1 and "entry" or "entries") end
    local items = {}
    for i = 1, math.min(#v, MAX_ITEMS) do items[i] = cellv(k, v[i]) end
    return concat(items, ", ") .. (#v > MAX_ITEMS and fmt(" ... (%d in all)", #v) or "")
  end
  local parts = {}
  for _, sk in ipairs(keys(v)) do
    local x = v[sk]
    if type(x) ~= "table" then parts[#parts + 1] = tostring(sk) .. " " .. fact(sk, x)
    elseif islist(x) and #x > 0 then parts[#parts + 1] = tostring(sk) .. " " .. fact(sk, x) end
  end
  return #parts > 0 and concat(parts, ", ") or "-"
end

local function evidence(ev)
  if next(ev) == nil then return "" end
  local items, h, d = {}, {}, {}
  for _, k in ipairs(keys(ev)) do
    items[#items + 1] = "<li><b>" .. esc(k) .. "</b> " .. esc(fact(k, ev[k])) .. "</li>"
    h[#h + 1] = "<th>" .. esc(k) .. "</th>"; d[#d + 1] = "<td>" .. esc(cellv(k, ev[k])) .. "</td>"
  end
  return '<ul class="ev">' .. concat(items) .. "</ul><details><summary>raw evidence</summary>"
    .. '<div class="scroll"><table class="grid ev"><tr>' .. concat(h) .. "</tr><tr>" .. concat(d) .. "</tr></table></div></details>"
end

local SEV = { error = 1, warn = 2, info = 3 }
local function findings(r)
  local list = {}
  for i, f in ipairs(T(r.findings)) do list[#list + 1] = { i = i, f = T(f) } end
  table.sort(list, function(a, b)
    local sa, sb = SEV[a.f.severity] or 4, SEV[b.f.severity] or 4
    if sa ~= sb then return sa < sb end
    return a.i < b.i
  end)
  if #list == 0 then return section("findings", "Findings", '<p class="note">No findings.</p>') end
  local out = {}
  for _, e in ipairs(list) do
    local f = e.f
    local sev = SEV[f.severity] and f.severity or "other"
    local evh = evidence(T(f.evidence))
    out[#out + 1] = fmt('<div class="finding sev-%s"><div class="fh"><span class="sev">%s</span> <span class="subj">%s</span></div>'
      .. '<p class="msg">%s</p>%s%s</div>', sev, esc(str(f.severity) or "?"), esc(subject(f.subject)),
      esc(tostring(f.message or "")), evh,
      str(f.remedy) and f.remedy ~= "" and '<p class="remedy"><b>Remedy:</b> ' .. esc(f.remedy) .. "</p>" or "")
  end
  return section("findings", fmt("Findings (%d)", #list), concat(out, "\n"))
end

local function incidents(r)
  local list = T(r.incidents)
  if #list == 0 then return nil end
  local out = {}
  for _, inc in ipairs(list) do
    inc = T(inc)
    local scalars, lists = {}, {}
    for _, k in ipairs(keys(inc)) do
      local v = inc[k]
      if type(v) == "table" and #v > 0 and type(v[1]) == "table" then lists[#lists + 1] = k
      elseif k ~= "line" and k ~= "message" and k ~= "kind" and not (type(v) == "table" and next(v) == nil) then scalars[k] = v end
    end
    out[#out + 1] = fmt('<div class="incident"><h3><span class="badge bad">%s</span> %s</h3>', esc(str(inc.kind) or "incident"),
      esc(str(inc.line) or str(inc.message) or ""))
    out[#out + 1] = kvtable(scalars)
    local order = { missing = 1, dead_ranks = 2, mismatch = 3, ranks = 4 }
    table.sort(lists, function(a, b) return (order[a] or 9) < (order[b] or 9) or ((order[a] or 9) == (order[b] or 9) and tostring(a) < tostring(b)) end)
    for _, k in ipairs(lists) do
      out[#out + 1] = "<h4>" .. esc(k) .. "</h4>" .. records(inc[k], { "rank", "host", "state", "op", "seq", "last_seq", "detail" }, 64)
    end
    out[#out + 1] = "</div>"
  end
  return section("incidents", "Incidents", concat(out, "\n"))
end

local function chaos(r)
  local list = T(r.chaos)
  if #list == 0 then return nil end
  local groups, rows = {}, {}
  for _, c in ipairs(list) do  -- one row per kind, rank and operation; numbers as ranges
    c = T(c)
    local key = text(c.kind) .. "|" .. text(c.rank) .. "|" .. text(c.op)
    local g = groups[key]
    if not g then
      g = { row = { kind = c.kind, rank = c.rank, host = c.host, op = c.op, injections = 0 }, lo = {}, hi = {} }
      groups[key], rows[#rows + 1] = g, g.row
    end
    g.row.injections = g.row.injections + 1
    for k, v in pairs(c) do
      if num(v) and k ~= "rank" and k ~= "time" then g.lo[k], g.hi[k] = math.min(g.lo[k] or v, v), math.max(g.hi[k] or v, v) end
    end
  end
  for _, g in pairs(groups) do
    for k, lo in pairs(g.lo) do g.row[k] = lo == g.hi[k] and cellv(k, lo) or cellv(k, lo) .. " .. " .. cellv(k, g.hi[k]) end
  end
  local prefer = { "kind", "rank", "host", "op", "injections", "seq", "bytes", "comm" }
  return section("chaos", "Chaos injections", records(rows, prefer) .. fmt("<details><summary>every injection (%d)</summary>", #list)
    .. records(list, prefer, 200) .. "</details>")
end

-- ---- charts --------------------------------------------------------------------------------
local PALETTE = { "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#6b6ecf" }
local function log2(x)
  local v = log(x) / log(2)
  local r = floor(v + 0.5)
  return abs(v - r) < 1e-9 and r or v
end

-- Series from results: label -> sorted points {x = bytes, y = mean value}.
local function collect(results, yof)
  local by, order = {}, {}
  for _, res in ipairs(T(results)) do
    if type(res) == "table" and res.kind ~= "pair" and num(res.bytes) and res.bytes > 0 then
      local y = yof(res)
      if y then
        local label, group
        if str(res.op) then
          group = tostring(res.op)
          label = group .. (str(res.placement) and " " .. res.placement or "") .. (str(res.kind) and res.kind ~= res.op and " (" .. res.kind .. ")" or "")
        elseif type(res.pair) == "table" then
          label = "p2p " .. text(res.pair[1]) .. "-" .. text(res.pair[2]); group = label
        else label = tostring(str(res.kind) or "result"); group = label end
        local s = by[label]
        if not s then s = { label = label, group = group, dash = res.placement == "in-place", coll = str(res.op) ~= nil, sum = {}, n = {} }; by[label] = s; order[#order + 1] = s end
        s.sum[res.bytes] = (s.sum[res.bytes] or 0) + y
        s.n[res.bytes] = (s.n[res.bytes] or 0) + 1
      end
    end
  end
  local groups, ng = {}, 0
  for _, s in ipairs(order) do
    if not groups[s.group] then ng = ng + 1; groups[s.group] = PALETTE[(ng - 1) % #PALETTE + 1] end
    s.color, s.pts = groups[s.group], {}
    for _, x in ipairs(keys(s.sum)) do s.pts[#s.pts + 1] = { x = x, y = s.sum[x] / s.n[x] } end
  end
  table.sort(order, function(a, b) return a.label < b.label end)
  return order
end

local function nice_ticks(top)
  if top <= 0 then top = 1 end
  local raw = top / 5
  local mag = 10 ^ floor(log(raw) / log(10))
  local n = raw / mag
  local step = (n <= 1 and 1 or n <= 2 and 2 or n <= 5 and 5 or 10) * mag
  local t = {}
  for i = 0, ceil(top / step - 1e-9) do t[#t + 1] = i * step end
  return t, t[#t]
end

local function chart(series, o)
  local ML, MT, PW, PH, LW = 70, 14, 620, 290, 250
  local xs, ys = {}, {}
  for _, s in ipairs(series) do
    for _, p in ipairs(s.pts) do
      xs[#xs + 1] = log2(p.x)
      if not o.ylog or p.y > 0 then ys[#ys + 1] = p.y end
    end
  end
  if #ys == 0 then return "" end
  local xmin, xmax, ymin, ymax = math.huge, -math.huge, math.huge, -math.huge
  for _, x in ipairs(xs) do xmin, xmax = math.min(xmin, x), math.max(xmax, x) end
  for _, y in ipairs(ys) do ymin, ymax = math.min(ymin, y), math.max(ymax, y) end
  xmin, xmax = floor(xmin), ceil(xmax)
  if xmax == xmin then xmin, xmax = xmin - 1, xmax + 1 end
  local span = xmax - xmin  -- labelled ticks every `step` powers of two, the largest size labelled
  local step = span <= 11 and 1 or span <= 22 and 2 or span <= 44 and 4 or 10
  xmin = math.max(xmax - ceil(span / step) * step, math.min(xmin, 0))  -- never below 1 byte when none is
  local ticks, Y = {}, nil
  if o.ylog then
    local lo, hi = floor(log(ymin) / log(10) + 1e-9), ceil(log(ymax) / log(10) - 1e-9)
    if hi <= lo then hi = lo + 1 end
    for k = lo, hi do
      ticks[#ticks + 1] = 10 ^ k
      if hi - lo <= 2 and k < hi then ticks[#ticks + 1] = 2 * 10 ^ k; ticks[#ticks + 1] = 5 * 10 ^ k end
    end
    Y = function(v) return MT + PH - (log(v) / log(10) - lo) / (hi - lo) * PH end
  else
    local top
    ticks, top = nice_ticks(ymax)
    Y = function(v) return MT + PH - v / top * PH end
  end
  local function X(b) return ML + (log2(b) - xmin) / (xmax - xmin) * PW end
  local shown = math.min(#series, 30)
  local H = math.max(MT + PH + 50, MT + 18 * (shown + 1) + 10)
  local out = { fmt('<svg class="chart %s" width="%d" height="%d" viewBox="0 0 %d %d" role="img">', o.cls, ML + PW + LW, H, ML + PW + LW, H) }
  out[#out + 1] = fmt('<rect x="%d" y="%d" width="%d" height="%d" fill="#fff" stroke="#999"/>', ML, MT, PW, PH)
  for _, v in ipairs(ticks) do
    local y = Y(v)
    out[#out + 1] = fmt('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e4e4e4"/><text x="%d" y="%.1f" text-anchor="end" class="tick">%s</text>',
      ML + 1, ML + PW - 1, y, y, ML - 6, y + 4, esc(fmt("%g", v)))
  end
  for k = xmin, xmax do
    local x, major = X(2 ^ k), (xmax - k) % step == 0
    out[#out + 1] = fmt('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s"/>', x, x, MT + 1, MT + PH - 1, major and "#e0e0e0" or "#f3f3f3")
    if major then
      out[#out + 1] = fmt('<text x="%.1f" y="%d" text-anchor="middle" class="tick">%s</text>', x, MT + PH + 16, esc(fsize(2 ^ k)))
    end
  end
  out[#out + 1] = fmt('<text x="%d" y="%d" text-anchor="middle" class="axis">message size (bytes, log2 scale)</text>', ML + floor(PW / 2), MT + PH + 38)
  out[#out + 1] = fmt('<text transform="translate(16,%d) rotate(-90)" text-anchor="middle" class="axis">%s</text>', MT + floor(PH / 2), esc(o.ylabel))
  for i, s in ipairs(series) do
    local pts, dots = {}, {}
    for _, p in ipairs(s.pts) do
      if not o.ylog or p.y > 0 then
        local x, y = X(p.x), Y(p.y)
        pts[#pts + 1] = fmt("%.1f,%.1f", x, y)
        dots[#dots + 1] = fmt('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s</title></circle>', x, y, s.color,
          esc(fmt("%s, %s: %s %s", s.label, fsize(p.x), fnum(p.y), o.unit)))
      end
    end
    out[#out + 1] = fmt('<polyline class="series" data-series="%s" points="%s" fill="none" stroke="%s" stroke-width="1.8"%s/>',
      esc(s.label), concat(pts, " "), s.color, s.dash and ' stroke-dasharray="5,3"' or "")
    out[#out + 1] = concat(dots)
    if i <= shown then
      local ly, lx = MT + 18 * i, ML + PW + 16
      local short = #s.label > 34 and s.label:sub(1, 32) .. "..." or s.label
      out[#out + 1] = fmt('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2.5"%s/><text x="%d" y="%d" class="legend">%s<title>%s</title></text>',
        lx, lx + 26, ly - 4, ly - 4, s.color, s.dash and ' stroke-dasharray="5,3"' or "", lx + 32, ly, esc(short), esc(s.label))
    end
  end
  if #series > shown then
    out[#out + 1] = fmt('<text x="%d" y="%d" class="legend">... and %d more</text>', ML + PW + 16, MT + 18 * (shown + 1), #series - shown)
  end
  out[#out + 1] = "</svg>"
  return concat(out)
end

local function curves(r)
  local bw = collect(r.results, function(x) return num(x.busbw) or num(x.bw_GBps) or num(x.bw_gbps) end)
  local lat = collect(r.results, function(x) return num(x.latency_us) or num(x.time_us) end)
  if #bw == 0 and #lat == 0 then return nil end
  local most = 0
  for _, s in ipairs(bw) do most = math.max(most, #s.pts) end
  for _, s in ipairs(lat) do most = math.max(most, #s.pts) end
  if most < 2 then  -- one size only: a table says more than a chart of dots
    local rows, at = {}, {}
    for _, set in ipairs({ { bw, "busbw (GB/s)" }, { lat, "time (us)" } }) do
      for _, s in ipairs(set[1]) do
        for _, p in ipairs(s.pts) do
          local k = s.label .. "|" .. p.x
          if not at[k] then at[k] = { series = s.label, bytes = p.x }; rows[#rows + 1] = at[k] end
          at[k][set[2]] = p.y
        end
      end
    end
    return section("curves", "Measurements", records(rows, { "series", "bytes", "busbw (GB/s)" }))
  end
  local out, coll, p2p = {}, 0, 0
  for _, s in ipairs(bw) do if s.coll then coll = coll + 1 else p2p = p2p + 1 end end
  if #bw > 0 then
    out[#out + 1] = "<h3>Bandwidth vs message size</h3><p class=\"note\">one line per operation and placement (dashed: in-place); "
      .. "collectives: bus bandwidth as nccl-tests' busbw; point-to-point: bandwidth</p>"
      .. chart(bw, { cls = "bw", unit = "GB/s", ylabel = p2p == 0 and "busbw (GB/s)" or coll == 0 and "bandwidth (GB/s)" or "busbw / bandwidth (GB/s)" })
  end
  if #lat > 0 then
    out[#out + 1] = "<h3>Latency vs message size</h3><p class=\"note\">time per operation (p2p: one-way latency), log scale</p>"
      .. chart(lat, { cls = "lat", ylabel = "time (us, log scale)", unit = "us", ylog = true })
  end
  return section("curves", "Curves", concat(out, "\n"))
end

local matrix = require("cs.html.matrix").matrix

-- The hosts drawn: GPUs, NICs, NUMA nodes and their links, findings marked (cs.html.topo).
local topology = require("cs.html.topo").topology

local function options(r)
  local rec, run, cs = T(r.recipe), T(r.run), T(r.commscript)
  local info = {}
  for _, k in ipairs({ "file", "sha256", "args", "bundled" }) do info[k] = rec[k] end
  for _, k in ipairs({ "command", "config", "timeout_s", "trusted", "replay_of" }) do info[k] = run[k] end
  if type(run.command) == "table" then info.command = concat(run.command, " ") end
  local out = {}
  for _, part in ipairs({ { "Recipe and run", info }, { "Options", T(rec.options) }, { "commscript", cs } }) do
    if next(part[2]) ~= nil then out[#out + 1] = "<h3>" .. part[1] .. "</h3>" .. kvtable(part[2]) end
  end
  local env = T(r.env)
  out[#out + 1] = fmt("<details><summary>Environment (%s)</summary>%s</details>", require("cs.text").plural(#keys(env), "variable"), kvtable(env))
  return section("run", "Options and environment", concat(out, "\n"))
end

local CSS = [[
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#222;margin:0 auto;max-width:1080px;padding:16px 24px}
h1{font-size:22px;margin:4px 0 8px}h2{font-size:18px;border-bottom:2px solid #ddd;padding-bottom:3px;margin-top:28px}
h3{font-size:15px;margin:14px 0 4px}h4{margin:8px 0 2px;font-size:13px}.ver{color:#777;font-weight:normal}
dl.facts{display:flex;flex-wrap:wrap;gap:6px 22px;margin:0}dl.facts div{display:flex;gap:6px}dt{color:#666}dd{margin:0;font-weight:600}
nav{margin:10px 0;font-size:13px}nav a{margin-right:12px;color:#2a5db0}
table{border-collapse:collapse;font-size:12.5px;margin:4px 0}th,td{padding:2px 8px;text-align:left;vertical-align:top}
table.grid th{background:#f1f1f1}table.grid td,table.grid th{border:1px solid #ddd}table.kv th{color:#555;font-weight:600}
table.kv td{overflow-wrap:anywhere}.scroll{overflow-x:auto}code{font-size:12px;background:#f6f6f6;padding:1px 3px}
.note{color:#666;font-size:12.5px;margin:4px 0}.badge{display:inline-block;padding:0 7px;border-radius:9px;color:#fff;font-weight:600}
.ok{background:#1a9850}.mid{background:#e0a30b}.bad{background:#d73027}.total{font-size:16px}
.big{font-size:30px;font-weight:700;color:#fff;padding:0 10px;border-radius:6px}.band{color:#fff;padding:1px 8px;border-radius:9px}
table.score table.kv{margin:0}table.score .kv td{overflow-wrap:normal}
.finding{border-left:5px solid #999;background:#fafafa;padding:6px 10px;margin:8px 0}.finding .msg{margin:4px 0;font-weight:600}
.sev{font-weight:700;text-transform:uppercase;font-size:12px}.sev-error{border-color:#d73027}.sev-error .sev{color:#d73027}
.sev-warn{border-color:#e0a30b}.sev-warn .sev{color:#b07d00}.sev-info{border-color:#4e79a7}.sev-info .sev{color:#4e79a7}
.subj{color:#444}.remedy{margin:4px 0;font-size:13px}.incident{border:1px solid #e6b0aa;background:#fdf5f4;padding:6px 10px;margin:8px 0}
.incident h3{margin:2px 0 6px;font-size:14px}svg text{font-family:inherit}svg .tick{font-size:11px;fill:#444}svg .axis{font-size:12px;fill:#222}
svg .legend{font-size:12px;fill:#222}svg .cv{font-size:10px;fill:#111;pointer-events:none}
.hostd{display:none;border:1px solid #ccc;padding:4px 8px;margin:6px 0}.hostd:target{display:block}
svg.hostmap a.hrow:hover rect{stroke:#000;stroke-width:.5}
.maps{display:flex;flex-wrap:wrap;gap:10px 40px}.hot{color:#d73027;font-weight:600}svg.bar{vertical-align:middle}details{margin:8px 0}ul.ev{margin:4px 0;padding-left:18px}ul.ev li{margin:1px 0}summary{cursor:pointer;color:#2a5db0}
]]

-- The elastic recipes' sections (cs.html.elastic): the drill timeline, the backend comparison.
local function drill(r)
  local body = require("cs.html.elastic").drill(r)
  return body and section("drill", "Drop drill timeline", body)
end
local function protocols(r)
  local body = require("cs.html.elastic").protocols(r)
  return body and section("protocols", "Backend comparison", body)
end

local SECTIONS = {
  { "scorecard", "Scorecard", scorecard }, { "findings", "Findings", findings }, { "incidents", "Incidents", incidents },
  { "chaos", "Chaos injections", chaos },
  { "drill", "Drop drill timeline", drill }, { "protocols", "Backend comparison", protocols }, { "curves", "Curves", curves }, { "matrix", "Rank x rank matrix", matrix },
  { "topology", "Topology", topology }, { "run", "Options and environment", options },
}

function M.render(report)
  report = T(report)
  local ok, head = pcall(header, report)
  local body, nav = { ok and head or '<header><h1>commscript report</h1><p class="note">header: ' .. esc(head) .. "</p></header>" }, {}
  for _, s in ipairs(SECTIONS) do
    local good, html = pcall(s[3], report)
    if not good then html = section(s[1], s[2], '<p class="note">this section could not be drawn: ' .. esc(html) .. "</p>") end
    if html then
      body[#body + 1] = html
      nav[#nav + 1] = fmt('<a href="#%s">%s</a>', s[1], esc(s[2]))
    end
  end
  table.insert(body, 2, "<nav>" .. concat(nav) .. "</nav>")
  local name = str(T(report.recipe).name)
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" .. esc("commscript: " .. tostring(name or "report"))
    .. "</title>\n<style>" .. CSS .. require("cs.html.topo").CSS .. "</style></head>\n<body>\n" .. concat(body, "\n") .. "\n</body></html>\n"
end

return M
