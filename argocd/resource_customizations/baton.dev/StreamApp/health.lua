-- Argo CD health of a baton.dev StreamApp (kstatus conditions written by the Baton operator).
--   Suspended   spec.paused: the operator leaves the app alone until resumed
--   Progressing no status yet, an older generation observed, or a deploy/flip under way
--   Degraded    Stalled=True (a spec the cluster refused, an abandoned deploy, Pods crash-looping
--               or unable to pull their image in either color), or not Ready at rest
--   Healthy     Ready=True for the current generation: the active color serves it. The idle
--               color's own health (StandbyReady) is in the message while it is not ready.
--   Unknown     a status this script does not understand (a newer operator?)
local hs = {}

local function condition(status, kind)
  if status == nil or status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function with_message(prefix, c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return prefix .. c.message
  end
  return prefix .. fallback
end

local progressing_phases = {
  Pending = true, Deploying = true, Promoting = true, Flipping = true, RollingBack = true,
}

local spec = obj.spec or {}
local status = obj.status
local generation = (obj.metadata or {}).generation

if spec.paused == true or (status ~= nil and status.phase == "Paused") then
  hs.status = "Suspended"
  hs.message = "Reconciliation is paused (spec.paused); the app keeps running as it is"
  return hs
end

if status == nil or status.observedGeneration == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the Baton operator to report status"
  return hs
end

if generation ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation)
  return hs
end

local stalled = condition(status, "Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = with_message("Stalled: ", stalled, "the operator cannot apply the spec")
  return hs
end

local reconciling = condition(status, "Reconciling")
if progressing_phases[status.phase] or (reconciling ~= nil and reconciling.status == "True") then
  hs.status = "Progressing"
  hs.message = with_message((status.phase or "Reconciling") .. ": ", reconciling, "in progress")
  return hs
end

local ready = condition(status, "Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  local active = status.activeColor or "?"
  hs.message = "Active color " .. active .. ", " .. tostring(status.readyReplicas or 0) .. "/" ..
    tostring(status.replicas or 0) .. " ready"
  local standby = condition(status, "StandbyReady")
  if standby ~= nil and standby.status == "False" then
    hs.message = with_message(hs.message .. "; standby ", standby, "not ready")
  end
  return hs
end
if ready ~= nil and ready.status == "False" then
  hs.status = "Degraded"
  hs.message = with_message("Not ready: ", ready, "instances are not ready")
  return hs
end

hs.status = "Unknown"
hs.message = "No Ready condition in the StreamApp's status"
return hs
