-- Resource actions of a baton.dev StreamApp in Argo CD. flip and rollback write annotations
-- the operator acts on (docs/operations.md "Argo CD"); pause and resume toggle spec.paused.
local actions = {}
local spec = obj.spec or {}
local status = obj.status or {}
local paused = spec.paused == true
local busy = status.phase == "Flipping" or status.phase == "RollingBack"
local blue_green = (spec.upgrade == nil or spec.upgrade.strategy == nil or spec.upgrade.strategy == "BlueGreen")

local function other(color)
  if color == "blue" then return "green" end
  if color == "green" then return "blue" end
  return nil
end

local function ready_replicas(color)
  if color == nil or status.colors == nil or status.colors[color] == nil then
    return 0
  end
  return status.colors[color].readyReplicas or 0
end

local idle = other(status.activeColor)
local idle_ready = idle ~= nil and ready_replicas(idle) > 0 and ready_replicas(idle) >= (spec.replicas or 1)
local can_flip = blue_green and not paused and not busy and idle_ready
-- something to promote: a deploy waiting for promotion, or one that was abandoned or rolled back
local stalled = false
for _, c in ipairs(status.conditions or {}) do
  if c.type == "Stalled" and c.status == "True" then stalled = true end
end
local can_promote = can_flip and (status.phase == "Promoting" or stalled)

actions["flip"] = {["disabled"] = not can_promote, ["iconClass"] = "fa fa-fw fa-exchange"}
actions["rollback"] = {
  ["disabled"] = not (can_flip and status.lastFlip ~= nil and status.lastFlip.from ~= nil),
  ["iconClass"] = "fa fa-fw fa-undo",
}
actions["pause"] = {["disabled"] = paused, ["iconClass"] = "fa fa-fw fa-pause-circle"}
actions["resume"] = {["disabled"] = not paused, ["iconClass"] = "fa fa-fw fa-play-circle"}
return actions
