-- The nccl-tests table (size count type redop root | time algbw busbw #wrong, out-of-place and
-- in-place), so a user can lay the two side by side, with three columns of the sampled pass per
-- half named as nccl-tests -I names its per-iteration columns: i_p50, i_p99 (us) and i_cv%.
-- time/algbw/busbw are the headline (whole-loop time / iters, averaged over ranks; see
-- docs/timing.md). Every column keeps its width for any value: like nccl-tests, precision
-- shrinks as values grow (time: 2 decimals below 100 us, 1 below 10000, then none), and a value
-- that would still overflow is written in exponent notation.
local M = {}
local unpack = table.unpack or unpack

-- Column widths of one half: time algbw busbw #wrong i_p50 i_p99 i_cv%.
local W = { 8, 7, 7, 6, 7, 7, 5 }
local HALF = ("%%%ds %%%ds %%%ds %%%ds %%%ds %%%ds %%%ds"):format(W[1], W[2], W[3], W[4], W[5], W[6], W[7])
local LEAD = "# %12s %12s %8s %6s %6s  "
local GAP = "   "

-- v written in at most `width` characters with at most `prec` decimals: fewer decimals first,
-- then exponent notation (mantissa digits dropped as needed). Right-aligned to `width`.
local function fit(v, width, prec)
  if v ~= v then return ("%" .. width .. "s"):format("nan") end
  for p = prec, 0, -1 do
    local s = ("%." .. p .. "f"):format(v)
    if #s <= width then return ("%" .. width .. "s"):format(s) end
  end
  for p = math.max(width - 6, 0), 0, -1 do
    local s = ("%." .. p .. "e"):format(v)
    if #s <= width then return ("%" .. width .. "s"):format(s) end
  end
  return ("%.0e"):format(v)  -- wider than the column: only for widths below 5
end
M.fit = fit

-- nccl-tests' precision for a time in us.
local function time_prec(us) return us >= 10000 and 0 or us >= 100 and 1 or 2 end

-- opts.inplace (default true): whether the table has an in-place half. When it does not, the
-- half is absent from every line, not blank.
function M.header(opts)
  local ip = not opts or opts.inplace ~= false
  local function line(lead, a, b)
    local s = LEAD:format(unpack(lead)) .. HALF:format(unpack(a))
    if ip then s = s .. GAP .. HALF:format(unpack(b)) end
    return (s:gsub("%s+$", ""))
  end
  local names = { "time", "algbw", "busbw", "#wrong", "i_p50", "i_p99", "i_cv%" }
  local units = { "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "" }
  -- The half titles are centred over their halves.
  local function title(t)
    local width = #HALF:format("", "", "", "", "", "", "")
    local left = math.floor((width - #t) / 2)
    return (" "):rep(left) .. t .. (" "):rep(width - #t - left)
  end
  local l1 = LEAD:format("", "", "", "", "") .. title("out-of-place") .. (ip and (GAP .. title("in-place")) or "")
  l1 = l1:gsub("%s+$", "")
  return table.concat({ l1, line({ "size", "count", "type", "redop", "root" }, names, names),
    line({ "(B)", "(elements)", "", "", "" }, units, units) }, "\n")
end

local function half(r)
  if not r then return HALF:format("", "", "", "", "", "", "") end
  local wrong = r.checked and fit(r.wrong, W[4], 0) or ("%" .. W[4] .. "s"):format("N/A")
  return table.concat({
    fit(r.time_us, W[1], time_prec(r.time_us)), fit(r.algbw, W[2], 2), fit(r.busbw, W[3], 2), wrong,
    fit(r.p50_us, W[5], time_prec(r.p50_us)), fit(r.p99_us, W[6], time_prec(r.p99_us)), fit(r.cv * 100, W[7], 1),
  }, " ")
end

local function int(v, width)
  if v >= 10 ^ width then return fit(v, width, 0) end
  return ("%" .. width .. "d"):format(v)
end

-- oop, ip: results of comm:bench. The in-place half is written only when `ip` is given; a row
-- with only `ip` keeps the out-of-place half blank so the in-place values stay in their columns.
function M.row(oop, ip)
  local r = oop or ip
  local s = ("  %s %s %8s %6s %6d  %s"):format(int(r.bytes, 12), int(r.count, 12), r.dtype, r.redop, r.root, half(oop))
  if ip then s = s .. GAP .. half(ip) end
  return (s:gsub("%s+$", ""))
end

-- wrong: total wrong elements; avg_busbw: mean busbw over every row (nccl-tests' definition)
function M.footer(wrong, avg_busbw)
  return ("# Out of bounds values : %d %s\n# Avg bus bandwidth    : %.4f\n#"):format(
    wrong, wrong == 0 and "OK" or "FAILED", avg_busbw)
end

return M
