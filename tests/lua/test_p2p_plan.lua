-- LuaUnit tests of the pattern plans of stdlib/cs/p2p.lua (full_plan, sampled_plan, host_plan,
-- plan_rounds): pure functions, checked at the scales the recipes cannot run here (up to 1024
-- ranks on 128 hosts): rounds are disjoint pairs, the full plan covers every pair in n-1
-- rounds, the sampled plan every intra-host pair and every host pair in (ranks per host - 1)
-- + (hosts - 1) / (ranks per host) rounds (on rails).
-- Run: commscript --backend self --trusted tests/lua/test_p2p_plan.lua
local cs = require "commscript"
local lu = require "luaunit"

local recipe = cs.recipe {
  name = "test_p2p_plan",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.p2p's pattern plans",
}

-- rank_hosts for h hosts of l ranks each (rank r on host floor(r / l)), or a list of sizes.
local function hosts_of(h, l)
  local out = {}
  local sizes = type(h) == "table" and h or nil
  if sizes then
    for i, n in ipairs(sizes) do for _ = 1, n do out[#out + 1] = "h" .. i end end
  else
    for r = 0, h * l - 1 do out[r + 1] = "h" .. (math.floor(r / l) + 1) end
  end
  return out
end

-- Checks that every round is a set of disjoint pairs {a < b} of valid ranks; returns the set of
-- pairs covered ("a,b" -> count).
local function check_rounds(rounds, n)
  local seen = {}
  for i, round in ipairs(rounds) do
    local busy = {}
    for _, p in ipairs(round) do
      lu.assertTrue(p[1] < p[2], ("round %d: pair %d,%d not ordered"):format(i, p[1], p[2]))
      lu.assertTrue(p[1] >= 0 and p[2] < n, ("round %d: pair %d,%d out of range"):format(i, p[1], p[2]))
      lu.assertNil(busy[p[1]], ("round %d: rank %d twice"):format(i, p[1]))
      lu.assertNil(busy[p[2]], ("round %d: rank %d twice"):format(i, p[2]))
      busy[p[1]], busy[p[2]] = true, true
      local k = p[1] .. "," .. p[2]
      seen[k] = (seen[k] or 0) + 1
    end
  end
  return seen
end

TestPlans = {}

function TestPlans:test_full_plan_covers_every_pair_in_n_minus_1_rounds()
  for _, n in ipairs { 2, 3, 4, 7, 8, 64 } do
    local rounds = cs.p2p.full_plan(n)
    lu.assertEquals(#rounds, n % 2 == 0 and n - 1 or n, "n=" .. n)
    local seen = check_rounds(rounds, n)
    local count = 0
    for _, c in pairs(seen) do
      lu.assertEquals(c, 1)
      count = count + 1
    end
    lu.assertEquals(count, n * (n - 1) / 2, "n=" .. n)
  end
end

-- One round of the round robin alone (cs.pairs.round_robin_round: what cs.p2p.matrix and
-- first_round take, one round at a time) is that round of the whole plan, and rounds_of its
-- count: building every round is n^2/2 pairs on every rank (768 MB at 4096 ranks, 3 GB at 8192).
function TestPlans:test_one_round_of_the_round_robin_is_the_plans()
  for _, n in ipairs { 1, 2, 3, 4, 5, 8, 9, 16, 31, 64 } do
    local all = cs.pairs.round_robin(n)
    lu.assertEquals(cs.pairs.rounds_of(n), #all, "n=" .. n)
    for r = 1, #all do lu.assertEquals(cs.pairs.round_robin_round(n, r), all[r], ("n=%d round %d"):format(n, r)) end
  end
  local r = cs.pairs.round_robin_round(16384, 7)  -- O(n): 8192 disjoint pairs
  lu.assertEquals(#r, 8192)
  check_rounds({ r }, 16384)
  lu.assertEquals(cs.pairs.rounds_of(16384), 16383)
  lu.assertEquals(cs.p2p.plan_rounds(hosts_of(2048, 8), 1), { full = 16383, intra = 7, inter = 256, sampled = 263, hosts = 256, rails = 8 })
end

-- every intra-host pair exactly once, every host pair at least once per cycle
local function check_sampled(h, l, cycles)
  local rh = hosts_of(h, l)
  local n = #rh
  local rounds = cs.p2p.sampled_plan(rh, { cycles = cycles })
  local seen = check_rounds(rounds, n)
  local intra_rounds = l >= 2 and (l % 2 == 0 and l - 1 or l) or 0
  -- the host rounds on l rails (l >= 2): l of them side by side
  local inter_rounds = h >= 2 and math.ceil((h % 2 == 0 and h - 1 or h) / math.max(l, 1)) or 0
  lu.assertEquals(#rounds, intra_rounds + inter_rounds * cycles, ("h=%d l=%d"):format(h, l))
  local c = cs.p2p.plan_rounds(rh, cycles)
  lu.assertEquals(c.sampled, #rounds)
  lu.assertEquals(c.full, n % 2 == 0 and n - 1 or n)
  lu.assertEquals(c.hosts, inter_rounds)
  local host_pairs = {}
  for k in pairs(seen) do
    local a, b = k:match("(%d+),(%d+)")
    a, b = tonumber(a), tonumber(b)
    local ha, hb = rh[a + 1], rh[b + 1]
    if ha == hb then
      lu.assertEquals(seen[k], 1, "intra pair " .. k)
    else
      local hk = ha < hb and ha .. "|" .. hb or hb .. "|" .. ha
      host_pairs[hk] = true
    end
  end
  -- every intra-host pair
  for r = 0, n - 1 do
    for q = r + 1, n - 1 do
      if rh[r + 1] == rh[q + 1] then lu.assertNotNil(seen[r .. "," .. q], "intra pair missing " .. r .. "," .. q) end
    end
  end
  local count = 0
  for _ in pairs(host_pairs) do count = count + 1 end
  lu.assertEquals(count, h * (h - 1) / 2, ("host pairs, h=%d l=%d"):format(h, l))
  return rounds
end

function TestPlans:test_sampled_plan_small()
  check_sampled(4, 2, 1)
  check_sampled(8, 2, 1)
  check_sampled(3, 3, 2)
  check_sampled(5, 1, 1)
end

function TestPlans:test_sampled_plan_1024_ranks_128_hosts()
  local rounds = check_sampled(128, 8, 1)
  lu.assertEquals(#rounds, 7 + 16)  -- against 1023 for every pair (127 host rounds on 8 rails)
end

-- Rails: local rank k meets local rank k of the other host; a cycle covers every host pair
-- exactly once in ceil((h-1)/R) rounds; R cycles pair every rank with its rail on every other
-- host exactly once. At 4096 ranks on 512 hosts: 64 rounds a cycle, against 511 without rails.
function TestPlans:test_rails_cover_every_host_pair_once_a_cycle()
  for _, hl in ipairs { { 64, 8 }, { 8, 2 }, { 7, 3 }, { 5, 4 } } do
    local h, l = hl[1], hl[2]
    local rh = hosts_of(h, l)
    local host_rounds = h % 2 == 0 and h - 1 or h
    local rounds = cs.p2p.sampled_plan(rh, { intra = false, cycles = l })
    lu.assertEquals(#rounds, l * math.ceil(host_rounds / l), ("h=%d l=%d"):format(h, l))
    local seen = check_rounds(rounds, #rh)
    local per_cycle = math.ceil(host_rounds / l)
    for c = 0, l - 1 do
      local hp, count = {}, 0
      for i = c * per_cycle + 1, (c + 1) * per_cycle do
        for _, p in ipairs(rounds[i]) do
          lu.assertEquals(p[1] % l, p[2] % l, "a pair off its rail")
          local k = rh[p[1] + 1] .. "|" .. rh[p[2] + 1]
          lu.assertNil(hp[k], ("cycle %d: host pair %s twice"):format(c, k))
          hp[k], count = true, count + 1
        end
      end
      lu.assertEquals(count, h * (h - 1) / 2, ("cycle %d: every host pair, h=%d l=%d"):format(c, h, l))
    end
    local pairs_seen = 0
    for _, n in pairs(seen) do lu.assertEquals(n, 1); pairs_seen = pairs_seen + 1 end
    lu.assertEquals(pairs_seen, l * h * (h - 1) / 2)  -- every rank with its rail on every other host
    lu.assertEquals(cs.p2p.plan_rounds(rh, 1).hosts, per_cycle)
    lu.assertEquals(#cs.p2p.host_plan(rh), per_cycle)
  end
  lu.assertEquals(cs.p2p.plan_rounds(hosts_of(512, 8), 1).sampled, 7 + 64)
  -- without rails (or one rank on some host): one host round per round, h-1 of them a cycle
  lu.assertEquals(#cs.p2p.sampled_plan(hosts_of(8, 2), { intra = false, rails = false }), 7)
  lu.assertEquals(#cs.p2p.sampled_plan(hosts_of({ 2, 1, 2, 2 }), { intra = false }), 3)
end

-- The cycles a budget allows: light rounds at half a full round, after the intra-host rounds,
-- at most 8 x the rails' cycles; 0 when not one cycle fits (the host plan).
function TestPlans:test_sampled_cycles_fit_the_time_left()
  local rh = hosts_of(512, 8)  -- 7 intra rounds, 64 host rounds a cycle
  lu.assertEquals(cs.p2p.sampled_cycles(rh, 35, 1.0), 0)        -- 70 light rounds: 7 + 63
  lu.assertEquals(cs.p2p.sampled_cycles(rh, 35.5, 1.0), 1)      -- 71
  lu.assertEquals(cs.p2p.sampled_cycles(rh, 0.5 * (7 + 3 * 64), 1.0), 3)
  lu.assertEquals(cs.p2p.sampled_cycles(rh, 1e6, 1.0), 64)
  lu.assertEquals(cs.p2p.sampled_cycles(hosts_of(1, 8), 100, 1.0), 0)
end

function TestPlans:test_uneven_hosts()
  local rh = hosts_of({ 3, 1, 2 })
  local rounds = cs.p2p.sampled_plan(rh)
  local seen = check_rounds(rounds, #rh)
  -- host pairs (h1,h2), (h1,h3), (h2,h3) all covered
  local hp = {}
  for k in pairs(seen) do
    local a, b = k:match("(%d+),(%d+)")
    local ha, hb = rh[tonumber(a) + 1], rh[tonumber(b) + 1]
    if ha ~= hb then hp[ha < hb and ha .. hb or hb .. ha] = true end
  end
  lu.assertEquals(hp, { h1h2 = true, h1h3 = true, h2h3 = true })
end

-- inter_first: the same pairs, but the first cycle of host rounds comes before the intra-host
-- rounds, so that a plan cut short has measured every host with every other (the host verdicts'
-- coverage, cs.diagnose.localise) before it spends rounds inside hosts.
function TestPlans:test_sampled_plan_inter_first_covers_hosts_first()
  for _, hl in ipairs { { 8, 2 }, { 4, 2 }, { 5, 3 } } do
    local h, l = hl[1], hl[2]
    local rh = hosts_of(h, l)
    local plain = cs.p2p.sampled_plan(rh, { cycles = 2 })
    local first = cs.p2p.sampled_plan(rh, { cycles = 2, inter_first = true })
    lu.assertEquals(#first, #plain)
    lu.assertEquals(check_rounds(first, #rh), check_rounds(plain, #rh))
    local inter_rounds = math.ceil((h % 2 == 0 and h - 1 or h) / l)
    local hp, count = {}, 0
    for i = 1, inter_rounds do
      for _, p in ipairs(first[i]) do
        local ha, hb = rh[p[1] + 1], rh[p[2] + 1]
        lu.assertNotEquals(ha, hb, ("round %d: an intra-host pair before the host rounds"):format(i))
        local k = ha < hb and ha .. "|" .. hb or hb .. "|" .. ha
        if not hp[k] then hp[k] = true; count = count + 1 end
      end
    end
    lu.assertEquals(count, h * (h - 1) / 2)
  end
end

function TestPlans:test_host_plan_has_no_intra_pairs()
  local rh = hosts_of(8, 2)
  local rounds = cs.p2p.host_plan(rh)
  lu.assertEquals(#rounds, 4)  -- 7 host rounds on 2 rails
  for _, round in ipairs(rounds) do
    for _, p in ipairs(round) do lu.assertNotEquals(rh[p[1] + 1], rh[p[2] + 1]) end
  end
  lu.assertEquals(cs.p2p.host_plan(hosts_of(1, 4)), {})
end

-- The sparse matrix section (a sampled plan) keeps 4 significant digits (report.json at 16 384
-- ranks: 17-digit doubles were 150 MB of it); the dense one keeps the values as measured.
function TestPlans:test_sparse_matrix_report_rounds_its_values()
  local bw, lat = {}, {}
  for a = 1, 8 do bw[a], lat[a] = {}, {} end
  bw[1][2], bw[2][1], lat[1][2], lat[2][1] = 2.6190476190476191, 12345.678, 5.0000001, 5.0000001
  bw[3][4], bw[4][3] = 0.000123456, 1 / 3
  local m = { n = 8, bw = bw, lat = lat, pairs = { { 0, 1, 100 }, { 2, 3, 100 } } }
  lu.assertTrue(cs.p2p.sparse(m))
  local rep = cs.p2p.matrix_report(m, 262144)
  lu.assertEquals(rep.layout, "pairs")
  lu.assertEquals(rep.pairs[1], { 0, 1, 2.619, 12350, 5 })
  lu.assertEquals({ rep.pairs[2][3], rep.pairs[2][4] }, { 0.0001235, 0.3333 })
  lu.assertEquals(rep.pairs[2][5], cs.json.null)
  local dense = { n = 2, bw = { {}, {} }, lat = { {}, {} } }
  dense.bw[1][2], dense.bw[2][1] = 1 / 3, 1 / 3
  lu.assertFalse(cs.p2p.sparse(dense))
  lu.assertEquals(cs.p2p.matrix_report(dense, 8).values[1][2], 1 / 3)
end

-- A pattern's later passes run its rounds in another order, the same on every rank (a flap with
-- about a pass's period met the same partner each pass: truth harness seed 100, a flapping h2 of
-- 4 x 2 ranks slow only with h3 in 3 passes, like a link): the same rounds, each once.
-- A re-test streams the way the evidence found an end slow; the matrix's slower way otherwise,
-- or when the ends disagree (truth harness seed 418: h2's ranks 4 and 5 receiving at 88 Mbit,
-- pair 4-11 0.0082 GB/s 4 -> 11 and 0.0105 back: by the matrix it streamed out of h2, 1.02x).
function TestPlans:test_a_retest_streams_the_way_the_evidence_found_slow()
  local bw = {}
  for a = 1, 12 do bw[a] = {} for b = 1, 12 do if a ~= b then bw[a][b] = 0.04 end end end
  bw[5][12], bw[12][5] = 0.0082, 0.0105
  lu.assertEquals(cs.p2p.retest_from(bw, nil, 4, 11), 4, "the matrix's slower way")
  lu.assertEquals(cs.p2p.retest_from(bw, { [4] = "receiving", [5] = "receiving" }, 4, 11), 11, "into the receiving end")
  lu.assertEquals(cs.p2p.retest_from(bw, { [11] = "receiving" }, 4, 11), 4, "into 11: from 4")
  lu.assertEquals(cs.p2p.retest_from(bw, { [11] = "sending" }, 4, 11), 11)
  lu.assertEquals(cs.p2p.retest_from(bw, { [4] = "receiving", [11] = "sending" }, 4, 11), 11, "the ends agree")
  lu.assertEquals(cs.p2p.retest_from(bw, { [4] = "receiving", [11] = "receiving" }, 4, 11), 4, "they disagree: the matrix")
  lu.assertEquals(cs.p2p.retest_from({}, { [4] = "receiving" }, 4, 11), 11, "no matrix: the evidence")
  lu.assertNil(cs.p2p.retest_from({}, {}, 4, 11), "neither: both ways")
end

function TestPlans:test_later_passes_reorder_the_rounds()
  local rounds = cs.p2p.full_plan(8)
  lu.assertEquals(cs.pairs.reordered(rounds, 1), rounds)
  local key = function(list)
    local out = {}
    for i, r in ipairs(list) do out[i] = r[1][1] .. "-" .. r[1][2] end
    return table.concat(out, " ")
  end
  local seen = { [key(rounds)] = true }
  for k = 2, 4 do
    local again = cs.pairs.reordered(rounds, k)
    lu.assertEquals(key(again), key(cs.pairs.reordered(rounds, k)), "the same order for the same pass")
    lu.assertEquals(#again, #rounds)
    local sorted, orig = {}, {}
    for i = 1, #rounds do sorted[i], orig[i] = key({ again[i] }), key({ rounds[i] }) end
    table.sort(sorted); table.sort(orig)
    lu.assertEquals(sorted, orig, "the same rounds, each once")
    lu.assertNil(seen[key(again)], "pass " .. k .. " in an order of its own")
    seen[key(again)] = true
  end
end

-- A merged matrix keeps each pass's own values in the report (the time series an intermittent
-- fault shows in), dense like values; one pass, or more ranks than PASSES_MAX_RANKS: none.
function TestPlans:test_matrix_report_keeps_each_pass()
  local p1, p2 = { { nil, 0.5 }, { 0.25 } }, { { nil, 0.125 }, { 0.75 } }
  local c1 = { clock = { { 10.5, 11.0 } }, ran = { { { 0, 1 } } } }
  local c2 = { clock = { { 11.25, 13.0 } }, ran = { { { 0, 1 } } } }
  local m = cs.p2p.merge_passes({ { n = 2, bw = p1, lat = { {}, {} }, pairs = { { 0, 1, 1 } }, plan = {}, clock = c1.clock, ran = c1.ran },
                                  { n = 2, bw = p2, lat = { {}, {} }, pairs = { { 0, 1, 1 } }, plan = {}, clock = c2.clock, ran = c2.ran } }, 8)
  local rep = cs.p2p.matrix_report(m, 8)
  -- each pass's rounds: start from the first round's, seconds, pairs (cs.evidence's wall share)
  lu.assertEquals(rep.clocks, { origin = 10.5, passes = { { { 0, 0.5, { 0, 1 } } }, { { 0.75, 1.75, { 0, 1 } } } } })
  lu.assertEquals(#rep.passes, 2)
  lu.assertEquals(rep.passes[1], { { cs.json.null, 0.5 }, { 0.25, cs.json.null } })
  lu.assertEquals(rep.passes[2], { { cs.json.null, 0.125 }, { 0.75, cs.json.null } })
  local one = { n = 2, bw = p1, lat = { {}, {} }, passes = { p1 } }
  lu.assertNil(cs.p2p.matrix_report(one, 8).passes)
  local saved = cs.p2p.PASSES_MAX_RANKS
  cs.p2p.PASSES_MAX_RANKS = 1
  local ok, big = pcall(cs.p2p.matrix_report, m, 8)
  cs.p2p.PASSES_MAX_RANKS = saved
  lu.assertTrue(ok)
  lu.assertNil(big.passes)
end

-- the re-tests' clock in the report: times from the first re-test's start, up to 64 ranks
function TestPlans:test_retests_report_times_each_retest_from_the_first()
  local clock = { { 0, 5, 100.25, 0.5, 812.5 }, { 2, 7, 100.75, 1.25, false } }
  lu.assertEquals(cs.p2p.retests_report(clock, 8),
                  { origin = 100.25, retests = { { 0, 5, 0, 0.5, 812.5 }, { 2, 7, 0.5, 1.25, false } } })
  lu.assertNil(cs.p2p.retests_report(clock, cs.p2p.PASSES_MAX_RANKS + 1))
  lu.assertNil(cs.p2p.retests_report({}, 8))
  lu.assertNil(cs.p2p.retests_report(nil, 8))
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances { { "TestPlans", TestPlans } }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
