-- Stop reconciling: the app keeps running as it is; no deploy or flip starts.
if obj.spec == nil then
  obj.spec = {}
end
obj.spec.paused = true
return obj
