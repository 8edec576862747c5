-- report.html's rank x rank matrix section: an n x n SVG heatmap up to 128 ranks, host x host
-- maps with per-host drill-down above (docs/scale.md). matrix(report) -> html | nil.
local M = {}

local fmt, concat, floor, ceil = string.format, table.concat, math.floor, math.ceil
local U = require "cs.html.util"
local esc, T, num, str, keys, fnum, fsize, text = U.esc, U.T, U.num, U.str, U.keys, U.fnum, U.fsize, U.text
local kvtable, records, section, ranges = U.kvtable, U.records, U.section, U.ranges

-- ---- heatmap -------------------------------------------------------------------------------
local function mcell(row, j) row = T(row); return num(row[j]) or num(row[tostring(j)]) end
local function color(t)  -- 0 = bad (red) .. 0.5 yellow .. 1 = good (green)
  local a, b, u
  if t < 0.5 then a, b, u = { 215, 48, 39 }, { 254, 224, 139 }, t * 2 else a, b, u = { 254, 224, 139 }, { 26, 152, 80 }, t * 2 - 1 end
  local function c(k) return floor(a[k] + (b[k] - a[k]) * u + 0.5) end
  return fmt("#%02x%02x%02x", c(1), c(2), c(3))
end

-- Colours against the fleet's median, not the range: within OFF_GREEN of the median is green,
-- OFF_RED times worse (or more) red, log-scaled between, and better than the median green: a
-- healthy fleet with one noisy pair stays green, only what is off stands out.
local OFF_GREEN, OFF_RED = 1.25, 4
local function against_median(med, higher)
  return function(x)
    if not (med and med > 0 and x and x > 0) then return 0.5 end
    local worse = higher and med / x or x / med
    if worse <= OFF_GREEN then return 1 end
    return math.max(0, 1 - math.log(worse / OFF_GREEN) / math.log(OFF_RED / OFF_GREEN))
  end
end

-- The ranks localisation re-tested, named or found off and not confirmed (report.json's findings
-- and localisation): rank -> "verdict" | "unconfirmed" | "suspect", marked on the heatmap.
local MARK = { verdict = "#b2182b", unconfirmed = "#ef8a62", suspect = "#4393c3" }
local function marks_of(r)
  local m = {}
  local function put(rank, k)
    rank = num(rank)
    if rank and rank % 1 == 0 and (m[rank] ~= "verdict") and not (k == "suspect" and m[rank]) then m[rank] = k end
  end
  local loc = T(r.localisation)
  for _, t in ipairs(T(loc.tested)) do
    if type(t) == "table" then
      put(t.rank, "suspect")
      for _, p in ipairs(T(t.pairs)) do
        if type(p) == "table" and t.host == nil and t.rank == nil and not p.shown_good then put(p.a, "suspect"); put(p.b, "suspect") end
      end
    end
  end
  for _, x in ipairs(T(T(loc.forced).ranks)) do put(x, "suspect") end
  for _, f in ipairs(T(r.findings)) do
    local s = type(f) == "table" and T(f.subject) or {}
    local k = (f.rule == "slow_host" or f.rule == "slow_rank" or f.rule == "slow_link") and "verdict"
      or (f.rule == "not_confirmed" and "unconfirmed") or nil
    if k then
      put(s.rank, k)
      for _, x in ipairs(T(s.ranks)) do put(x, k) end
      for _, x in ipairs(T(s.pair)) do put(x, k) end
    end
  end
  return m
end

local function mark_lines(marks, n, ML, MT, C)
  local out = {}
  for rank, k in pairs(marks) do
    if rank >= 0 and rank < n then
      local dash = k == "verdict" and "" or ' stroke-dasharray="4 3"'
      out[#out + 1] = fmt('<rect class="mark %s" x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s" stroke-width="2"%s><title>rank %d: %s</title></rect>',
        k, ML, MT + C * rank, C * n, C, MARK[k], dash, rank, k)
      out[#out + 1] = fmt('<rect class="mark %s" x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s" stroke-width="2"%s/>',
        k, ML + C * rank, MT, C, C * n, MARK[k], dash)
    end
  end
  return concat(out)
end

