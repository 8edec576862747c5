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

-- The partner of `rank` in `round`, or nil when it sits this round out.
function M.partner(round, rank)
  for _, p in ipairs(round) do
    if p[1] == rank then return p[2] end
    if p[2] == rank then return p[1] end
  end
  return nil
end

return M
