-- Reconcile again: a spec changed while paused is deployed now.
if obj.spec == nil then
  obj.spec = {}
end
obj.spec.paused = false
return obj
