-- The nccl-tests table (size count type redop root | time algbw busbw #wrong, out-of-place and
-- in-place) with p50/p99/cv columns, so a user can lay the two side by side.
local M = {}

local HALF = "%8s %7s %7s %6s %7s %7s %5s"

function M.header()
  local l1 = ("# %12s %12s %8s %6s %6s  " .. HALF .. "   " .. HALF):format(
    "", "", "", "", "", "", "out-of-place", "", "", "", "", "", "", "in-place", "", "", "", "", "")
  local l2 = ("# %12s %12s %8s %6s %6s  " .. HALF .. "   " .. HALF):format(
    "size", "count", "type", "redop", "root",
    "time", "algbw", "busbw", "#wrong", "p50", "p99", "cv%",
    "time", "algbw", "busbw", "#wrong", "p50", "p99", "cv%")
  local l3 = ("# %12s %12s %8s %6s %6s  " .. HALF .. "   " .. HALF):format(
    "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "",
    "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "")
  return table.concat({ l1, l2, l3 }, "\n")
end

local function half(r)
  if not r then return (HALF):format("", "", "", "", "", "", "") end
  local wrong = r.checked and ("%d"):format(r.wrong) or "N/A"
  return ("%8.2f %7.2f %7.2f %6s %7.2f %7.2f %5.1f"):format(
    r.time_us, r.algbw, r.busbw, wrong, r.p50_us, r.p99_us, r.cv * 100)
end

-- oop, ip: results of comm:bench (either may be nil)
function M.row(oop, ip)
  local r = oop or ip
  return ("  %12d %12d %8s %6s %6d  %s   %s"):format(r.bytes, r.count, r.dtype, r.redop, r.root, half(oop), half(ip))
end

-- wrong: total wrong elements; avg_busbw: mean busbw over every row (nccl-tests' definition)
function M.footer(wrong, avg_busbw)
  return ("# Out of bounds values : %d %s\n# Avg bus bandwidth    : %.4f\n#"):format(
    wrong, wrong == 0 and "OK" or "FAILED", avg_busbw)
end

return M