local function heatmap(v, n, o, id, marks)
  if n > 128 then return fmt('<p class="note">%d x %d: too large to draw here; the values are in report.json</p>', n, n) end
  local vals = {}
  for i = 1, n do for j = 1, n do if i ~= j and mcell(v[i], j) then vals[#vals + 1] = mcell(v[i], j) end end end
  if #vals == 0 then return "" end
  table.sort(vals)
  local lo, hi = vals[1], vals[#vals]
  local med = vals[floor((#vals + 1) / 2)]
  local good = against_median(med, o.higher)
  local C = math.max(4, math.min(56, floor(480 / n)))
  local ML, MT = 44, 34
  local lstep = ceil(16 / C)
  local W, H = math.max(ML + C * n + 10, ML + 250), MT + C * n + 62
  local out = { fmt('<svg class="heatmap" width="%d" height="%d" viewBox="0 0 %d %d" role="img">', W, H, W, H) }
  out[#out + 1] = fmt('<defs><linearGradient id="%s">', id)
  for k = 0, 4 do out[#out + 1] = fmt('<stop offset="%d%%" stop-color="%s"/>', k * 25, color(k / 4)) end
  out[#out + 1] = "</linearGradient></defs>"
  out[#out + 1] = fmt('<text x="%d" y="12" class="axis">%s</text>', ML, esc(o.cols))
  for i = 1, n do
    if (i - 1) % lstep == 0 then
      out[#out + 1] = fmt('<text x="%.1f" y="%d" text-anchor="middle" class="tick">%d</text><text x="%d" y="%.1f" text-anchor="end" class="tick">%d</text>',
        ML + C * (i - 0.5), MT - 6, i - 1, ML - 6, MT + C * (i - 0.5) + 4, i - 1)
    end
    for j = 1, n do
      local x, y, c = ML + C * (j - 1), MT + C * (i - 1), mcell(v[i], j)
      if i == j then
        out[#out + 1] = fmt('<rect class="diag" x="%d" y="%d" width="%d" height="%d" fill="#ccc"/>', x, y, C, C)
      elseif c then
        out[#out + 1] = fmt('<rect class="cell" x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="#fff" stroke-width="%s"><title>%s</title></rect>',
          x, y, C, C, color(good(c)), C > 8 and "1" or "0", esc(fmt("%s %d -> %d: %s %s", o.what, i - 1, j - 1, fnum(c), o.unit)))
        if C >= 44 then
          out[#out + 1] = fmt('<text x="%.1f" y="%.1f" text-anchor="middle" class="cv">%s</text>', x + C / 2, y + C / 2 + 4, esc(fmt("%.4g", c)))
        end
      else
        out[#out + 1] = fmt('<rect class="nodata" x="%d" y="%d" width="%d" height="%d" fill="#f6f6f6"><title>%d -> %d: no value</title></rect>', x, y, C, C, i - 1, j - 1)
      end
    end
  end
  if marks then out[#out + 1] = mark_lines(marks, n, ML, MT, C) end
  out[#out + 1] = fmt('<text transform="translate(12,%.1f) rotate(-90)" text-anchor="middle" class="axis">%s</text>', MT + C * n / 2, esc(o.rows))
  local ly = MT + C * n + 18
  out[#out + 1] = fmt('<rect x="%d" y="%d" width="200" height="12" fill="url(#%s)" stroke="#999"/>', ML, ly, id)
  out[#out + 1] = fmt('<text x="%d" y="%d" class="tick">%gx worse</text><text x="%d" y="%d" text-anchor="end" class="tick">median %s</text>',
    ML, ly + 26, OFF_RED, ML + 200, ly + 26, esc(fnum(med)))
  out[#out + 1] = fmt('<text x="%d" y="%d" text-anchor="middle" class="tick">%s, %s is better; against the median</text>', ML + 100, ly + 40,
    esc(o.unit), o.higher and "higher" or "lower")
  out[#out + 1] = "</svg>"
  local legend = ""
  if marks and next(marks) then
    legend = '<p class="note">outlined rows and columns: <span style="color:#b2182b">named</span>, '
      .. '<span style="color:#ef8a62">off in the matrix, not confirmed</span>, <span style="color:#4393c3">re-tested, cleared</span></p>'
  end
  return concat(out) .. fmt('<p class="note">%d values: min %s, median %s, max %s %s</p>', #vals, esc(fnum(lo)),
    esc(fnum(med)), esc(fnum(hi)), esc(o.unit)) .. legend
end

-- ---- host view (more ranks than a rank x rank map can draw) --------------------------------
-- Above RANK_MAP_MAX ranks the page draws a host x host map instead of n^2 cells (a million at
-- 1024 ranks): each cell is the median of the pair values between the two hosts, each row
-- links to that host's detail (its ranks: median with its own host and with the others, the
-- worst partner), shown by CSS :target, no script. Above HOST_MAP_MAX hosts, hosts are
-- grouped (contiguous, in host order) and a group's row links to the group's table of hosts.
local RANK_MAP_MAX, HOST_MAP_MAX = 128, 128

-- Hosts of the report: names in order, per rank (1-based) its host index; from topology.hosts
-- (name -> list of ranks, or -> {ranks = list}) in topology.host_order, else by first rank.
local function host_map(r, n)
  local hs = T(T(r.topology).hosts)
  local names, of = {}, {}
  for _, h in ipairs(keys(hs)) do
    local e = T(hs[h])
    local rs = type(e.ranks) == "table" and e.ranks or e
    local first
    for _, x in ipairs(rs) do
      if num(x) and x >= 0 and x < n and x % 1 == 0 then
        first = first and math.min(first, x) or x
      end
    end
    if first then names[#names + 1] = { name = tostring(h), rs = rs, first = first } end
  end
  local order = {}
  for i, h in ipairs(T(T(r.topology).host_order)) do order[tostring(h)] = i end
  table.sort(names, function(a, b)
    local oa, ob = order[a.name], order[b.name]
    if oa and ob and oa ~= ob then return oa < ob end
    return a.first < b.first
  end)
  local list = {}
  for i, h in ipairs(names) do
    list[i] = h.name
    for _, x in ipairs(h.rs) do if num(x) and x >= 0 and x < n and x % 1 == 0 and not of[x + 1] then of[x + 1] = i end end
  end
  for k = 1, n do  -- ranks no host lists: one pseudo-host for them
    if not of[k] then
      if list[#list] ~= "(unknown)" then list[#list + 1] = "(unknown)" end
      of[k] = #list
    end
  end
  return list, of
end

-- Calls f(a, b, value) (0-based ranks: the value of a with b) for every value, in both
-- directions: a dense map holds both; a list of unordered pairs gives its value (or its
-- column col2, the other direction) to both.
local function each_value(m, n, f)
  if type(m.v) == "table" then
    for i = 1, n do
      local row = m.v[i]
      if type(row) == "table" then
        for j = 1, n do
          local c = i ~= j and (num(row[j]) or num(row[tostring(j)]))
          if c then f(i - 1, j - 1, c) end
        end
      end
    end
  else
    local col, col2 = m.col or 3, m.col2
    for _, p in ipairs(T(m.pairs)) do
      if type(p) == "table" and num(p[1]) and num(p[2]) and p[1] >= 0 and p[2] >= 0 and p[1] < n and p[2] < n then
        local x = num(p[col])
        local y = col2 and num(p[col2]) or x
        if x then f(p[1], p[2], x) end
        if y then f(p[2], p[1], y) end
      end
    end
  end
end

local med = require("cs.stats").median_inplace  -- of lists of our own: reordered

-- The values of each pair of host groups (cell, keyed (group a - 1) * ng + group b) and, with
-- o.details, per rank its values with ranks of its own host and of others and its worst partner.
local function host_values(m, n, o, of, per, ng)
  local function grp(hi) return floor((hi - 1) / per) + 1 end
  local cell, rank_in, rank_out, worst, partner = {}, {}, {}, {}, {}
  local higher, details = o.higher, o.details
  each_value(m, n, function(a, b, x)
    local ha, hb = of[a + 1], of[b + 1]
    local k = (grp(ha) - 1) * ng + grp(hb)
    local c = cell[k]
    if not c then c = {}; cell[k] = c end
    c[#c + 1] = x
    if details then
      local t = ha == hb and rank_in or rank_out
      local l = t[a]
      if not l then l = {}; t[a] = l end
      l[#l + 1] = x
      local w = worst[a]
      if not w or (higher and x < w) or (not higher and x > w) then worst[a], partner[a] = x, b end
    end
  end)
  return { cell = cell, rank_in = rank_in, rank_out = rank_out, worst = worst, partner = partner }
end

-- The heat map of the host groups' medians (medv, by cell; vals: them sorted) and its note.
local function hostmap_svg(o, id, ng, per, medv, vals, label)
  local lo, hi = vals[1], vals[#vals]
  local good = against_median(vals[floor((#vals + 1) / 2)], o.higher)
  local C = math.max(3, math.min(40, floor(640 / ng)))
  local ML, MT = 44, 34
  local W, H = math.max(ML + C * ng + 10, ML + 250), MT + C * ng + 62
  local target = per == 1 and "hd-" or "hg-"
  local out = { fmt('<svg class="heatmap hostmap" width="%d" height="%d" viewBox="0 0 %d %d" role="img">', W, H, W, H) }
  out[#out + 1] = fmt('<defs><linearGradient id="%s">', id)
  for k = 0, 4 do out[#out + 1] = fmt('<stop offset="%d%%" stop-color="%s"/>', k * 25, color(k / 4)) end
  out[#out + 1] = "</linearGradient></defs>"
  out[#out + 1] = fmt('<text x="%d" y="12" class="axis">%s (click a row: its detail)</text>', ML, esc(per == 1 and "host" or fmt("host groups of %d", per)))
  local lstep = ceil(16 / C)
  for gi = 1, ng do
    if (gi - 1) % lstep == 0 then
      out[#out + 1] = fmt('<text x="%.1f" y="%d" text-anchor="middle" class="tick">%d</text><text x="%d" y="%.1f" text-anchor="end" class="tick">%d</text>',
        ML + C * (gi - 0.5), MT - 6, gi - 1, ML - 6, MT + C * (gi - 0.5) + 4, gi - 1)
    end
    out[#out + 1] = fmt('<a class="hrow" href="#%s%d">', target, gi - 1)
    for gj = 1, ng do
      local v = medv[(gi - 1) * ng + gj]
      if v then
        local tip = o.titles and fmt("<title>%s | %s: %s %s</title>", esc(label(gi)), esc(label(gj)), esc(fnum(v)), esc(o.unit)) or ""
        out[#out + 1] = fmt('<rect class="hcell" x="%d" y="%d" width="%d" height="%d" fill="%s">%s</rect>', ML + C * (gj - 1),
          MT + C * (gi - 1), C, C, color(good(v)), tip)
      end
    end
    out[#out + 1] = "</a>"
  end
  local ly = MT + C * ng + 18
  out[#out + 1] = fmt('<rect x="%d" y="%d" width="200" height="12" fill="url(#%s)" stroke="#999"/>', ML, ly, id)
  out[#out + 1] = fmt('<text x="%d" y="%d" class="tick">%gx worse</text><text x="%d" y="%d" text-anchor="end" class="tick">median %s</text>',
    ML, ly + 26, OFF_RED, ML + 200, ly + 26, esc(fnum(vals[floor((#vals + 1) / 2)])))
  out[#out + 1] = fmt('<text x="%d" y="%d" text-anchor="middle" class="tick">%s, %s is better; cell: median over the hosts\' pairs</text>',
    ML + 100, ly + 40, esc(o.unit), o.higher and "higher" or "lower")
  out[#out + 1] = "</svg>"
  local body = concat(out) .. fmt('<p class="note">%d %s x %d: min %s, median %s, max %s %s</p>', ng,
    per == 1 and "hosts" or "host groups", ng, esc(fnum(lo)), esc(fnum(vals[floor((#vals + 1) / 2)])), esc(fnum(hi)), esc(o.unit))
  return body
end

-- Per host: its ranks' medians and worst partner; hosts ordered worst first in a summary.
local function host_details(o, n, names, of, per, ng, hv, label)
  local nh = #names
  local rank_in, rank_out, worst, partner = hv.rank_in, hv.rank_out, hv.worst, hv.partner
  local members = {}
  for k = 1, n do local h = of[k]; members[h] = members[h] or {}; table.insert(members[h], k - 1) end
  local hrow = {}
  for hi = 1, nh do
    local outl = {}
    for _, rk in ipairs(members[hi] or {}) do for _, x in ipairs(rank_out[rk] or {}) do outl[#outl + 1] = x end end
    hrow[hi] = med(outl)
  end
  local ref = {}
  for hi = 1, nh do if hrow[hi] then ref[#ref + 1] = hrow[hi] end end
  local fleet = med(ref)
  local function score(v) return v and fleet and fleet > 0 and (o.higher and fleet / v or v / fleet) or nil end
  local function hlink(hi) return fmt('<a href="#hd-%d">%s</a>', hi - 1, esc(names[hi])) end
  local d = { '<div class="details">' }
  local rank_sorted = {}
  for hi = 1, nh do if hrow[hi] then rank_sorted[#rank_sorted + 1] = hi end end
  table.sort(rank_sorted, function(x, y) return score(hrow[x]) > score(hrow[y]) end)
  d[#d + 1] = "<h4>Hosts, worst first (score: how much worse than the fleet's median with other hosts)</h4>"
    .. '<table class="grid"><tr><th>host</th><th>ranks</th><th>median with other hosts</th><th>score</th></tr>'
  for i = 1, math.min(10, #rank_sorted) do
    local hi = rank_sorted[i]
    d[#d + 1] = fmt("<tr><td>%s</td><td>%d</td><td>%s</td><td>%.2f</td></tr>", hlink(hi), #(members[hi] or {}), esc(fnum(hrow[hi])),
      score(hrow[hi]))
  end
  d[#d + 1] = "</table>"
  if per > 1 then
    for g = 1, ng do
      d[#d + 1] = fmt('<div class="hostd" id="hg-%d"><h4>%s</h4><table class="grid"><tr><th>host</th><th>ranks</th><th>median with other hosts</th><th>score</th></tr>',
        g - 1, esc(label(g)))
      for hi = (g - 1) * per + 1, math.min(nh, g * per) do
        d[#d + 1] = fmt("<tr><td>%s</td><td>%d</td><td>%s</td><td>%s</td></tr>", hlink(hi), #(members[hi] or {}),
          hrow[hi] and esc(fnum(hrow[hi])) or "", score(hrow[hi]) and fmt("%.2f", score(hrow[hi])) or "")
      end
      d[#d + 1] = "</table></div>"
    end
  end
  for hi = 1, nh do
    d[#d + 1] = fmt('<div class="hostd" id="hd-%d"><h4>host %s: %d rank(s), median %s %s with other hosts (score %s)</h4>'
      .. '<table class="grid"><tr><th>rank</th><th>median, same host</th><th>median, other hosts</th><th>worst partner</th><th>its value</th></tr>',
      hi - 1, esc(names[hi]), #(members[hi] or {}), hrow[hi] and esc(fnum(hrow[hi])) or "-", esc(o.unit),
      score(hrow[hi]) and fmt("%.2f", score(hrow[hi])) or "-")
    for _, rk in ipairs(members[hi] or {}) do
      local w, p = worst[rk], partner[rk]
      d[#d + 1] = fmt("<tr><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>", rk,
        rank_in[rk] and esc(fnum(med(rank_in[rk]))) or "", rank_out[rk] and esc(fnum(med(rank_out[rk]))) or "",
        w and fmt("%d (%s)", p, hlink(of[p + 1])) or "", w and esc(fnum(w)) or "")
    end
    d[#d + 1] = "</table></div>"
  end
  d[#d + 1] = "</div>"
  return concat(d)
end

local function hostmap(m, n, o, id, names, of)
  local nh = #names
  local per = math.max(1, ceil(nh / HOST_MAP_MAX))  -- hosts per group
  local ng = ceil(nh / per)
  local hv = host_values(m, n, o, of, per, ng)
  local vals, medv = {}, {}
  for k, c in pairs(hv.cell) do medv[k] = med(c); vals[#vals + 1] = medv[k] end
  if #vals == 0 then return "" end
  table.sort(vals)
  local function label(g)
    if per == 1 then return names[g] end
    local last = math.min(nh, g * per)
    return names[(g - 1) * per + 1] .. " .. " .. names[last]
  end
  local body = hostmap_svg(o, id, ng, per, medv, vals, label)
  if not o.details then return body end
  return body .. host_details(o, n, names, of, per, ng, hv, label)
end

local BW_FIELDS = { "bw_gbps", "busbw", "bw_GBps", "gbps", "latency_us", "min_us", "p50_us", "time_us", "us" }
local function matrix(r)
  local m, maps = T(r.matrix), {}
  local n = floor(num(m.n) or #T(m.values))
  if m.layout == "pairs" and type(m.pairs) == "table" and n > 0 then
    -- Sparse (a sampled plan, or too many ranks for n x n lists): {a, b, a->b, b->a, latency}.
    local what, unit = tostring(str(m.metric) or "value"), tostring(str(m.unit) or "")
    local lower = what:find("lat") or what:find("time") or unit == "us"
    maps[1] = { pairs = m.pairs, col = 3, col2 = 4, n = n, o = { what = what, unit = unit, higher = not lower, rows = "rank", cols = "rank" } }
    maps[2] = { pairs = m.pairs, col = 5, n = n, o = { what = "latency", unit = "us", higher = false, rows = "rank", cols = "rank" } }
  elseif type(m.values) == "table" and n > 0 then
    local what = tostring(str(m.metric) or "value")
    local unit = tostring(str(m.unit) or "")
    local lower = what:find("lat") or what:find("time") or unit == "us"
    local rows = m.rows == "sender" and "sender" or "row"
    maps[1] = { v = m.values, n = n, o = { what = what, unit = unit, higher = not lower, rows = rows .. " rank",
      cols = (rows == "sender" and "receiver" or "column") .. " rank" } }
    if type(m.latency_us) == "table" then
      maps[2] = { v = m.latency_us, n = n, o = { what = "latency", unit = "us", higher = false, rows = "rank", cols = "rank" } }
    end
  else
    local prs, field = {}, nil
    for _, x in ipairs(T(r.results)) do
      local ok = type(x) == "table" and x.kind == "pair" and num(x.a) and num(x.b)
      if ok and x.a % 1 == 0 and x.b % 1 == 0 and x.a >= 0 and x.b >= 0 then prs[#prs + 1] = x end
    end
    for _, f in ipairs(BW_FIELDS) do if prs[1] and num(prs[1][f]) then field = f break end end
    if not field then return nil end
    n = num(T(r.run).ranks) or 0
    for _, x in ipairs(prs) do n = math.max(n, x.a + 1, x.b + 1) end
    if n > RANK_MAP_MAX then
      local list = {}
      for _, x in ipairs(prs) do if num(x[field]) then list[#list + 1] = { x.a, x.b, x[field] } end end
      local higher = field:find("bw") or field:find("gbps")
      maps[1] = { pairs = list, col = 3, n = n, o = { what = field, unit = higher and "GB/s" or "us", higher = higher, rows = "rank a", cols = "rank b" } }
      prs = {}
    end
    local v, explicit = {}, {}
    for i = 1, n do v[i], explicit[i] = {}, {} end
    for _, x in ipairs(prs) do
      if num(x[field]) then v[x.a + 1][x.b + 1], explicit[x.a + 1][x.b + 1] = x[field], true end
    end
    for _, x in ipairs(prs) do  -- unordered pairs fill both directions
      if num(x[field]) and not explicit[x.b + 1][x.a + 1] then v[x.b + 1][x.a + 1] = x[field] end
    end
    local higher = field:find("bw") or field:find("gbps")
    if not maps[1] then
      maps[1] = { v = v, n = n, o = { what = field, unit = higher and "GB/s" or "us", higher = higher, rows = "rank a", cols = "rank b" } }
    end
  end
  local out = {}
  if #maps == 0 then return nil end
  if n > RANK_MAP_MAX or not maps[1].v then
    local names, of = host_map(r, n)
    for i, h in ipairs(maps) do
      h.o.titles, h.o.details = i == 1, i == 1  -- the first map's cells carry their values and the host details
      out[#out + 1] = "<div><h3>" .. esc(h.o.what .. (h.o.unit ~= "" and " (" .. h.o.unit .. ")" or "")) .. "</h3>"
        .. hostmap(h, h.n, h.o, "hmgrad" .. i, names, of) .. "</div>"
    end
    local plural = require("cs.text").plural
    return section("matrix", "Rank x rank matrix", fmt('<p class="note">%s on %s: host x host maps (a rank x rank map would be %d cells); '
      .. "click a host's row for its ranks; every value is in report.json</p>", plural(n, "rank"), plural(#names, "host"), n * n)
      .. concat(out, "\n"))
  end
  for i, h in ipairs(maps) do
    out[#out + 1] = "<div><h3>" .. esc(h.o.what .. (h.o.unit ~= "" and " (" .. h.o.unit .. ")" or "")) .. "</h3>"
      .. heatmap(h.v, h.n, h.o, "hmgrad" .. i, i == 1 and marks_of(r) or nil) .. "</div>"
  end
  return section("matrix", "Rank x rank matrix", '<p class="note">each cell\'s value is in its tooltip</p><div class="maps">' .. concat(out, "\n") .. "</div>")
end


M.matrix = matrix
return M
