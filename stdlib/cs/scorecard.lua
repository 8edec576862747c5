-- The scorecard (docs/full_diag-and-scorecard.md): four parts, each 0-100, weighted into a total, banded.
-- Every part records its reference, the measured values it used and its formula, so a reader
-- can see why the total is what it is. Weights, targets and bands come from the config's
-- [scorecard] table (defaults below); the card says which were used.
--
-- compute(m, cfg) -> card
--   m.bandwidth = { busbw = GB/s achieved (large messages), reference = GB/s the path should
--                   give, source = "where the reference comes from", op =, bytes = }
--   m.latency   = { collective_us = small-message all-reduce time, collective_target_us =,
--                   p2p_us = (optional) point-to-point latency, p2p_target_us = }
--   m.balance   = { worst = worst rank's (or link's) bandwidth, median = the median's,
--                   spread = coefficient of variation of per-rank times (optional) }
--   m.stability = { cv = median iteration cv, p99_over_p50 =, operations =, errors =,
--                   timeouts =, wrong = }
--   Parts with no measurement are left out and the remaining weights are renormalised; a part
--   given as { left_out = "why" } (bandwidth with one rank: busbw is 0 by definition) is left out
--   the same way and listed in card.left_out with its reason, never scored 0.
--
-- check_config(cfg) -> raises bad input (exit 1) when [scorecard] is malformed: call it before
--   measuring, so that a typo costs no sweep.
-- inputs(ctx, m) -> the `m` of compute() from what full_diag measured (collective: every rank
--   calls it, with the same m). m.sweep = { op = { results, smallest size first } }, m.matrix
--   (cs.p2p.matrix, optional), m.cvs (the results' cvs), m.operations, m.wrong. The bandwidth
--   reference is the config's bandwidth_reference_gbps, else the baseline's all-reduce at the
--   largest size (busbw at its p50 time, as the regression rule compares), else on a GPU job
--   (m.gpu_path: cs.topo.gpu.reference's result, or { why = }) the GPU path: the measured
--   GPU->GPU copy rate within the NVML link facts' nominal bound, the NICs' line rate across
--   hosts; else on one host the host memory-copy bandwidth. One rank moves nothing: the part is
--   left out. Latency targets default to 10 us (collective) and 2 us (point-to-point) on one
--   host, 100 and 50 us across hosts.
local stats = require "cs.stats"
local M = {}

-- Default latency targets, us: shared memory on one host, a network across hosts.
M.LATENCY_TARGET_US = { one_host = 10, hosts = 100 }
M.P2P_LATENCY_TARGET_US = { one_host = 2, hosts = 50 }

M.defaults = {
  weights = { bandwidth = 0.30, latency = 0.25, balance = 0.25, stability = 0.20 },
  bands = { excellent = 85, good = 70 },
  bandwidth_good = 0.85,   -- utilisation that scores 100
  cv_limit = 0.5,          -- iteration cv at which stability's variation factor reaches 0
  error_rate_limit = 0.05, -- error/timeout rate at which stability's error factor reaches 0
}

local function clamp(x) return math.max(0, math.min(100, x)) end

-- The [scorecard] keys; any other (a typo: bandwith_reference_gbps) is refused, not ignored.
M.KEYS = { "weights", "bands", "bandwidth_good", "cv_limit", "error_rate_limit", "bandwidth_reference_gbps",
           "latency_target_us", "p2p_latency_target_us" }

local function merged(cfg)
  local known = {}
  for _, k in ipairs(M.KEYS) do known[k] = true end
  for k in pairs(cfg or {}) do
    if not known[k] then
      error(("scorecard: unknown key '%s' (known: %s)"):format(tostring(k), table.concat(M.KEYS, ", ")), 3)
    end
  end
  local c = {}
  for k, v in pairs(M.defaults) do c[k] = v end
  for k, v in pairs(cfg or {}) do c[k] = v end
  local w = {}
  for k, v in pairs(M.defaults.weights) do w[k] = v end
  for k, v in pairs((cfg or {}).weights or {}) do
    if M.defaults.weights[k] == nil then error(("scorecard: unknown weight '%s'"):format(k), 3) end
    if type(v) ~= "number" or v < 0 then error(("scorecard: weight %s must be a number >= 0"):format(k), 3) end
    w[k] = v
  end
  c.weights = w
  local b = { excellent = M.defaults.bands.excellent, good = M.defaults.bands.good }
  for k, v in pairs((cfg or {}).bands or {}) do
    if b[k] == nil then error(("scorecard: unknown band '%s' (excellent, good)"):format(k), 3) end
    if type(v) ~= "number" then error(("scorecard: band %s must be a number"):format(k), 3) end
    b[k] = v
  end
  c.bands = b
  return c
end

function M.band(total, bands)
  bands = bands or M.defaults.bands
  if total >= bands.excellent then return "excellent" end
  if total >= bands.good then return "good" end
  return "needs improvement"
end

local function bandwidth_part(b, c)
  if b and b.left_out then return nil end
  if not b or not b.busbw or not b.reference or b.reference <= 0 then return nil end
  local util = b.busbw / b.reference
  return {
    score = clamp(100 * util / c.bandwidth_good),
    reference = { busbw_gbps = b.reference, source = b.source, good_utilisation = c.bandwidth_good,
                  nominal_gbps = b.nominal, measured_gbps = b.measured_reference },
    measured = { busbw_gbps = b.busbw, utilisation = util, op = b.op, bytes = b.bytes },
    formula = ("min(100, 100 x (busbw %.3f / reference %.3f) / %.2f)"):format(b.busbw, b.reference, c.bandwidth_good),
  }
end

local function latency_part(l)
  if not l then return nil end
  local terms, parts = {}, {}
  if l.collective_us and l.collective_target_us then
    terms[#terms + 1] = clamp(100 * l.collective_target_us / math.max(l.collective_us, 1e-9))
    parts[#parts + 1] = ("100 x target %.2f / all-reduce %.2f us"):format(l.collective_target_us, l.collective_us)
  end
  if l.p2p_us and l.p2p_target_us then
    terms[#terms + 1] = clamp(100 * l.p2p_target_us / math.max(l.p2p_us, 1e-9))
    parts[#parts + 1] = ("100 x target %.2f / point-to-point %.2f us"):format(l.p2p_target_us, l.p2p_us)
  end
  if #terms == 0 then return nil end
  local sum = 0
  for _, t in ipairs(terms) do sum = sum + t end
  return {
    score = sum / #terms,
    reference = { collective_target_us = l.collective_target_us, p2p_target_us = l.p2p_target_us, source = l.source },
    measured = { collective_us = l.collective_us, p2p_us = l.p2p_us },
    formula = "mean of min(100, " .. table.concat(parts, "), min(100, ") .. ")",
  }
end

local function balance_part(b)
  if not b or not b.worst or not b.median or b.median <= 0 then return nil end
  local ratio = math.min(1, b.worst / b.median)
  local spread = b.spread or 0
  local score = clamp(100 * ratio * (1 - math.min(1, spread)))
  return {
    score = score,
    reference = { median = b.median, what = b.what },
    measured = { worst = b.worst, worst_is = b.worst_is, spread_cv = b.spread },
    formula = ("100 x min(1, worst %.3f / median %.3f) x (1 - min(1, per-rank spread %.3f))"):format(
      b.worst, b.median, spread),
  }
end

local function stability_part(s, c)
  if not s or not s.operations or s.operations <= 0 then return nil end
  local bad = (s.errors or 0) + (s.timeouts or 0) + (s.wrong or 0)
  local rate = bad / s.operations
  local variation = 1 - math.min(1, (s.cv or 0) / c.cv_limit)
  local reliability = 1 - math.min(1, rate / c.error_rate_limit)
  return {
    score = clamp(100 * variation * reliability),
    reference = { cv_limit = c.cv_limit, error_rate_limit = c.error_rate_limit },
    measured = { cv = s.cv, p99_over_p50 = s.p99_over_p50, operations = s.operations, errors = s.errors or 0,
                 timeouts = s.timeouts or 0, wrong = s.wrong or 0, error_rate = rate },
    formula = ("100 x (1 - min(1, cv %.3f / %.2f)) x (1 - min(1, error rate %.4f / %.2f))"):format(
      s.cv or 0, c.cv_limit, rate, c.error_rate_limit),
  }
end

function M.compute(m, cfg)
  local c = merged(cfg)
  local built = {
    bandwidth = bandwidth_part(m.bandwidth, c),
    latency = latency_part(m.latency),
    balance = balance_part(m.balance),
    stability = stability_part(m.stability, c),
  }
  local parts, wsum, total, left_out = {}, 0, 0, {}
  for _, name in ipairs({ "bandwidth", "latency", "balance", "stability" }) do
    local given = m[name]
    if type(given) == "table" and given.left_out and c.weights[name] > 0 then
      left_out[#left_out + 1] = { name = name, weight = c.weights[name], why = given.left_out }
    end
  end
  for _, name in ipairs({ "bandwidth", "latency", "balance", "stability" }) do
    local p = built[name]
    if p and c.weights[name] > 0 then
      p.name, p.weight = name, c.weights[name]
      wsum = wsum + p.weight
      parts[#parts + 1] = p
    end
  end
  for _, p in ipairs(parts) do
    p.effective_weight = p.weight / wsum
    total = total + p.score * p.effective_weight
  end
  if wsum == 0 then total = 0 end
  local terms = {}
  for _, p in ipairs(parts) do terms[#terms + 1] = ("%.1f x %.3f"):format(p.score, p.effective_weight) end
  return {
    total = total,
    band = M.band(total, c.bands),
    parts = parts,
    formula = #terms > 0 and (table.concat(terms, " + ") .. " (weights renormalised over the parts measured)") or "no part measured",
    left_out = left_out,
    weights = c.weights,
    bands = c.bands,
    config = cfg and next(cfg) and "config [scorecard]" or "defaults",
  }
end

-- One line per part plus the total, for the terminal.
function M.render(card)
  local lines = { ("score %.0f/100 (%s)"):format(card.total, card.band) }
  for _, p in ipairs(card.parts) do
    lines[#lines + 1] = ("  %-10s %5.1f  weight %.2f  %s"):format(p.name, p.score, p.weight, p.formula)
    if p.name == "bandwidth" and p.reference.source then
      lines[#lines + 1] = ("  %-10s        reference: %s"):format("", p.reference.source)
    end
  end
  for _, l in ipairs(card.left_out or {}) do
    lines[#lines + 1] = ("  %-10s  left out (weight %.2f re-spread over the others): %s"):format(l.name, l.weight, l.why)
  end
  return table.concat(lines, "\n")
end

function M.check_config(cfg)
  local ok, err = pcall(M.compute, {}, cfg or {})
  if not ok then
    require("commscript").raise(require("commscript").exit.bad_input, "[scorecard]: " .. tostring(err), 0)
  end
end

-- The bandwidth reference and where it comes from.
local function bandwidth_reference(ctx, cfg, big, gpu)
  if cfg.bandwidth_reference_gbps then
    return cfg.bandwidth_reference_gbps, "config [scorecard] bandwidth_reference_gbps"
  end
  local reference, source
  if type(ctx.baseline) == "table" and big then
    for _, r in ipairs(ctx.baseline.results or {}) do
      if r.op == "allreduce" and r.bytes == big.bytes and r.placement == "out-of-place" then
        reference = stats.busbw_at_p50(r)
        source = "baseline " .. tostring((ctx.baseline.run or {}).start) .. " (busbw at its p50 time)"
      end
    end
  end
  if not reference and gpu then
    if gpu.gbps then
      return gpu.gbps, gpu.source, gpu
    end
    return nil, nil, nil, "no reference for the GPU path: " .. tostring(gpu.why)
  end
  if not reference and ctx.nhosts == 1 then
    -- rank 0 alone measures, 16M x 3 (every rank copying 64M x 5 at once on shared cores took
    -- 10+ s at 4 ranks, 64M x 5 alone 3 s on a loaded 2-core VM)
    reference = ctx.comm:broadcast_value(ctx.rank == 0 and require("commscript").copy_bandwidth(16777216, 3), 0)
    source = "host memory-copy bandwidth (the ceiling of shared-memory transport)"
  end
  return reference, source
end

-- Per rank, the median bandwidth of its pairs; all pair latencies.
local function matrix_values(matrix, size)
  local lat_values, rank_bw = {}, {}
  if not matrix then return lat_values, rank_bw end
  -- Over the measured entries only (pairs(), not 1..size): a sampled plan at 8192 ranks
  -- measures about 1/16 of the n^2 cells.
  for a = 1, size do
    local row = {}
    for _, v in pairs(matrix.lat[a] or {}) do lat_values[#lat_values + 1] = v end
    for _, v in pairs(matrix.bw[a] or {}) do row[#row + 1] = v end
    rank_bw[a] = stats.median_inplace(row)
  end
  return lat_values, rank_bw
end

function M.inputs(ctx, m)
  local cfg = ctx.config.scorecard or {}
  local ar = m.sweep.allreduce or {}
  local big, small = ar[#ar], ar[1]
  local bw
  if ctx.size < 2 then
    bw = { left_out = "one rank: nothing moves between ranks, so busbw is 0 by definition ((n-1)/n = 0)" }
  else
    local reference, source, gpu, why = bandwidth_reference(ctx, cfg, big, m.gpu_path)
    if big and reference then
      bw = { busbw = big.busbw, reference = reference, source = source, op = "allreduce", bytes = big.bytes,
             nominal = gpu and gpu.nominal_gbps, measured_reference = gpu and gpu.measured_gbps }
    elseif why then
      bw = { left_out = why }
    end
  end
  local single = ctx.nhosts == 1
  local lat_target = cfg.latency_target_us or (single and M.LATENCY_TARGET_US.one_host or M.LATENCY_TARGET_US.hosts)
  local p2p_target = cfg.p2p_latency_target_us
    or (single and M.P2P_LATENCY_TARGET_US.one_host or M.P2P_LATENCY_TARGET_US.hosts)
  local lat_values, rank_bw = matrix_values(m.matrix, ctx.size)
  local worst, worst_is
  for a, v in ipairs(rank_bw) do
    if not worst or v < worst then worst, worst_is = v, "rank " .. (a - 1) end
  end
  return {
    bandwidth = bw,
    latency = small and {
      collective_us = small.p50_us, collective_target_us = lat_target,
      p2p_us = stats.median_inplace(lat_values), p2p_target_us = #lat_values > 0 and p2p_target or nil,
      source = cfg.latency_target_us and "config"
        or (single and "default for one host (shared memory)" or "default for several hosts") },
    balance = worst and { worst = worst, median = stats.median(rank_bw), worst_is = worst_is,
                          spread = big and stats.summary(big.rank_mean_us).cv,
                          what = "median bandwidth of each rank's pairs (GB/s)" },
    stability = { cv = stats.median(m.cvs), operations = m.operations, wrong = m.wrong, errors = 0, timeouts = 0 },
  }
end

return M
