-- cs.stages: what each stage of a recipe cost (the cost model, docs/scale-cost.md): wall time,
-- the engine's operations and the payload bytes this rank handed to them, the control-plane
-- exchanges of plain values (allgather_value, gather_value, broadcast_value: calls, bytes sent
-- and received), and counts the recipe adds itself (rounds, pairs, re-tests).
--
--   local st = cs.stages.new(ctx)
--   st:begin("topology")             -- ends the stage before it, if any
--   st:count("rounds", 1)            -- adds to a recipe-defined count of the current stage
--   st:info("plan", {...})           -- a plain value kept with the current stage (rank 0's)
--   local section = st:finish()      -- collective: ends the last stage and gathers every rank's
--                                    -- counters to rank 0; the report's "cost" section on rank
--                                    -- 0, nil on the others
--
-- section = { ranks, hosts, counters = {...names}, comms_made, comms_live (rank 0's communicators
--   made by split/shrink since the process started, and not freed yet), stages = { { name, seconds, rank0 = {...},
--   others_max = {...}, others_max_rank = {...}, counts = {...}, info = {...} } } }: rank0 is
--   rank 0's counters, others_max the largest over the other ranks (and which rank had it), so
--   that "no stage sends O(n) per rank except rank 0" is a check on others_max.
-- Counters (cs.traffic deltas): ops (engine operations, every timed iteration included),
-- bytes_sent (payload this rank handed to them), value_calls, value_sent, value_received
-- (serialised JSON of the *_value exchanges).
local native = require "commscript.native"
local M = {}

M.COUNTERS = { "ops", "bytes_sent", "value_calls", "value_sent", "value_received" }

local Stages = {}
Stages.__index = Stages

function M.new(ctx)
  return setmetatable({ ctx = ctx, list = {}, cur = nil }, Stages)
end

local function snapshot()
  local t = native.traffic()
  return t, native.now()
end

function Stages:_close()
  local c = self.cur
  if not c then return end
  local t, now = snapshot()
  c.seconds = now - c.t0
  c.mine = {}
  for _, k in ipairs(M.COUNTERS) do c.mine[k] = t[k] - c.start[k] end
  c.start, c.t0 = nil, nil
  self.list[#self.list + 1] = c
  self.cur = nil
end

function Stages:begin(name)
  if type(name) ~= "string" then error("stages:begin: a stage name (string) expected", 2) end
  self:_close()
  local t, now = snapshot()
  self.cur = { name = name, start = t, t0 = now, counts = {}, info = {} }
end

function Stages:count(key, n)
  if not self.cur then error("stages:count: no stage begun", 2) end
  self.cur.counts[key] = (self.cur.counts[key] or 0) + (n or 1)
end

function Stages:info(key, value)
  if not self.cur then error("stages:info: no stage begun", 2) end
  self.cur.info[key] = value
end

-- The seconds of the stage named `name` so far on this rank (nil when it never began).
function Stages:seconds(name)
  for _, s in ipairs(self.list) do if s.name == name then return s.seconds end end
  if self.cur and self.cur.name == name then return native.now() - self.cur.t0 end
  return nil
end

function Stages:finish()
  self:_close()
  local ctx = self.ctx
  local mine = {}
  for i, s in ipairs(self.list) do
    local row = {}
    for j, k in ipairs(M.COUNTERS) do row[j] = s.mine[k] end
    mine[i] = row
  end
  -- One gather of a few numbers per stage: O(n) on rank 0, O(stages) elsewhere.
  local all = ctx.comm:gather_value(mine, 0)
  if ctx.rank ~= 0 then return nil end
  local t = native.traffic()
  local out = { ranks = ctx.size, hosts = ctx.nhosts, counters = M.COUNTERS, stages = {},
                comms_made = t.comms_made, comms_live = t.comms_live }
  for i, s in ipairs(self.list) do
    local omax, orank = {}, {}
    for j, k in ipairs(M.COUNTERS) do
      omax[k], orank[k] = 0, -1
      for r = 2, #all do
        local v = all[r][i] and all[r][i][j] or 0
        if orank[k] < 0 or v > omax[k] then omax[k], orank[k] = v, r - 1 end
      end
    end
    out.stages[i] = { name = s.name, seconds = s.seconds, rank0 = s.mine, others_max = omax,
                      others_max_rank = orank, counts = s.counts, info = s.info }
  end
  return out
end

return M
