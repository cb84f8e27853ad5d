-- Flip back to the color that was active before the last flip, while it still runs the old
-- spec (upgrade.standbyUpgradeDelaySeconds). The operator also holds the pending deploy.
local status = obj.status or {}
local target = nil
if status.lastFlip ~= nil then
  target = status.lastFlip.from
end
if target == nil then
  return obj
end
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["baton.dev/flip-to"] = target
obj.metadata.annotations["baton.dev/flip-requested-at"] = os.date("!%Y-%m-%dT%H:%M:%SZ")
obj.metadata.annotations["baton.dev/flip-reason"] = "argocd-action-rollback"
return obj
