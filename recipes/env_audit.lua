-- Environment audit: lint every rank's NCCL_* / TORCH_NCCL_* / TORCH_FR_* / UCX_* variables (and NCCL's
-- config files) against how the libraries really parse them, and name the variables that
-- differ between ranks. Also a plain linter without mpirun:
--     commscript --backend self env_audit
--     NCCL_BUFFSIZE=4M commscript --backend self env_audit
-- The rules are in stdlib/cs/env.lua, the variables in stdlib/cs/env/registry.lua.
local cs = require "commscript"

local recipe = cs.recipe {
  name = "env_audit",
  version = "1.1.2",
  requires = ">=0.1, <1.0",
  summary = "lint NCCL/PyTorch/UCX environment variables and NCCL config files on every rank; name what differs between ranks",
  options = {
    strict = { false, "also warn on TORCH_NCCL_*/UCX_* names the audit does not know" },
    conf = { "", "an extra NCCL config file (NAME=value lines) to audit, e.g. one you mean to use as NCCL_CONF_FILE" },
    nccl_version = { "auto", "NCCL version the variables are checked against: x.y.z, auto (the NCCL commscript is built with), or any" },
    host_checks = { true, "check NCCL_SOCKET_IFNAME / NCCL_IB_HCA against this host's interfaces and RDMA devices" },
  },
}

local env = cs.env

local function nccl_version(ctx)
  local v = ctx.opt.nccl_version
  if v == "any" or v == "" then return nil, "any version up to " .. env.registry.NCCL_LATEST end
  if v ~= "auto" then
    if not v:match("^%d+%.%d+[%.%d]*$") then
      cs.raise(cs.exit.bad_input, ("--nccl-version '%s' is not a version (x.y.z, auto or any)"):format(v), 0)
    end
    return v, "NCCL " .. v
  end
  local c = ctx.report:get("commscript")
  local n = type(c) == "table" and type(c.backends) == "table" and c.backends.nccl
  if type(n) == "table" and type(n.library) == "string" and n.library:match("^%d+%.%d+") then
    return n.library, ("NCCL %s (the library commscript is built with; --nccl-version to change)"):format(n.library)
  end
  return nil, "any version up to " .. env.registry.NCCL_LATEST .. " (commscript is built without NCCL)"
end

local plural = cs.text.plural

function recipe.run(ctx)
  local o = ctx.opt
  local ver, ver_text = nccl_version(ctx)
  -- Collective: every rank audits its environment and conf files; the same findings come back
  -- on every rank (deduplicated, with the ranks listed, plus what differs between ranks).
  local a = env.collect(ctx, { nccl_version = ver, strict = o.strict, host_checks = o.host_checks,
                               extra = o.conf ~= "" and { o.conf } or nil })
  local merged, counts = a.findings, a.counts
  cs.findings.collector(ctx):add(merged)
  ctx.report:set("env_audit", {
    recipe_version = recipe.version, nccl_version = ver or "any", strict = o.strict,
    ranks = ctx.size, hosts = a.nhosts, conf_files = cs.array(a.files),
    audited_variables = a.audited, from_conf_files = a.from_files, counts = counts,
  })
  ctx.report:result { kind = "env_audit", errors = counts.error, warnings = counts.warn, infos = counts.info,
                      ranks = ctx.size, audited_variables = a.audited }

  -- The table (rank 0).
  ctx.log("# commscript env_audit %s: %s on %s, checked against %s", recipe.version, plural(ctx.size, "rank"),
    plural(a.nhosts, "host"), ver_text)
  local ftext = {}
  for _, f in ipairs(a.files) do
    ftext[#ftext + 1] = ("%s %s%s"):format(f.path, f.exists and plural(f.entries, "setting") or "absent",
      f.applied and "" or ", not read by NCCL")
  end
  ctx.log("# rank 0: %s audited, %d from config files (%s)", plural(a.audited, "variable"), a.from_files,
    table.concat(ftext, "; "))
  if #merged == 0 then
    ctx.log("# no findings: NCCL will read every variable as written")
    return
  end
  for _, line in ipairs(cs.findings.table(merged, ctx.size)) do ctx.log("%s", line) end
  ctx.log("# %s, %s, %s", plural(counts.error, "error"), plural(counts.warn, "warning"), plural(counts.info, "note"))
  ctx.log("# to see what NCCL itself reads: NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ENV prints 'NAME set by environment to N.'")
end

return recipe
