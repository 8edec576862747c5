-- cs.diagnose.partners: who measures with whom in a re-test. Good partners and reference pairs
-- from the trusted ranks (`order`, least suspect first), and the rescreen's rounds of disjoint
-- pairs with free references. Pure functions over plain tables: no communication.
local M = {}

-- reference_pair(order, rank_hosts, same_host) -> {i, j} | nil: the first pair (i < j, indices
--   into `order`, the least suspect ranks first) of two ranks on the same host (same_host) or on
--   different hosts. O(n), not a scan of all pairs.
function M.reference_pair(order, rank_hosts, same_host)
  if same_host then
    local first, best = {}, nil
    for j, r in ipairs(order) do
      local h = rank_hosts[r + 1]
      local i = first[h]
      if not i then first[h] = j
      elseif not best or i < best[1] then best = { i, j } end
    end
    return best
  end
  for i = 1, #order do
    for j = i + 1, #order do
      if rank_hosts[order[i] + 1] ~= rank_hosts[order[j] + 1] then return { i, j } end
    end
    return nil  -- every later rank shares order[i]'s host: no pair across hosts
  end
  return nil
end

-- good_partner(order, rank_hosts, r, want_other_host) -> rank | nil: the first rank of `order`
--   (least suspect first) other than r, on another host than r's (want_other_host) or on the same.
function M.good_partner(order, rank_hosts, r, want_other_host)
  for _, g in ipairs(order) do
    if g ~= r and (rank_hosts[g + 1] ~= rank_hosts[r + 1]) == want_other_host then return g end
  end
  return nil
end

-- Up to `count` reference pairs of good ranks (`order`, best first) on the same host or on
-- different hosts, using distinct ranks where there are enough. O(n).
local function reference_pairs(order, rank_hosts, same_host, count)
  local out, used = {}, {}
  for _ = 1, count do
    local rest = {}
    for _, r in ipairs(order) do if not used[r] then rest[#rest + 1] = r end end
    local p = M.reference_pair(rest, rank_hosts, same_host)
    if not p then break end
    local a, b = rest[p[1]], rest[p[2]]
    out[#out + 1] = { a, b }
    used[a], used[b] = true, true
  end
  if #out == 1 then  -- not enough ranks for two disjoint pairs: a second pair sharing one rank
    local a = out[1][1]
    for _, r in ipairs(order) do
      if r ~= a and r ~= out[1][2] and (rank_hosts[r + 1] == rank_hosts[a + 1]) == same_host then
        out[2] = { math.min(a, r), math.max(a, r) }
        break
      end
    end
  end
  return out
end

-- Good partners of rank r: the first of `order` on r's host (same = true), or on other hosts
-- than r's and than those in `avoid` (a set of hosts), `count` of them on distinct hosts.
local function partners(order, rank_hosts, r, same, count, avoid)
  local out, hosts = {}, {}
  local hr = rank_hosts[r + 1]
  for _, g in ipairs(order) do
    local hg = rank_hosts[g + 1]
    if g ~= r and (hg == hr) == same and not (avoid and avoid[hg]) and (same or not hosts[hg]) then
      out[#out + 1] = g
      hosts[hg] = true
      if #out >= count then break end
    end
  end
  return out
end

-- Rounds of disjoint pairs ({a, b} entries) covering `list`, first fit, in list order.
local function disjoint_rounds(list)
  local rounds, busy = {}, {}
  for _, p in ipairs(list) do
    local r = 1
    while busy[r] and (busy[r][p.a] or busy[r][p.b]) do r = r + 1 end
    if not busy[r] then busy[r], rounds[r] = {}, {} end
    busy[r][p.a], busy[r][p.b] = true, true
    table.insert(rounds[r], p)
  end
  return rounds, busy
end

-- Up to `count` reference pairs of each kind in `kinds` from the ranks of `pool` (best first)
-- that `busy` (a round's ranks) leaves free.
local function free_references(c, pool, busy, kinds, count)
  local out, used = {}, {}
  for k in pairs(kinds) do
    for _ = 1, count do
      local a, b
      for _, r in ipairs(pool) do
        if not busy[r] and not used[r] then
          if not a then a = r
          elseif (c.rank_hosts[r + 1] == c.rank_hosts[a + 1]) == (k == "intra") then b = r; break end
        end
      end
      if not b then break end
      used[a], used[b] = true, true
      out[#out + 1] = { a = math.min(a, b), b = math.max(a, b), ref = k }
    end
  end
  return out
end

M.reference_pairs, M.partners, M.disjoint_rounds, M.free_references = reference_pairs, partners, disjoint_rounds, free_references

return M
