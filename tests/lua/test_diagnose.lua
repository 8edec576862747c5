-- LuaUnit tests of stdlib/cs/pairs.lua (round-robin pair schedules) and stdlib/cs/diagnose.lua
-- (stragglers, localize) on synthetic data: the detection logic of the chaos self-tests
-- (recipes/chaos_delay.lua, recipes/chaos_slow.lua) without any communication.
-- Run: commscript --backend self --trusted tests/lua/test_diagnose.lua
local cs = require "commscript"
local lu = require "luaunit"

local recipe = cs.recipe {
  name = "test_diagnose",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.pairs and cs.diagnose",
}

local TRIALS = 200

local function error_of(f, ...)
  local ok, err = pcall(f, ...)
  lu.assertFalse(ok, "expected an error, got none")
  return tostring(err)
end

-- A seeded generator of our own (a 31-bit LCG), so that the noisy trials are the same on every
-- LuaJIT build: uniform(lo, hi) in [lo, hi).
local function rng(seed)
  local x = seed
  return function(lo, hi)
    x = (x * 1103515245 + 12345) % 2147483648
    return lo + (hi - lo) * (x / 2147483648)
  end
end

local function ranks_of(list)
  local out = {}
  for i, s in ipairs(list) do out[i] = s.rank end
  return out
end

---------------------------------------------------------------------------- cs.pairs

TestRoundRobin = {}

