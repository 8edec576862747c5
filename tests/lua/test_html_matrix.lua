-- LuaUnit tests of report.html's matrix section (cs.html.matrix): cells coloured against the
-- fleet's median (not the range: one noisy pair must not turn a healthy fleet red), and the
-- rows and columns of what localisation named, found off or re-tested outlined on the same map.
-- Run: commscript --backend self --trusted tests/lua/test_html_matrix.lua
local cs = require "commscript"
local lu = require "luaunit"
local H = require "cs.html.matrix"

local recipe = cs.recipe {
  name = "test_html_matrix",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.html.matrix",
}

local GREEN, RED = "#1a9850", "#d73027"  -- the colour scale's ends

-- a dense n x n bandwidth matrix (GB/s, row = sender) of `v` with the given cells changed
local function report(n, v, cells, extra)
  local values = {}
  for a = 1, n do
    values[a] = {}
    for b = 1, n do values[a][b] = a ~= b and v or cs.json.null end
  end
  for _, c in ipairs(cells or {}) do values[c[1] + 1][c[2] + 1] = c[3] end
  local r = { matrix = { metric = "bandwidth", unit = "GB/s", n = n, rows = "sender", values = values } }
  for k, x in pairs(extra or {}) do r[k] = x end
  return r
end

local function fill_of(html, a, b)
  return html:match(('<rect class="cell"[^>]-fill="(#%%x+)"[^>]-><title>bandwidth %d %%-&gt; %d:'):format(a, b))
end

TestHtmlMatrix = {}

function TestHtmlMatrix:test_cells_are_coloured_against_the_median()
  -- one pair at 1.2x the others' time (within 1.25x): still green; one at 4x worse: red
  local html = H.matrix(report(6, 1.0, { { 0, 1, 1 / 1.2 }, { 2, 3, 0.25 } }))
  lu.assertEquals(fill_of(html, 0, 1), GREEN)
  lu.assertEquals(fill_of(html, 1, 0), GREEN)
  lu.assertEquals(fill_of(html, 2, 3), RED)
  -- better than the median is green too (higher is better for bandwidth)
  html = H.matrix(report(6, 1.0, { { 4, 5, 3.0 } }))
  lu.assertEquals(fill_of(html, 4, 5), GREEN)
  lu.assertStrContains(html, "median 1")
  -- 2x worse: between the ends (neither green nor red)
  html = H.matrix(report(6, 1.0, { { 1, 2, 0.5 } }))
  local c = fill_of(html, 1, 2)
  lu.assertNotEquals(c, GREEN)
  lu.assertNotEquals(c, RED)
end

function TestHtmlMatrix:test_named_and_unconfirmed_ranks_are_outlined()
  local r = report(4, 1.0, { { 2, 0, 0.03 }, { 2, 1, 0.03 }, { 2, 3, 0.03 } }, {
    findings = {
      { rule = "slow_host", severity = "warn", subject = { host = "h2", ranks = { 2 } }, message = "host h2 is slow" },
      { rule = "not_confirmed", severity = "warn", subject = { rank = 1, host = "h1" }, message = "not confirmed" },
    },
    localisation = { tested = { { rank = 3, pairs = {} } }, forced = { ranks = { 3 } } },
  })
  local html = H.matrix(r)
  lu.assertStrContains(html, '<rect class="mark verdict" x="44" y="')
  lu.assertStrContains(html, "<title>rank 2: verdict</title>")
  lu.assertStrContains(html, "<title>rank 1: unconfirmed</title>")
  lu.assertStrContains(html, "<title>rank 3: suspect</title>")
  lu.assertNil(html:find("rank 0: ", 1, true), "rank 0 was neither named nor re-tested")
  -- without localisation or findings: no outline, no legend for them
  html = H.matrix(report(4, 1.0))
  lu.assertNil(html:find('class="mark', 1, true))
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances { { "TestHtmlMatrix", TestHtmlMatrix } }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
