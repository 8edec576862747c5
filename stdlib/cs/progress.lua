-- Progress for long sweeps: rank 0 prints a line to stderr at most every `interval` seconds,
-- and only once the work has taken longer than that (short runs stay quiet).
local native = require "commscript.native"
local M = {}

M.rank = 0  -- this process's rank, set by the runner; only rank 0 prints
M.DEFAULT_INTERVAL_S = 2  -- seconds between progress lines (and before the first)

function M.new(t)
  local p = { total = t.total or 0, done = 0, label = t.label or "progress", rank = t.rank or M.rank,
              interval = t.interval or M.DEFAULT_INTERVAL_S, started = native.now() }
  p.last = p.started
  function p:step(what)
    self.done = self.done + 1
    local now = native.now()
    if self.rank == 0 and now - self.last >= self.interval then
      self.last = now
      io.stderr:write(("[%s] %d/%d %s (%.0f s)\n"):format(self.label, self.done, self.total, what or "", now - self.started))
      io.stderr:flush()
    end
  end
  return p
end

return M
