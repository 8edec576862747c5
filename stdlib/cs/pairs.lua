-- Pair schedules for point-to-point patterns.
local M = {}

-- Round-robin (circle method): n-1 rounds (n even; n rounds for odd n, one rank idle per round),
-- each a list of disjoint pairs {a, b} with a < b, together covering every unordered pair once.
-- Ranks are 0-based. round_robin_round(n, r) is round r alone, in O(n): rank 0 stays fixed and
-- the others (1 .. m-1, m = n rounded up to even, a phantom rank m-1 when n is odd) turn one
-- place a round, so in round r the ring's place k holds ((k - r) mod (m-1)) + 1. Building every
-- round costs n^2/2 pairs: at 4096 ranks 768 MB and 1.1 s on each rank, at 8192 3 GB and 11 s
-- (a job's first round, its round count and its later rounds are taken one by one instead).
local function ordered(a, b) return a < b and { a, b } or { b, a } end

local function check_n(n)
  if type(n) ~= "number" or n < 1 or n % 1 ~= 0 then error("round_robin: a positive integer rank count expected", 3) end
end

function M.rounds_of(n) check_n(n); return n % 2 == 0 and n - 1 or n end

function M.round_robin_round(n, r)
  check_n(n)
  local m = n % 2 == 0 and n or n + 1
  local round = {}
  local function at(k) return (k - r) % (m - 1) + 1 end
  local function add(a, b)
    if a < n and b < n then round[#round + 1] = ordered(a, b) end
  end
  add(0, at(1))
  for k = 2, m / 2 do add(at(k), at(m - k + 1)) end
  return round
end

function M.round_robin(n)
  local rounds = {}
  for r = 1, M.rounds_of(n) do rounds[r] = M.round_robin_round(n, r) end
  return rounds
end

-- The same rounds in another order, the same for every rank that calls it with the same `k`
-- (1: as given; else a Fisher-Yates shuffle driven by Park and Miller's minimal standard
-- generator seeded by k: its products stay under 2^53, exact in a double). Passes of a pattern
-- in one order pair each host with the same partner at the same point of every pass: a link
-- flapping with about a pass's period then showed slow with one partner only, like a link.
function M.reordered(rounds, k)
  local out = {}
  for i, r in ipairs(rounds) do out[i] = r end
  if k == nil or k <= 1 then return out end
  local m = 2147483647
  local x = (k * 48271) % m
  if x == 0 then x = 1 end
  for i = #out, 2, -1 do
    x = 16807 * x % m
    local j = 1 + math.floor(x / m * i)
    out[i], out[j] = out[j], out[i]
  end
  return out
end

-- The partner of `rank` in `round`, or nil when it sits this round out.
function M.partner(round, rank)
  for _, p in ipairs(round) do
    if p[1] == rank then return p[2] end
    if p[2] == rank then return p[1] end
  end
  return nil
end

-- The pattern's plans (cs.p2p keeps their names; docs/lua-api.md, cs.p2p); rank_hosts[r + 1] is
-- rank r's host. Pure functions; a plan is a list of rounds, a round a list of disjoint pairs {a, b}:
--   full_plan(n)                   the round robin: every unordered pair, n-1 rounds (n odd: n)
--   sampled_plan(rank_hosts, opts) every intra-host pair (the hosts' round robins side by side:
--                                  max ranks per host - 1 rounds), then opts.cycles (default 1)
--                                  cycles of the hosts' round robin, each covering every host
--                                  pair: on R rails when every host has R >= 2 ranks (local rank
--                                  k with local rank k of the other host, R host rounds side by
--                                  side: ceil((h-1)/R) rounds a cycle, as a rail-optimised
--                                  fabric carries them), else h-1 rounds (h odd: h) pairing each
--                                  host pair's local rank k with local rank k+shift.
--                                  opts.rails = false: no rails;
--                                  opts.intra = false: the inter-host rounds only;
--                                  opts.per_host_pair = 1: one rank pair per host pair;
--                                  opts.inter_first: the first cycle of host rounds before the
--                                  intra-host rounds (a plan cut short has measured every host
--                                  with every other first: what a host verdict needs).
--   host_plan(rank_hosts)          one cycle of the inter-host rounds, one rank pair per host pair
--                                  (on rails: ceil((h-1)/R) rounds; without: h-1, one rank of each
--                                  host busy at once)
--   sampled_cycles(rank_hosts, left, round_s) the cycles that fit `left` seconds (0: none)
--   plan_rounds(rank_hosts, cycles) the rounds of each plan, and the rails

local rounds_of = M.rounds_of

function M.full_plan(n) return M.round_robin(n) end

-- The hosts in order of their first rank, and each host's ranks (ascending).
local function host_ranks(rank_hosts)
  local names, of = {}, {}
  for r, h in ipairs(rank_hosts) do
    if not of[h] then of[h] = {}; names[#names + 1] = h end
    table.insert(of[h], r - 1)
  end
  return names, of
end

-- The rails (ranks per host that carry the host rounds side by side): the fewest ranks any host
-- has, when that is 2 or more and opts.rails is not false; 1: no rails.
local function rails_of(names, of, opts)
  if opts.rails == false or #names < 2 then return 1 end
  local R = math.huge
  for _, h in ipairs(names) do R = math.min(R, #of[h]) end
  return R
end

-- One cycle of the hosts' round robin `hr` on R rails: round t's rail k (local rank k of every
-- host, paired with local rank k of the other host) carries host round t*R + (k+c) % R, so a
-- cycle covers every host pair once in ceil(#hr / R) rounds and cycle c moves each host round to
-- the next rail (R cycles: every local rank has met every other host).
local function rail_rounds(hr, names, of, R, c)
  local out = {}
  for t = 0, math.ceil(#hr / R) - 1 do
    local round = {}
    for k = 0, R - 1 do
      for _, hp in ipairs(hr[t * R + (k + c) % R + 1] or {}) do
        round[#round + 1] = ordered(of[names[hp[1] + 1]][k + 1], of[names[hp[2] + 1]][k + 1])
      end
    end
    out[#out + 1] = round
  end
  return out
end

-- One cycle c of the hosts' round robin `hr` without rails: each host pair's ranks paired local
-- rank k with local rank k + shift (per_host_pair = 1: one rank pair, its local rank rotating).
local function host_rounds(hr, names, of, c, per_host_pair)
  local out = {}
  for j, hround in ipairs(hr) do
    local round = {}
    for _, hp in ipairs(hround) do
      local A, B = of[names[hp[1] + 1]], of[names[hp[2] + 1]]
      local shift = (j - 1 + c) % #B
      local first = per_host_pair == 1 and (j - 1 + c) % #A or 0
      for k = first, math.min(first + (per_host_pair or #A), math.min(#A, #B)) - 1 do
        round[#round + 1] = ordered(A[k + 1], B[(k + shift) % #B + 1])
      end
    end
    out[#out + 1] = round
  end
  return out
end

function M.sampled_plan(rank_hosts, opts)
  opts = opts or {}
  local names, of = host_ranks(rank_hosts)
  local rounds = {}
  local function intra()
    if opts.intra == false then return end
    local per = {}
    local most = 0
    for _, h in ipairs(names) do
      if #of[h] >= 2 then
        per[h] = M.round_robin(#of[h])
        if #per[h] > most then most = #per[h] end
      end
    end
    for i = 1, most do
      local round = {}
      for _, h in ipairs(names) do
        for _, p in ipairs(per[h] and per[h][i] or {}) do round[#round + 1] = { of[h][p[1] + 1], of[h][p[2] + 1] } end
      end
      rounds[#rounds + 1] = round
    end
  end
  if not opts.inter_first then intra() end
  local R = rails_of(names, of, opts)
  if #names >= 2 then
    local hr = M.round_robin(#names)
    for c = 0, (opts.cycles or 1) - 1 do
      local cycle = R > 1 and rail_rounds(hr, names, of, R, c) or host_rounds(hr, names, of, c, opts.per_host_pair)
      for _, round in ipairs(cycle) do rounds[#rounds + 1] = round end
      if c == 0 and opts.inter_first then intra() end
    end
  elseif opts.inter_first then
    intra()
  end
  return rounds
end

function M.host_plan(rank_hosts) return M.sampled_plan(rank_hosts, { intra = false, per_host_pair = 1 }) end

-- The number of rounds of each plan for a job (no communication): what the report says and
-- what the budget is weighed against.
function M.plan_rounds(rank_hosts, cycles)
  local names, of = host_ranks(rank_hosts)
  local most = 0
  for _, h in ipairs(names) do if #of[h] >= 2 then most = math.max(most, rounds_of(#of[h])) end end
  local R = rails_of(names, of, {})
  local inter = #names >= 2 and math.ceil(rounds_of(#names) / R) or 0
  return { full = #rank_hosts >= 2 and rounds_of(#rank_hosts) or 0, intra = most, inter = inter,
           sampled = most + inter * (cycles or 1), hosts = inter, rails = R }
end

-- sampled_cycles(rank_hosts, left, round_s) -> how many cycles of the sampled plan (after its
-- intra-host rounds) fit `left` seconds when a full round takes round_s: the reduced plan's
-- rounds are light (about half a full one: no latency, no streams). At most 8 cycles' worth of
-- every host pair's rank pairs (8 x the rails); 0: not one (the host plan).
function M.sampled_cycles(rank_hosts, left, round_s)
  local c = M.plan_rounds(rank_hosts, 1)
  if c.inter == 0 or round_s <= 0 then return 0 end
  return math.max(0, math.min(math.floor((left / (round_s / 2) - c.intra) / c.inter), 8 * c.rails))
end

return M
