-- Flip back to the color that was active before the last flip, while it still runs the old
-- spec (upgrade.standbyUpgradeDelaySeconds). The operator consumes the annotation.
local status = obj.status or {}
if status.lastFlip == nil or status.lastFlip.from == nil then
  return obj
end
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["baton.dev/rollback"] = "true"
return obj
