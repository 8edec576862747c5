-- A seeded generator shared by the Lua tests (test_diagnose, test_evidence, test_watch): a 31-bit
-- LCG of our own, so that noisy trials are the same on every LuaJIT build. rng(seed) ->
-- uniform(lo, hi) in [lo, hi). Loaded with require "rng_testlib" (the tests put their own
-- directory on package.path; they run --trusted).
return function(seed)
  local x = seed
  return function(lo, hi)
    x = (x * 1103515245 + 12345) % 2147483648
    return lo + (hi - lo) * (x / 2147483648)
  end
end