function TestRoundRobin:test_every_pair_once_disjoint_rounds()
  for n = 2, 9 do
    local rounds = cs.pairs.round_robin(n)
    lu.assertEquals(#rounds, n % 2 == 0 and n - 1 or n, "rounds for n = " .. n)
    local seen, total = {}, 0
    local idle = {}
    for ri, round in ipairs(rounds) do
      lu.assertEquals(#round, math.floor(n / 2), ("n = %d round %d: pairs"):format(n, ri))
      local busy = {}
      for _, p in ipairs(round) do
        local a, b = p[1], p[2]
        lu.assertEquals(#p, 2)
        lu.assertTrue(a >= 0 and b < n and a < b, ("n = %d: bad pair {%s, %s}"):format(n, tostring(a), tostring(b)))
        lu.assertEquals(a % 1, 0)
        lu.assertEquals(b % 1, 0)
        lu.assertNil(busy[a], ("n = %d round %d: rank %d twice"):format(n, ri, a))
        lu.assertNil(busy[b], ("n = %d round %d: rank %d twice"):format(n, ri, b))
        busy[a], busy[b] = true, true
        local key = a * n + b
        lu.assertNil(seen[key], ("n = %d: pair {%d, %d} scheduled twice"):format(n, a, b))
        seen[key] = true
        total = total + 1
      end
      for r = 0, n - 1 do
        if not busy[r] then idle[#idle + 1] = r end
      end
    end
    lu.assertEquals(total, n * (n - 1) / 2, "pairs for n = " .. n)
    for a = 0, n - 1 do
      for b = a + 1, n - 1 do lu.assertTrue(seen[a * n + b], ("n = %d: pair {%d, %d} missing"):format(n, a, b)) end
    end
    -- Even n: nobody sits out. Odd n: one rank per round, each rank exactly once.
    if n % 2 == 0 then
      lu.assertEquals(idle, {})
    else
      table.sort(idle)
      local all = {}
      for r = 0, n - 1 do all[#all + 1] = r end
      lu.assertEquals(idle, all, "idle ranks for n = " .. n)
    end
  end
end

function TestRoundRobin:test_small_counts()
  lu.assertEquals(cs.pairs.round_robin(2), { { { 0, 1 } } })
  -- One rank: one round with nothing in it (n rounds for odd n), no pair.
  local r1 = cs.pairs.round_robin(1)
  lu.assertEquals(#r1, 1)
  lu.assertEquals(r1[1], {})
end

function TestRoundRobin:test_deterministic()
  lu.assertEquals(cs.pairs.round_robin(8), cs.pairs.round_robin(8))
  lu.assertEquals(cs.pairs.round_robin(7), cs.pairs.round_robin(7))
end

function TestRoundRobin:test_bad_counts()
  for _, bad in ipairs { 0, -2, 2.5, "4" } do
    lu.assertStrContains(error_of(cs.pairs.round_robin, bad), "round_robin: a positive integer rank count expected")
  end
  lu.assertStrContains(error_of(cs.pairs.round_robin), "round_robin: a positive integer rank count expected")
end

function TestRoundRobin:test_partner()
  for n = 2, 9 do
    for ri, round in ipairs(cs.pairs.round_robin(n)) do
      local idle = 0
      for r = 0, n - 1 do
        local p = cs.pairs.partner(round, r)
        if p == nil then
          idle = idle + 1
        else
          lu.assertNotEquals(p, r)
          lu.assertTrue(p >= 0 and p < n)
          lu.assertEquals(cs.pairs.partner(round, p), r, ("n = %d round %d: partner of %d"):format(n, ri, p))
          -- the pair is in the round, smaller rank first
          local found = false
          for _, q in ipairs(round) do
            found = found or (q[1] == math.min(r, p) and q[2] == math.max(r, p))
          end
          lu.assertTrue(found)
        end
      end
      lu.assertEquals(idle, n % 2, ("n = %d round %d: idle ranks"):format(n, ri))
      lu.assertNil(cs.pairs.partner(round, n), "a rank outside the job has no partner")
    end
  end
  lu.assertEquals(cs.pairs.partner({ { 0, 3 }, { 1, 2 } }, 3), 0)
  lu.assertEquals(cs.pairs.partner({ { 0, 3 }, { 1, 2 } }, 1), 2)
  lu.assertNil(cs.pairs.partner({}, 0))
end

---------------------------------------------------------------------------- cs.diagnose.stragglers

TestStragglers = {}

-- The late rank waits the least: its time in the collective is the smallest.
local function late_times(n, late, base, late_value)
  local t = {}
  for r = 0, n - 1 do t[r + 1] = r == late and late_value or base end
  return t
end

function TestStragglers:test_one_late_rank_named()
  for _, n in ipairs { 3, 4, 8 } do
    for late = 0, n - 1 do
      local s = cs.diagnose.stragglers(late_times(n, late, 20000, 150))
      lu.assertEquals(ranks_of(s), { late }, ("n = %d, late rank %d"):format(n, late))
      lu.assertAlmostEquals(s[1].lateness, 19850, 1e-9)
      lu.assertAlmostEquals(s[1].score, 19850 / 20000, 1e-12)
    end
  end
end

-- The shape chaos_delay sees: rank 3 arrives 20 ms late, the others wait ~20 ms for it.
function TestStragglers:test_chaos_delay_shape()
  local s = cs.diagnose.stragglers { 20243.4, 20243.2, 20245.7, 138.6 }
  lu.assertEquals(ranks_of(s), { 3 })
  lu.assertTrue(s[1].lateness > 20000 and s[1].lateness < 20110, tostring(s[1].lateness))
end

function TestStragglers:test_late_rank_under_noise()
  local u = rng(12345)
  for _, n in ipairs { 4, 8 } do
    for trial = 1, TRIALS do
      local late = trial % n
      local t = {}
      for r = 0, n - 1 do
        t[r + 1] = 20000 * u(0.9, 1.1)
        if r == late then t[r + 1] = 200 * u(0.9, 1.1) end
      end
      lu.assertEquals(ranks_of(cs.diagnose.stragglers(t)), { late }, ("n = %d trial %d"):format(n, trial))
    end
  end
end

function TestStragglers:test_healthy_noise_never_named()
  local u = rng(4242)
  for _, n in ipairs { 3, 4, 8 } do
    for trial = 1, TRIALS do
      local t = {}
      for r = 1, n do t[r] = 1000 * u(0.9, 1.1) end
      lu.assertEquals(cs.diagnose.stragglers(t), {}, ("n = %d trial %d: %s"):format(n, trial, table.concat(t, ", ")))
    end
  end
end

function TestStragglers:test_equal_times()
  lu.assertEquals(cs.diagnose.stragglers { 50, 50, 50, 50 }, {})
  lu.assertEquals(cs.diagnose.stragglers { 0, 0, 0 }, {})
end

function TestStragglers:test_fewer_than_three_ranks()
  lu.assertEquals(cs.diagnose.stragglers {}, {})
  lu.assertEquals(cs.diagnose.stragglers { 100 }, {})
  lu.assertEquals(cs.diagnose.stragglers { 20000, 1 }, {})
  lu.assertEquals(cs.diagnose.stragglers { 1, 20000 }, {})
end

function TestStragglers:test_two_late_ranks_most_late_first()
  local s = cs.diagnose.stragglers { 1000, 1000, 500, 1000, 100, 1000, 1000, 1000 }
  lu.assertEquals(ranks_of(s), { 4, 2 })
  lu.assertTrue(s[1].lateness > s[2].lateness)
end

function TestStragglers:test_thresholds()
  -- 20 % early: under the default rel = 0.3, over rel = 0.1.
  local t = { 1000, 1000, 1000, 800 }
  lu.assertEquals(cs.diagnose.stragglers(t), {})
  lu.assertEquals(ranks_of(cs.diagnose.stragglers(t, { rel = 0.1 })), { 3 })
  -- The MAD guard: the others spread widely, so a moderately early rank is not singled out.
  local spread = { 1000, 1600, 400, 500 }
  lu.assertEquals(cs.diagnose.stragglers(spread), {})
end

---------------------------------------------------------------------------- cs.diagnose.localize

TestLocalize = {}

-- Every unordered pair of n ranks (in round-robin order), value f(a, b).
local function matrix(n, f)
  local out = {}
  for _, round in ipairs(cs.pairs.round_robin(n)) do
    for _, p in ipairs(round) do out[#out + 1] = { p[1], p[2], f(p[1], p[2]) } end
  end
  lu.assertEquals(#out, n * (n - 1) / 2)
  return out
end

local function link_list(loc)
  local out = {}
  for i, p in ipairs(loc.pairs) do out[i] = { p.a, p.b } end
  return out
end

-- The two sets of thresholds in use: the defaults, and chaos_slow's.
local OPTS = { {}, { factor = 1.5, link_factor = 3 } }

function TestLocalize:test_one_bad_node()
  for _, n in ipairs { 4, 8 } do
    for bad = 0, n - 1 do
      for _, opts in ipairs(OPTS) do
        local loc = cs.diagnose.localize(n, matrix(n, function(a, b) return (a == bad or b == bad) and 400 or 100 end),
          opts)
        lu.assertEquals(ranks_of(loc.ranks), { bad }, ("n = %d, bad rank %d"):format(n, bad))
        lu.assertEquals(link_list(loc), {}, ("n = %d, bad rank %d: no links"):format(n, bad))
        lu.assertAlmostEquals(loc.ranks[1].score, 4, 1e-12)
        lu.assertEquals(loc.ranks[1].median, 400)
        lu.assertEquals(loc.fleet_median, 100)
        lu.assertEquals(#loc.scores, n)
        for r = 0, n - 1 do lu.assertAlmostEquals(loc.scores[r + 1], r == bad and 4 or 1, 1e-12) end
      end
    end
  end
end

function TestLocalize:test_one_bad_link()
  for _, n in ipairs { 4, 8 } do
    for _, link in ipairs(matrix(n, function() return 0 end)) do
      local x, y = link[1], link[2]
      for _, opts in ipairs(OPTS) do
        local loc = cs.diagnose.localize(n, matrix(n, function(a, b) return (a == x and b == y) and 500 or 100 end),
          opts)
        lu.assertEquals(ranks_of(loc.ranks), {}, ("n = %d, bad link %d-%d: no ranks"):format(n, x, y))
        lu.assertEquals(link_list(loc), { { x, y } }, ("n = %d, bad link %d-%d"):format(n, x, y))
        lu.assertEquals(loc.pairs[1].value, 500)
        lu.assertAlmostEquals(loc.pairs[1].score, 5, 1e-12)
      end
    end
  end
end

function TestLocalize:test_healthy_noise_names_nothing()
  local u = rng(777)
  for _, n in ipairs { 4, 8 } do
    for trial = 1, TRIALS do
      local m = matrix(n, function() return 100 * u(0.8, 1.2) end)
      for _, opts in ipairs(OPTS) do
        local loc = cs.diagnose.localize(n, m, opts)
        lu.assertEquals(ranks_of(loc.ranks), {}, ("n = %d trial %d: ranks"):format(n, trial))
        lu.assertEquals(link_list(loc), {}, ("n = %d trial %d: links"):format(n, trial))
      end
    end
  end
end

function TestLocalize:test_bad_node_under_noise()
  local u = rng(99)
  for _, n in ipairs { 4, 8 } do
    for trial = 1, TRIALS do
      local bad = trial % n
      local m = matrix(n, function(a, b) return ((a == bad or b == bad) and 4 or 1) * 100 * u(0.8, 1.2) end)
      for _, opts in ipairs(OPTS) do
        local loc = cs.diagnose.localize(n, m, opts)
        lu.assertEquals(ranks_of(loc.ranks), { bad }, ("n = %d trial %d: ranks"):format(n, trial))
        lu.assertEquals(link_list(loc), {}, ("n = %d trial %d: links"):format(n, trial))
      end
    end
  end
end

function TestLocalize:test_bad_link_under_noise()
  local u = rng(31337)
  for _, n in ipairs { 4, 8 } do
    local links = matrix(n, function() return 0 end)
    for trial = 1, TRIALS do
      local l = links[trial % #links + 1]
      local m = matrix(n, function(a, b) return ((a == l[1] and b == l[2]) and 5 or 1) * 100 * u(0.8, 1.2) end)
      for _, opts in ipairs(OPTS) do
        local loc = cs.diagnose.localize(n, m, opts)
        lu.assertEquals(ranks_of(loc.ranks), {}, ("n = %d trial %d: ranks"):format(n, trial))
        lu.assertEquals(link_list(loc), { { l[1], l[2] } }, ("n = %d trial %d: links"):format(n, trial))
      end
    end
  end
end

function TestLocalize:test_nothing_measured()
  local loc = cs.diagnose.localize(4, {})
  lu.assertEquals(loc.ranks, {})
  lu.assertEquals(loc.pairs, {})
  lu.assertNil(loc.fleet_median)
  local zero = cs.diagnose.localize(4, matrix(4, function() return 0 end))
  lu.assertEquals(zero.ranks, {})
  lu.assertEquals(zero.pairs, {})
end

function TestLocalize:test_median()
  lu.assertNil(cs.diagnose.median {})
  lu.assertEquals(cs.diagnose.median { 3, 1, 2 }, 2)
  lu.assertEquals(cs.diagnose.median { 4, 1, 3, 2 }, 2.5)
  local l = { 5, 1, 4 }
  cs.diagnose.median(l)
  lu.assertEquals(l, { 5, 1, 4 }, "the input is not sorted in place")
end

TestStragglerVote = {}

-- Four ranks; rank 3 arrives late (waits the least) in the measurements listed in `late`.
local function votes(n, late)
  local v = cs.diagnose.straggler_vote { op = "allreduce" }
  for i = 1, n do v:add(late[i] and { 100, 101, 99, 10 } or { 100, 101, 99, 100 }) end
  return v:result()
end

function TestStragglerVote:test_two_thirds_of_the_measurements_decide()
  local s = votes(4, { true, true, true, false })
  lu.assertEquals(#s, 1)
  lu.assertEquals(s[1].rank, 3)
  lu.assertEquals(s[1].sizes, "3/4")
  lu.assertEquals(s[1].op, "allreduce")
  lu.assertEquals(s[1].lateness, 90)   -- the others' median 100 minus its 10
  lu.assertEquals(s[1].median, 99.5)   -- the median of {100, 101, 99, 10}
  lu.assertAlmostEquals(s[1].score, 90 / 99.5, 1e-12)
  -- 2 of 3 is two thirds: flagged; 2 of 4 is not
  lu.assertEquals(#votes(3, { true, false, true }), 1)
  lu.assertEquals(#votes(4, { true, false, true, false }), 0)
  -- 6 of 9 (two thirds exactly, no rounding up to 7)
  lu.assertEquals(#votes(9, { true, true, true, true, true, true }), 1)
  lu.assertEquals(#votes(9, { true, true, true, true, true }), 0)
end

function TestStragglerVote:test_fewer_than_three_measurements_vote_nothing()
  lu.assertEquals(votes(2, { true, true }), {})
  lu.assertEquals(votes(0, {}), {})
end

-- The O(n log n) stragglers() against the definition (each rank's others, their median and
-- median absolute deviation, from scratch), on noisy lists with ties, late and early ranks.
local function stragglers_by_definition(times)
  local median = cs.stats.median
  local out = {}
  if #times < 3 then return out end
  for i, t in ipairs(times) do
    local others = {}
    for j, u in ipairs(times) do if j ~= i then others[#others + 1] = u end end
    local om = median(others)
    local dev = {}
    for k, u in ipairs(others) do dev[k] = math.abs(u - om) end
    local lateness = om - t
    if lateness > 0.3 * om and lateness > 5 * median(dev) then out[#out + 1] = { rank = i - 1, lateness = lateness } end
  end
  table.sort(out, function(a, b) return a.lateness > b.lateness end)
  return out
end

function TestStragglers:test_same_as_the_definition()
  local u = rng(777)
  local named = 0
  for trial = 1, 600 do
    local n = 3 + trial % 37
    local t = {}
    for i = 1, n do
      local k = u(0, 1)
      t[i] = k < 0.1 and math.floor(u(0, 3)) * 100 or (k < 0.25 and 10 or 1000 * u(0.9, 1.1))
    end
    if trial % 2 == 0 then t[1 + math.floor(u(0, n))] = 5 end
    local want, got = stragglers_by_definition(t), cs.diagnose.stragglers(t)
    lu.assertEquals(#got, #want, table.concat(t, ", "))
    for k = 1, #want do
      lu.assertEquals(got[k].rank, want[k].rank)
      lu.assertEquals(got[k].lateness, want[k].lateness)
    end
    named = named + #want
  end
  lu.assertTrue(named > 50, "the trials name some ranks: " .. named)
end

-- 8192 ranks in well under a second (the definition takes minutes there).
function TestStragglers:test_8192_ranks_fast()
  local u = rng(99)
  local t = {}
  for i = 1, 8192 do t[i] = 1000 * u(0.95, 1.05) end
  t[4001] = 100
  local t0 = cs.now()
  lu.assertEquals(ranks_of(cs.diagnose.stragglers(t)), { 4000 })
  lu.assertTrue(cs.now() - t0 < 2, ("%.2f s"):format(cs.now() - t0))
end

---------------------------------------------------------------------------- cs.diagnose.localise

TestLocalise = {}

-- 4 hosts x 4 ranks, every pair measured; host 2 slow, rank 5 slow, link 0-12 slow. The
-- re-test is the model without noise; it records what it was asked.
local function four_hosts(plant)
  local hosts, values = {}, {}
  for r = 0, 15 do hosts[r + 1] = "h" .. math.floor(r / 4) end
  local function model(a, b)
    local f = hosts[a + 1] == hosts[b + 1] and 20 or 100
    if plant.host and (hosts[a + 1] == plant.host or hosts[b + 1] == plant.host) then f = f * 3 end
    if plant.rank and (a == plant.rank or b == plant.rank) then f = f * 3 end
    if plant.link and ((a == plant.link[1] and b == plant.link[2]) or (a == plant.link[2] and b == plant.link[1])) then f = f * 6 end
    return f
  end
  local u = rng(5)
  for a = 0, 15 do for b = a + 1, 15 do values[#values + 1] = { a, b, model(a, b) * u(1, 1.1) } end end
  return hosts, values, model
end

function TestLocalise:test_names_the_planted_host_rank_and_link()
  local hosts, values, model = four_hosts { host = "h2", rank = 5, link = { 0, 12 } }
  local asked = {}
  local loc = cs.diagnose.localise(values, hosts, {}, function(a, b) asked[#asked + 1] = { a, b }; return model(a, b) end)
  lu.assertEquals(#loc.hosts, 1)
  lu.assertEquals(loc.hosts[1].host, "h2")
  lu.assertEquals(ranks_of(loc.ranks), { 5 })
  lu.assertEquals(#loc.links, 1)
  lu.assertEquals({ loc.links[1].a, loc.links[1].b }, { 0, 12 })
  -- re-tests: the two references, one per suspect (host, rank, link): O(suspects), not O(pairs)
  lu.assertEquals(#asked, 5)
end

function TestLocalise:test_healthy_names_nobody_and_retests_nothing()
  local hosts, values, model = four_hosts {}
  local asked = 0
  local loc = cs.diagnose.localise(values, hosts, {}, function(a, b) asked = asked + 1; return model(a, b) end)
  lu.assertEquals({ #loc.hosts, #loc.ranks, #loc.links, asked }, { 0, 0, 0, 0 })
end

function TestLocalise:test_a_suspect_fine_alone_is_not_named()
  local hosts, values = four_hosts { rank = 9 }
  local loc = cs.diagnose.localise(values, hosts, {}, function(a, b) return hosts[a + 1] == hosts[b + 1] and 20 or 100 end)
  lu.assertEquals(loc.suspects.ranks, 1)
  lu.assertEquals(#loc.ranks, 0)
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestRoundRobin", TestRoundRobin },
    { "TestStragglers", TestStragglers },
    { "TestLocalize", TestLocalize },
    { "TestStragglerVote", TestStragglerVote },
    { "TestLocalise", TestLocalise },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
