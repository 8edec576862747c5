-- report.html sections of the elastic recipes: the drill's timeline (report.drill, from
-- recipes/elastic_drill.lua) and the backend comparison table (report.protocol_compare, from
-- recipes/protocol_compare.lua). Each returns nil when its part of the report is absent;
-- cs.html calls them with its own section() wrapper.
local M = {}

local fmt, concat = string.format, table.concat
local U = require "cs.html.util"
-- Sizes as the rest of the page and protocol_compare's own output write them (cs.html.util).
local esc, T, num, fsize = U.esc, U.T, U.num, U.fsize
local function f3(x) x = num(x); return x and fmt("%.3f", x) or "-" end
local function list(t)
  local out = {}
  for _, v in ipairs(T(t)) do out[#out + 1] = tostring(v) end
  return concat(out, ",")
end

local EVENTS = { drop = "#d73027", detected = "#e0a30b", revoked = "#4e79a7", working = "#1a9850" }

-- One drop's timeline as an SVG axis from 0 (the victim's SIGKILL, the start of the operation
-- that failed) to the working shrunk communicator; the detection threshold as a dashed line.
local function timeline_svg(d, max_t)
  local W, H, L, R = 680, 64, 50, 50
  local scale = (W - L - R) / max_t
  local out = { fmt('<svg width="%d" height="%d" role="img" aria-label="drill timeline">', W, H),
                fmt('<line x1="%d" y1="32" x2="%d" y2="32" stroke="#888"/>', L, W - R) }
  local thr = num(d.max_detect_s)
  if thr and thr <= max_t then
    local x = L + thr * scale
    out[#out + 1] = fmt('<line x1="%.1f" y1="12" x2="%.1f" y2="52" stroke="#d73027" stroke-dasharray="4,3"/>'
      .. '<text class="tick" x="%.1f" y="62" text-anchor="end">detect threshold %.2f s</text>', x, x, x, thr)
  elseif thr then
    out[#out + 1] = fmt('<text class="tick" x="%d" y="62" text-anchor="end">detect threshold %.2f s: beyond this axis'
      .. '</text>', W - R, thr)
  end
  for i, e in ipairs(T(d.timeline)) do
    local t = num(T(e).t)
    if t then
      local x = L + t * scale
      local y = i % 2 == 1 and 22 or 48
      out[#out + 1] = fmt('<circle cx="%.1f" cy="32" r="5" fill="%s"/><text class="tick" x="%.1f" y="%d" '
        .. 'text-anchor="middle">%s %.3f s</text>', x, EVENTS[e.event] or "#444", x, y - (i % 2 == 1 and 6 or 0),
        esc(e.event), t)
    end
  end
  out[#out + 1] = "</svg>"
  return concat(out)
end

function M.drill(r)
  local d = T(r.drill)
  if next(d) == nil then return nil end
  local drops = T(d.drops)
  if #drops == 0 then drops = { d } end
  local rows = { '<table class="grid"><tr><th>drop</th><th>victim</th><th>gone</th><th>survivors</th>'
    .. '<th>detect s</th><th>revoke s</th><th>working s (after detection)</th><th>busbw before GB/s</th>'
    .. '<th>busbw after GB/s</th><th>#wrong after</th></tr>' }
  local max_t = 0
  for i, x in ipairs(drops) do
    x = T(x)
    local detect_bad = num(x.detect_s) and num(d.max_detect_s) and x.detect_s > d.max_detect_s
    local work_bad = num(x.working_s) and num(d.max_recover_s) and x.working_s > d.max_recover_s
    rows[#rows + 1] = fmt('<tr><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td%s>%s</td><td>%s</td><td%s>%s</td>'
      .. '<td>%s</td><td>%s</td><td%s>%s</td></tr>', num(x.drop) or i, esc(x.victim), esc(list(x.gone)),
      esc(x.survivors), detect_bad and ' class="hot"' or "", f3(x.detect_s), f3(x.revoke_s),
      work_bad and ' class="hot"' or "", f3(x.working_s), f3(x.busbw_before), f3(x.busbw_after),
      (num(x.wrong_after) or 0) > 0 and ' class="hot"' or "", esc(x.wrong_after or "-"))
    for _, e in ipairs(T(x.timeline)) do
      local t = num(T(e).t)
      if t and t > max_t then max_t = t end
    end
  end
  rows[#rows + 1] = "</table>"
  -- The threshold is drawn when it is near the events; far beyond them it would squeeze them
  -- into a corner, so it is written instead.
  local thr = num(d.max_detect_s)
  if thr and thr > max_t and thr <= 3 * max_t then max_t = thr end
  max_t = max_t > 0 and max_t * 1.1 or 1
  local out = { concat(rows), fmt('<p class="note">thresholds: detection %s s, working communicator %s s after '
    .. 'detection; times are the slowest survivor\'s, from the start of the operation that failed</p>',
    f3(d.max_detect_s), f3(d.max_recover_s)) }
  for i, x in ipairs(drops) do
    x = T(x)
    out[#out + 1] = fmt("<h4>drop %d: rank %s</h4>", num(x.drop) or i, esc(x.victim))
    out[#out + 1] = timeline_svg({ timeline = x.timeline, max_detect_s = d.max_detect_s }, max_t)
  end
  return concat(out, "\n")
end

function M.protocols(r)
  local p = T(r.protocol_compare)
  if next(p) == nil then return nil end
  local backends = T(p.variants or p.backends)  -- variants: the flat backends, then hierarchical ones
  local out = { fmt('<p class="note">%s ranks, %s; time: whole loop / iterations, mean over ranks; the winner has '
    .. 'the lowest time</p>', esc(p.ranks or "?"), esc(p.dtype or "?")) }
  for _, s in ipairs(T(p.skipped)) do
    out[#out + 1] = fmt('<p class="note">%s not compared: %s</p>', esc(T(s).backend), esc(T(s).reason))
  end
  for _, tb in ipairs(T(p.tables)) do
    tb = T(tb)
    local h = { "<h3>" .. esc(tb.op) .. '</h3><table class="grid"><tr><th>size</th>' }
    for _, b in ipairs(backends) do h[#h + 1] = fmt("<th>%s time us</th><th>%s busbw GB/s</th>", esc(b), esc(b)) end
    h[#h + 1] = "<th>winner</th></tr>"
    for _, row in ipairs(T(tb.rows)) do
      row = T(row)
      h[#h + 1] = "<tr><td>" .. esc(fsize(row.bytes)) .. "</td>"
      for _, b in ipairs(backends) do
        local c = T(T(row.by)[b])
        local win = row.winner == b and ' style="font-weight:700;background:#e6f4ea"' or ""
        h[#h + 1] = fmt("<td%s>%s</td><td%s>%s</td>", win, num(c.time_us) and fmt("%.1f", c.time_us) or "-", win,
          f3(c.busbw))
      end
      h[#h + 1] = "<td>" .. esc(row.winner or "-") .. "</td></tr>"
    end
    h[#h + 1] = "</table>"
    local xs = {}
    for _, x in ipairs(T(tb.crossovers)) do
      x = T(x)
      xs[#xs + 1] = fmt("%s up to %s, %s from %s", esc(x.from), esc(fsize(x.below)), esc(x.to), esc(fsize(x.at)))
    end
    h[#h + 1] = fmt('<p class="note">crossovers: %s</p>', #xs > 0 and concat(xs, "; ") or "none (one winner at every size)")
    out[#out + 1] = concat(h)
  end
  return concat(out, "\n")
end

return M
