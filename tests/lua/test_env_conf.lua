-- LuaUnit tests of cs.env.conf: NCCL's config files and their precedence, full_audit.
-- Run: commscript --backend self --trusted tests/lua/test_env_conf.lua
local cs = require "commscript"
local lu = require "luaunit"
local env = require "cs.env"
local R = require "cs.env.registry"
package.path = (debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "?.lua;" .. package.path
local H = require "env_testlib"
local NO_FILES, audit, with_rule, one, none, clean, nothing, tmpdir, write =
  H.NO_FILES, H.audit, H.with_rule, H.one, H.none, H.clean, H.nothing, H.tmpdir, H.write

local recipe = cs.recipe {
  name = "test_env_conf",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.env.conf",
}

-- =============================================================================================
-- NCCL's config files (§1.4)
TestConf = {}

function TestConf:setUp()
  self.d = tmpdir()
  self.home = self.d .. "/home"
  os.execute("mkdir -p '" .. self.home .. "'")
  self.sys = self.d .. "/etc-nccl.conf"
  self.user = self.home .. "/.nccl.conf"
  self.cf = self.d .. "/custom.conf"
end

function TestConf:tearDown()
  os.execute("rm -rf '" .. self.d .. "'")
end

function TestConf:conf(envt, extra)
  return env.nccl_conf { env = envt or {}, home = self.home, system_file = self.sys, extra = extra }
end

function TestConf:test_environment_beats_user_file_beats_system_file()
  write(self.user, "NCCL_DEBUG=INFO\nNCCL_IB_TIMEOUT=22\n")
  write(self.sys, "NCCL_DEBUG=TRACE\nNCCL_IB_TIMEOUT=18\nNCCL_IB_RETRY_CNT=7\n")
  local c = self:conf { NCCL_DEBUG = "WARN" }
  lu.assertEquals(c.merged.NCCL_DEBUG, "WARN")                -- environment
  lu.assertEquals(c.sources.NCCL_DEBUG, "environment")
  lu.assertEquals(c.merged.NCCL_IB_TIMEOUT, "22")             -- user file over /etc
  lu.assertEquals(c.sources.NCCL_IB_TIMEOUT, self.user .. ":2")
  lu.assertEquals(c.merged.NCCL_IB_RETRY_CNT, "7")            -- only in /etc
  lu.assertEquals(c.sources.NCCL_IB_RETRY_CNT, self.sys .. ":3")
  lu.assertEquals(c.effective.NCCL_IB_TIMEOUT, { value = "22", source = self.user .. ":2" })
  lu.assertNil(c.effective.NCCL_DEBUG)
  -- the shadowed lines are reported (info), naming what wins
  local sh = with_rule(c.file_findings, "conf-shadowed")
  lu.assertEquals(#sh, 3)  -- user NCCL_DEBUG, /etc NCCL_DEBUG (by env), /etc NCCL_IB_TIMEOUT (by the user file)
  for _, f in ipairs(sh) do lu.assertEquals(f.severity, "info") end
  clean(c.findings)
end

function TestConf:test_nccl_conf_file_replaces_the_user_file()
  write(self.user, "NCCL_IB_TIMEOUT=22\nNCCL_IB_SL=1\n")
  write(self.cf, "NCCL_IB_TIMEOUT=19\n")
  write(self.sys, "NCCL_IB_SL=2\n")
  local c = self:conf { NCCL_CONF_FILE = self.cf }
  lu.assertEquals(c.merged.NCCL_IB_TIMEOUT, "19")
  lu.assertEquals(c.sources.NCCL_IB_TIMEOUT, self.cf .. ":1")
  lu.assertEquals(c.merged.NCCL_IB_SL, "2")  -- ~/.nccl.conf is not read at all, /etc still is
  lu.assertEquals(c.files[1].role, "NCCL_CONF_FILE")
  lu.assertEquals(c.files[2].role, "system")
  lu.assertEquals(#c.files, 2)
end

function TestConf:test_empty_nccl_conf_file_means_the_user_file()
  write(self.user, "NCCL_IB_TIMEOUT=22\n")
  local c = self:conf { NCCL_CONF_FILE = "" }
  lu.assertEquals(c.merged.NCCL_IB_TIMEOUT, "22")
  lu.assertEquals(c.files[1].role, "user")
end

function TestConf:test_nccl_conf_file_needs_2_23()
  write(self.user, "NCCL_IB_TIMEOUT=22\n")
  write(self.cf, "NCCL_IB_TIMEOUT=19\n")
  local c = env.nccl_conf { env = { NCCL_CONF_FILE = self.cf }, home = self.home, system_file = self.sys,
                            nccl_version = "2.22.3" }
  lu.assertEquals(c.merged.NCCL_IB_TIMEOUT, "22")
  -- and the audit says NCCL_CONF_FILE is not read by that version
  one(env.full_audit({ NCCL_CONF_FILE = self.cf }, { home = self.home, system_file = self.sys, nccl_version = "2.22.3" }),
    "since", "warn", "NCCL_CONF_FILE")
end

function TestConf:test_missing_nccl_conf_file()
  local fs = env.full_audit({ NCCL_CONF_FILE = self.d .. "/nope.conf" }, { home = self.home, system_file = self.sys })
  local f = one(fs, "path-missing", "warn", "NCCL_CONF_FILE")
  lu.assertStrContains(f.message, "~/.nccl.conf is not read either")
end

function TestConf:test_values_from_files_are_audited_with_their_source()
  write(self.sys, "# site defaults\nNCCL_BUFFSIZE=4M\nNCCL_P2P_LEVEL=nvl\n")
  local c = self:conf {}
  local f = one(c.findings, "int-size-suffix", "error", "NCCL_BUFFSIZE")
  lu.assertEquals(f.evidence.source, self.sys .. ":2")
  lu.assertEquals(one(c.findings, "level-case", "error").evidence.source, self.sys .. ":3")
  -- full_audit: the same, once
  local fs = env.full_audit({}, { home = self.home, system_file = self.sys })
  lu.assertEquals(one(fs, "int-size-suffix", "error").evidence.source, self.sys .. ":2")
  -- a shadowed bad value does not count: the environment's good one is what NCCL reads
  fs = env.full_audit({ NCCL_BUFFSIZE = "4194304" }, { home = self.home, system_file = self.sys })
  none(fs, "int-size-suffix")
  lu.assertEquals(one(fs, "conf-shadowed", "info", "NCCL_BUFFSIZE").evidence.effective, "4194304")
end

function TestConf:test_combination_rules_see_env_and_files_together()
  write(self.sys, "NCCL_P2P_LEVEL=NVL\n")
  local fs = env.full_audit({ NCCL_P2P_DISABLE = "1" }, { home = self.home, system_file = self.sys })
  local f = one(fs, "p2p-level-overridden", "warn", "NCCL_P2P_LEVEL")
  lu.assertEquals(f.evidence.source, self.sys .. ":1")
end

function TestConf:test_line_syntax()
  write(self.sys, table.concat({
    "# comment",
    "   # indented comment",
    "",
    "NCCL_DEBUG = WARN",          -- 4: blanks around the name
    "export NCCL_IB_SL=1",        -- 5: shell syntax
    "NCCL_IB_TIMEOUT=22 ",        -- 6: blank after the value
    "NCCL_SOCKET_IFNAME=\"eth0\"", -- 7: quotes
    "NCCL_IB_TC=106 # RoCE",      -- 8: inline comment
    "just some text",             -- 9: no '='
    "NCCL_IB_RETRY_CNT=7",        -- 10
    "NCCL_IB_RETRY_CNT=5",        -- 11: duplicate, the first wins
    "NCCL_CONF_FILE=/x.conf",     -- 12: has no effect in a file
  }, "\n") .. "\n")
  local c = self:conf {}
  local fs = c.file_findings
  local b = with_rule(fs, "conf-blanks-in-name")
  lu.assertEquals(#b, 2)
  lu.assertEquals(b[1].severity, "error")
  lu.assertEquals(b[1].subject.variable, "NCCL_DEBUG")
  lu.assertEquals(b[1].evidence.source, self.sys .. ":4")
  lu.assertEquals(b[2].subject.variable, "NCCL_IB_SL")
  lu.assertNil(c.merged.NCCL_DEBUG)       -- NCCL set "NCCL_DEBUG ", not NCCL_DEBUG
  one(fs, "conf-blanks-in-value", "warn", "NCCL_IB_TIMEOUT")
  one(fs, "conf-quotes", "warn", "NCCL_SOCKET_IFNAME")
  one(fs, "conf-inline-comment", "warn", "NCCL_IB_TC")
  lu.assertEquals(one(fs, "conf-no-equals", "warn").evidence.source, self.sys .. ":9")
  local dup = one(fs, "conf-duplicate", "warn", "NCCL_IB_RETRY_CNT")
  lu.assertEquals(dup.evidence.source, self.sys .. ":11")
  lu.assertEquals(c.merged.NCCL_IB_RETRY_CNT, "7")
  one(fs, "conf-file-in-file", "warn", "NCCL_CONF_FILE")
  lu.assertNil(c.merged.NCCL_CONF_FILE)
end

function TestConf:test_clean_file_has_no_findings()
  write(self.sys, "# a good file\nNCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME==eth0\nNCCL_IB_HCA=mlx5_0:1\n")
  local c = self:conf {}
  nothing(c.findings)
  lu.assertEquals(c.merged.NCCL_SOCKET_IFNAME, "=eth0")
end

function TestConf:test_extra_file_is_audited_but_not_applied()
  write(self.cf, "NCCL_DEBUG=WARNING\n")
  local c = self:conf({}, { self.cf })
  lu.assertNil(c.merged.NCCL_DEBUG)
  lu.assertEquals(c.files[#c.files].role, "extra")
  lu.assertFalse(c.files[#c.files].applied)
  one(c.findings, "conf-extra", "info")
  lu.assertEquals(one(c.findings, "enum-invalid", "error", "NCCL_DEBUG").evidence.source, self.cf .. ":1")
  -- when NCCL_CONF_FILE names it, it is the file NCCL reads
  c = self:conf({ NCCL_CONF_FILE = self.cf }, { self.cf })
  lu.assertEquals(c.merged.NCCL_DEBUG, "WARNING")
  none(c.findings, "conf-extra")
  one(self:conf({}, { self.d .. "/missing.conf" }).findings, "conf-unreadable", "warn")
end

function TestConf:test_absent_files()
  local c = self:conf {}
  lu.assertEquals(#c.files, 2)
  lu.assertFalse(c.files[1].exists)
  lu.assertFalse(c.files[2].exists)
  nothing(c.findings)
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestConf", TestConf },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
