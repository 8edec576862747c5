-- Barriers in a loop: the operations an injected hang (hang.toml) stops.
local cs = require "commscript"
local recipe = cs.recipe { name = "barriers", version = "1.0.0", requires = ">=0.1, <1.0",
                           summary = "a few barriers" }
function recipe.run(ctx)
  for _ = 1, 6 do ctx.comm:barrier() end
end
return recipe
