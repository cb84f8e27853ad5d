-- Ask the operator to make the idle color active (an exact flip; docs/concepts.md).
-- The target color makes the request idempotent; the timestamp makes a repeat a new request.
local status = obj.status or {}
local target = "green"
if status.activeColor == "green" then
  target = "blue"
end
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["baton.dev/flip-to"] = target
obj.metadata.annotations["baton.dev/flip-requested-at"] = os.date("!%Y-%m-%dT%H:%M:%SZ")
obj.metadata.annotations["baton.dev/flip-reason"] = "argocd-action-flip"
return obj
