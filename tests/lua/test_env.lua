-- LuaUnit tests of cs.env (the API that re-exports its five parts) and cs.env.registry.
-- Run: commscript --backend self --trusted tests/lua/test_env.lua
local cs = require "commscript"
local lu = require "luaunit"
local env = require "cs.env"
local R = require "cs.env.registry"
package.path = (debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "?.lua;" .. package.path
local H = require "env_testlib"
local NO_FILES, audit, with_rule, one, none, clean, nothing, tmpdir, write =
  H.NO_FILES, H.audit, H.with_rule, H.one, H.none, H.clean, H.nothing, H.tmpdir, H.write

local recipe = cs.recipe {
  name = "test_env",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.env",
}

-- =============================================================================================
TestHelpers = {}

function TestHelpers:test_distance_and_suggest()
  lu.assertEquals(env.distance("NCCL_DEBUG", "NCCL_DEBUG"), 0)
  lu.assertEquals(env.distance("NCCL_DEUBG", "NCCL_DEBUG"), 1)  -- a transposition
  lu.assertEquals(env.distance("abc", ""), 3)
  lu.assertEquals(env.suggest("NCCL_IB_TIMEOUTS", { "NCCL_IB_TIMEOUT", "NCCL_IB_TC" }, "NCCL_"), "NCCL_IB_TIMEOUT")
  lu.assertNil(env.suggest("NCCL_XYZ", { "NCCL_IB_TIMEOUT" }, "NCCL_"))
end

function TestHelpers:test_version_lt()
  lu.assertTrue(env.version_lt("2.3", "2.3.4"))
  lu.assertFalse(env.version_lt("2.3.0", "2.3"))
  lu.assertTrue(env.version_lt("2.9.9", "2.10"))
  lu.assertFalse(env.version_lt("2.30.7", "2.30.7"))
end

function TestHelpers:test_rank_ranges()
  lu.assertEquals(env.rank_ranges { 0, 1, 2, 5, 7, 8 }, "0-2,5,7-8")
  lu.assertEquals(env.rank_ranges { 3 }, "3")
end

function TestHelpers:test_registry_is_consistent()
  local n = 0
  for name, e in pairs(R.nccl) do
    n = n + 1
    lu.assertTrue(name:match("^NCCL_[A-Z0-9_]+$") ~= nil, name)
    lu.assertEquals(type(e.src), "string", name .. " has no source section")
    lu.assertTrue(e.removed ~= nil or e.since ~= nil, name .. " has no since")
    if e.deprecated then lu.assertNotNil(R.nccl[e.deprecated.by], name .. " -> " .. e.deprecated.by) end
    lu.assertNil(R.not_nccl[name], name .. " is both read and not read")
  end
  lu.assertTrue(n > 250)
  for name, e in pairs(R.torch) do
    lu.assertEquals(type(e.src), "string", name)
    if e.alias_of then lu.assertNotNil(R.torch[e.alias_of], name) end
  end
  for alias, real in pairs(R.pytorch_alias) do lu.assertNotNil(R.torch[real], alias) end
end

TestApi = {}

-- cs.env keeps its API after the split: every name it had, from the part that defines it.
function TestApi:test_every_part_is_re_exported()
  local parts = { ["env.parse"] = { "version_lt", "distance", "suggest", "strtoll", "parse_int", "fmt_num" },
                  ["env.checks"] = { "SEV_RANK", "parse_iflist", "iflist_matches", "file_exists" },
                  ["env.combos"] = { "audit_var", "audit", "sort_findings" },
                  ["env.conf"] = { "parse_conf", "nccl_conf", "full_audit" },
                  ["env.ranks"] = { "snapshot", "MUST_AGREE", "rank_ranges", "compare", "dedupe", "format_table",
                                "collect", "interfaces", "rdma_devices" } }
  for part, names in pairs(parts) do
    local mod = require("cs." .. part)
    for _, n in ipairs(names) do
      lu.assertNotNil(env[n], "cs.env." .. n)
      lu.assertIs(env[n], mod[n], "cs.env." .. n .. " is cs." .. part .. "." .. n)
    end
  end
  lu.assertIs(env.registry, R)
  lu.assertNil(env.internal)
end

function TestApi:test_secret_names_are_never_snapshotted()
  lu.assertTrue(R.is_secret("NCCL_IB_PASSWORD"))
  lu.assertTrue(R.is_secret("OMPI_MCA_orte_precondition_transports"))
  lu.assertFalse(R.is_secret("NCCL_DEBUG"))
  local s = env.snapshot { NCCL_DEBUG = "WARN", NCCL_TOKEN = "x", UCX_SECRET_KEY = "y", HOME = "/h" }
  lu.assertEquals(s, { NCCL_DEBUG = "WARN" })
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestHelpers", TestHelpers },
    { "TestApi", TestApi },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
