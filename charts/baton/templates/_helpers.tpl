{{/* Names and labels shared by every template. */}}

{{- define "baton.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "baton.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "baton.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "baton.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: baton
{{- end }}

{{- define "baton.selectorLabels" -}}
app.kubernetes.io/name: {{ include "baton.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "baton.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "baton.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "baton.leaseName" -}}
{{- default (include "baton.fullname" .) .Values.operator.leaderElection.leaseName }}
{{- end }}

{{- /* repository@digest when a digest is given (what a signed release pins), else repository:tag */ -}}
{{- define "baton.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "baton.compactorImage" -}}
{{- if .Values.compactorImage.digest }}
{{- printf "%s@%s" .Values.compactorImage.repository .Values.compactorImage.digest }}
{{- else }}
{{- printf "%s:%s" .Values.compactorImage.repository (default .Chart.AppVersion .Values.compactorImage.tag) }}
{{- end }}
{{- end }}

{{- define "baton.clusterWide" -}}
{{- if .Values.operator.watchNamespaces }}false{{ else }}true{{ end }}
{{- end }}

{{/*
The operator's rules in every namespace it watches. Keep in step with
baton/operator/core/rbac.py namespaced_rules(): tests/unit/test_chart_rbac.py compares them.
*/}}
{{- define "baton.namespacedRules" -}}
- apiGroups: ["baton.dev"]
  resources: ["streamapps"]
  verbs: ["get", "list", "watch", "patch", "update"]
- apiGroups: ["baton.dev"]
  resources: ["streamapps/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["baton.dev"]
  resources: ["streamapps/finalizers"]
  verbs: ["update"]
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["services", "serviceaccounts"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["batch"]
  resources: ["cronjobs"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["scheduledsparkapplications"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["scheduledsparkapplications/status"]
  verbs: ["patch"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["rolebindings"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["clusterroles"]
  resourceNames: [{{ include "baton.compactorRole" . | quote }}]
  verbs: ["bind"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "patch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "delete"]
- apiGroups: ["", "events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/*
Cluster-scoped reads kopf makes even when it watches only some namespaces (it follows
namespaces and CRDs), and with crds.manage the StreamApp CRD's upgrade (get and patch of that
one CRD): baton/operator/core/rbac.py cluster_rules().
*/}}
{{- define "baton.discoveryRules" -}}
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["list", "watch"]
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
{{- if .Values.crds.manage }}
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  resourceNames: ["streamapps.baton.dev"]
  verbs: ["get", "patch"]
{{- end }}
{{- end }}

{{/*
Cluster-scoped, in either mode: the workers' ClusterRoleBinding of each StreamApp with
spec.rack, to the node-reader ClusterRole, the one cluster role the operator may bind:
baton/operator/core/rbac.py node_zone_rules().
*/}}
{{- define "baton.nodeZoneRules" -}}
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["clusterrolebindings"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["clusterroles"]
  resourceNames: [{{ include "baton.nodeReaderRole" . | quote }}]
  verbs: ["bind"]
{{- end }}

{{/* The ClusterRole compaction Jobs are bound to in their namespace (the operator's --compactor-role). */}}
{{- define "baton.compactorRole" -}}
{{ include "baton.fullname" . }}-compactor
{{- end }}

{{/* The ClusterRole that zone-aware apps' workers are bound to (the operator's --node-reader-role). */}}
{{- define "baton.nodeReaderRole" -}}
{{ include "baton.fullname" . }}-node-reader
{{- end }}

{{/* The leader-election Lease, in the release namespace: baton/operator/core/rbac.py leader_election_rules(). */}}
{{- define "baton.leaderElectionRules" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "update"]
{{- end }}
