-- Promote the idle color: the operator flips to it, exactly (docs/concepts.md), when a deploy
-- waits for promotion (upgrade.autoPromote false) or was abandoned or rolled back. A flip with
-- nothing to promote is `baton flip APP --to COLOR`, which the operator then follows.
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["baton.dev/promote"] = "true"
return obj
