-- Pair schedules for point-to-point patterns.
local M = {}

-- Round-robin (circle method): n-1 rounds (n even; n rounds for odd n, one rank idle per round),
-- each a list of disjoint pairs {a, b} with a < b, together covering every unordered pair once.
-- Ranks are 0-based.
function M.round_robin(n)
  if type(n) ~= "number" or n < 1 or n % 1 ~= 0 then error("round_robin: a positive integer rank count expected", 2) end
  local m = n % 2 == 0 and n or n + 1  -- a phantom rank m-1 makes it even
  local ring = {}
  for i = 1, m - 1 do ring[i] = i end  -- rank 0 stays fixed, the others rotate
  local rounds = {}
  for r = 1, m - 1 do
    local round = {}
    local function add(a, b)
      if a < n and b < n then round[#round + 1] = a < b and { a, b } or { b, a } end
    end
    add(0, ring[1])
    for k = 2, m / 2 do add(ring[k], ring[m - k + 1]) end
    rounds[#rounds + 1] = round
    table.insert(ring, 1, table.remove(ring))  -- rotate
  end
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

return M
