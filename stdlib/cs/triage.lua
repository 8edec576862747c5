-- cs.triage: from a customer's artifacts to a diagnosis per process group (docs/triage.md). The
-- code is in the package's parts (stdlib/cs/triage/), each one job; this module re-exports what
-- recipes call:
--   load(paths)                  -> artifacts (files and directories; cs.triage.parse reads each)
--   diagnose(artifacts [, opts]) -> diagnosis {groups, nccl, env, ras, tests, world, ...}
--   lines(diagnosis)             -> the text printed by recipes/triage.lua
--   findings(diagnosis)          -> report findings, each with evidence.at = "file:line"
--   failure(diagnosis)           -> the group a repro reproduces
-- The parts:
--   cs.triage.parse            recognising and reading each artifact
--   cs.triage.names            ops, dtypes and element counts as commscript names them
--   cs.triage.flight_recorder  the Flight Recorder analysis (fr_trace's matching)
--   cs.triage.watchdog         the watchdog lines' analysis, without a dump
--   cs.triage.diagnosis        load and diagnose: every analysis in turn
--   cs.triage.report           the text, the findings and the failure of a diagnosis
--   cs.triage.repro            repro.lua + repro.toml (also cs.triage.repro here)
local M = { parse = require "cs.triage.parse", repro = require "cs.triage.repro" }
for part, names in pairs { diagnosis = { "load", "diagnose" }, names = { "op_of", "dtype_of", "count_of" },
                           report = { "lines", "findings", "failure", "verdict_line", "rec_text" } } do
  local m = require("cs.triage." .. part)
  for _, n in ipairs(names) do M[n] = m[n] end
end

return M
