-- The environment audit: lint NCCL_* / TORCH_NCCL_* / TORCH_FR_* / UCX_* variables against how
-- the libraries really read them (docs/stdlib.md, cs.env; the data is in cs.env.registry, the
-- facts it relies on in docs/nccl.md, "What the environment audit checks against"). Pure functions over plain tables except where noted (nccl_conf reads
-- files, interfaces and rdma_devices read this host's): no communication.
-- The code is in five parts, one per section, re-exported here (require "cs.env" is the API):
--   cs.env.parse  strtoll, parse_int, version_lt, distance, suggest
--   cs.env.checks the checks of one value by kind; parse_iflist, iflist_matches, file_exists
--   cs.env.combos audit_var, the combination rules, audit, sort_findings
--   cs.env.conf   parse_conf, nccl_conf, full_audit
--   cs.env.ranks  snapshot, compare, rank_ranges, dedupe, format_table, collect, interfaces,
--                 rdma_devices
--
--   audit(vars, opts)             -> findings for a table NAME -> value
--   nccl_conf(opts)               -> the NCCL config files as NCCL applies them, and their findings
--   full_audit(vars, opts)        -> audit of the environment NCCL ends up with (env + conf files)
--   snapshot(vars)                -> the NCCL_/TORCH_NCCL_/TORCH_FR_/UCX_/OMPI_/CUDA_ subset
--   compare(per_rank_snapshots)   -> findings for variables that differ between ranks
--   dedupe(per_rank_findings)     -> one finding per distinct finding, with the ranks listed
--   format_table(findings, n)     -> lines of the table env_audit prints
--   collect(ctx, opts)            -> all of the above over a job (collective), as env_audit runs it
--   strtoll(s [, base])           -> glibc's strtoll(s, &end, base), as NCCL_PARAM parses
--
-- A finding is { severity, subject = { variable = NAME }, message, evidence = { value =,
-- parsed_as =, source =, rule =, reference = "docs/nccl.md#...", ... }, remedy }. Severities:
--   error  NCCL reads the value differently from what it says, or ignores it, so the setting
--          silently does not do what it was written for: 4M read as 4, true read as 0, an
--          invalid NCCL_DEBUG level, a case-mismatched P2P level, NCCL_P2P_DISABLE other than 1,
--          an unknown NCCL_ALGO token (an init error since 2.24), a name that no NCCL reads
--          (folklore such as NCCL_TIMEOUT, or a likely typo of a real name), an interface
--          filter that matches no interface of this host, NCCL_CONF_FILE with '~'.
--   warn   works but is probably not what was meant, or will stop working: deprecated and
--          removed names, internal (undocumented) names (docs/nccl.md#internal-variables),
--          out-of-range values, trailing text that strtoll drops without changing the number,
--          contradicting variables, PyTorch's legacy NCCL_* aliases, unknown NCCL_* names.
--   info   worth knowing: debugging variables (env.rst: not for production), plugin-owned
--          names, legacy numeric levels, empty values (the default applies), shadowed conf lines.
-- A correct configuration produces no warn and no error.
local M = {}
M.registry = require "cs.env.registry"

for _, part in ipairs { "cs.env.parse", "cs.env.checks", "cs.env.combos", "cs.env.conf", "cs.env.ranks" } do
  for k, v in pairs(require(part)) do
    if k ~= "internal" then
      assert(M[k] == nil, "cs.env: two parts export " .. k)
      M[k] = v
    end
  end
end

return M
