{{/*
gatehouse.defaults fills, when the release's values come from a chart with
other keys (their defaultsRevision is another, or absent), every key of
this chart's defaults that .Values lacks, keeping every value .Values has
(false and empty ones too). Every template includes it first. Why: `helm
upgrade --reuse-values` renders the new chart over the previous release's
values with the previous chart's defaults, so a key added since is missing,
and a template reading it would fail ("nil pointer evaluating
.Values.tests.enabled"). With this chart's own values nothing is filled, so
a key a user deletes with null stays deleted. files/generated/values.yaml
is values.yaml as it is (make generate), since a chart's values.yaml is not
among .Files. Sprig's merge is not used: it replaces false and empty values
with the default.
*/}}
{{- define "gatehouse.defaults" -}}
{{- $defaults := .Files.Get "files/generated/values.yaml" | fromYaml -}}
{{- if ne (toString .Values.defaultsRevision) (toString $defaults.defaultsRevision) -}}
{{- include "gatehouse.fillDefaults" (list .Values $defaults) -}}
{{- end -}}
{{- end -}}

{{- define "gatehouse.fillDefaults" -}}
{{- $values := index . 0 -}}
{{- range $key, $default := index . 1 -}}
{{- if not (hasKey $values $key) -}}
{{- $_ := set $values $key $default -}}
{{- else if and (kindIs "map" $default) (kindIs "map" (index $values $key)) -}}
{{- include "gatehouse.fillDefaults" (list (index $values $key) $default) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Names. */}}
{{- define "gatehouse.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gatehouse.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gatehouse.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gatehouse.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gatehouse.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "gatehouse.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The webhook Service the API server calls. */}}
{{- define "gatehouse.serviceName" -}}
{{- printf "%s-webhook" (include "gatehouse.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The cert-manager Certificate (certManager mode). */}}
{{- define "gatehouse.certificateName" -}}
{{- printf "%s-serving" (include "gatehouse.fullname" .) -}}
{{- end -}}

{{/* The kubernetes.io/tls Secret Gatehouse serves (--cert-secret). */}}
{{- define "gatehouse.certSecretName" -}}
{{- $mode := include "gatehouse.certMode" . -}}
{{- if eq $mode "secret" -}}
{{- required "certificates.secret.name is required with certificates.mode=secret" .Values.certificates.secret.name -}}
{{- else if and (eq $mode "selfManaged") .Values.certificates.selfManaged.secretName -}}
{{- .Values.certificates.selfManaged.secretName -}}
{{- else -}}
{{- printf "%s-serving-cert" (include "gatehouse.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "gatehouse.certMode" -}}
{{- $mode := .Values.certificates.mode -}}
{{- if eq $mode "selfSigned" -}}
{{- fail "certificates.mode selfSigned was removed (its CA was renewed only by hand): use selfManaged, where Gatehouse rotates the CA itself" -}}
{{- end -}}
{{- if not (has $mode (list "selfManaged" "certManager" "secret")) -}}
{{- fail (printf "certificates.mode %q: want selfManaged, certManager or secret" $mode) -}}
{{- end -}}
{{- if and (eq $mode "selfManaged") (eq (include "gatehouse.webhooksMode" .) "static") -}}
{{- fail "certificates.mode=selfManaged needs webhooks.mode=managed: its CA exists only at run time, so only Gatehouse can write the caBundle" -}}
{{- end -}}
{{- $mode -}}
{{- end -}}

{{- define "gatehouse.webhooksMode" -}}
{{- $mode := .Values.webhooks.mode -}}
{{- if not (has $mode (list "managed" "static")) -}}
{{- fail (printf "webhooks.mode %q: want managed or static" $mode) -}}
{{- end -}}
{{- $mode -}}
{{- end -}}

{{/* Whether Gatehouse elects a leader: it rotates certificates or writes webhook configurations. */}}
{{- define "gatehouse.leaderElect" -}}
{{- if or (eq (include "gatehouse.webhooksMode" .) "managed") (eq (include "gatehouse.certMode" .) "selfManaged") -}}
true
{{- end -}}
{{- end -}}

{{/* The enabled modules, comma-separated; fails on a bad enforcement mode or when none is enabled. */}}
{{- define "gatehouse.modules" -}}
{{- $enabled := list -}}
{{- range $name, $m := .Values.modules -}}
{{- if $m.enabled -}}
{{- $enabled = append $enabled $name -}}
{{- end -}}
{{- end -}}
{{- if not $enabled -}}
{{- fail "enable at least one module under modules" -}}
{{- end -}}
{{- join "," $enabled -}}
{{- end -}}

{{- define "gatehouse.enforcement" -}}
{{- $items := list -}}
{{- range $name, $m := .Values.modules -}}
{{- if $m.enabled -}}
{{- $mode := default "enforce" $m.enforcement -}}
{{- if not (has $mode (list "enforce" "warn")) -}}
{{- fail (printf "modules.%s.enforcement %q: want enforce or warn" $name $mode) -}}
{{- end -}}
{{- $items = append $items (printf "%s=%s" $name $mode) -}}
{{- end -}}
{{- end -}}
{{- join "," $items -}}
{{- end -}}

{{/* The base64 CA bundle for caBundle fields (webhooks.mode=static): the configured one in secret mode, empty with cert-manager (its cainjector writes it). */}}
{{- define "gatehouse.caBundle" -}}
{{- if and (eq (include "gatehouse.certMode" .) "secret") (eq (include "gatehouse.webhooksMode" .) "static") -}}
{{- required "certificates.secret.caBundle (base64 PEM CA) is required with certificates.mode=secret and webhooks.mode=static" .Values.certificates.secret.caBundle -}}
{{- end -}}
{{- end -}}

{{/* The cainjector annotation: cert-manager with webhooks.mode=static only (in managed mode Gatehouse writes the caBundle). */}}
{{- define "gatehouse.caInjectAnnotation" -}}
{{- if and (eq (include "gatehouse.certMode" .) "certManager") (eq (include "gatehouse.webhooksMode" .) "static") -}}
cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "gatehouse.certificateName" .) }}
{{- end -}}
{{- end -}}

{{/*
gatehouse.fill fills a generated file (files/generated, written by
`make generate`) in: the release namespace, the webhook Service and the CA
bundle (its line is dropped when cert-manager injects it). Comments go.
Arguments: (list $ text).
*/}}
{{- define "gatehouse.fill" -}}
{{- $ctx := index . 0 -}}
{{- $text := index . 1 -}}
{{- $ca := include "gatehouse.caBundle" $ctx -}}
{{- if $ca -}}
{{- $text = replace "__CA_BUNDLE__" $ca $text -}}
{{- else -}}
{{- $text = regexReplaceAll "(?m)^[ ]*caBundle: __CA_BUNDLE__\n" $text "" -}}
{{- end -}}
{{- $text = replace "__NAMESPACE__" $ctx.Release.Namespace $text -}}
{{- $text = replace "__SERVICE__" (include "gatehouse.serviceName" $ctx) $text -}}
{{- regexReplaceAll "(?m)^#.*\n" $text "" -}}
{{- end -}}

{{/* The enabled modules' generated webhook entries of one kind, with each module's webhook settings applied. Arguments: (list $ "validating"|"mutating"). */}}
{{- define "gatehouse.webhooks" -}}
{{- $ctx := index . 0 -}}
{{- $kind := index . 1 -}}
{{- range $name, $m := $ctx.Values.modules -}}
{{- if $m.enabled -}}
{{- $file := $ctx.Files.Get (printf "files/generated/webhooks/%s/%s.yaml" $name $kind) -}}
{{- if $file }}
{{- $entries := include "gatehouse.fill" (list $ctx $file) | fromYamlArray }}
{{ include "gatehouse.applySettings" (list $ctx $name $entries) | trim }}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
gatehouse.applySettings applies modules.<module>.webhook (failurePolicy,
timeoutSeconds, namespaceExclusions, objectSelector, matchConditions) to a
module's generated entries, as Gatehouse's renderer does in managed mode
(internal/webhookconfig/settings.go): the exclusions join the one
kubernetes.io/metadata.name NotIn list, sorted; the object selector is
AND-ed with the declared one, the match conditions follow the declared
ones (the API server compiles their CEL; Gatehouse checks it at start-up). A setting a webhook locks
(files/generated/webhooks/<module>/locked.yaml) fails, with its reason.
Arguments: (list $ module entries); returns the entries as YAML.
*/}}
{{- define "gatehouse.applySettings" -}}
{{- $ctx := index . 0 -}}
{{- $module := index . 1 -}}
{{- $entries := index . 2 -}}
{{- $s := (index $ctx.Values.modules $module).webhook | default dict -}}
{{- $locked := $ctx.Files.Get (printf "files/generated/webhooks/%s/locked.yaml" $module) | fromYaml | default dict -}}
{{- range $w := $entries -}}
{{- $l := index $locked $w.name | default dict -}}
{{- if and $s.failurePolicy (ne $s.failurePolicy $w.failurePolicy) -}}
{{- if $l.failurePolicy -}}
{{- fail (printf "modules.%s.webhook.failurePolicy: webhook %s must stay %s: %s" $module $w.name $w.failurePolicy $l.failurePolicy) -}}
{{- end -}}
{{- $_ := set $w "failurePolicy" $s.failurePolicy -}}
{{- end -}}
{{- if $s.timeoutSeconds -}}
{{- $_ := set $w "timeoutSeconds" (int $s.timeoutSeconds) -}}
{{- end -}}
{{- with $s.namespaceExclusions -}}
{{- if $l.namespaceExclusions -}}
{{- fail (printf "modules.%s.webhook.namespaceExclusions: webhook %s excludes only kube-system, kube-node-lease and Gatehouse's namespace: %s" $module $w.name $l.namespaceExclusions) -}}
{{- end -}}
{{- range $e := $w.namespaceSelector.matchExpressions -}}
{{- if and (eq $e.key "kubernetes.io/metadata.name") (eq $e.operator "NotIn") -}}
{{- $_ := set $e "values" (concat $e.values $s.namespaceExclusions | uniq | sortAlpha) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $s.objectSelector -}}
{{- if $l.objectSelector -}}
{{- fail (printf "modules.%s.webhook.objectSelector: webhook %s takes no objectSelector: %s" $module $w.name $l.objectSelector) -}}
{{- end -}}
{{- $sel := deepCopy ($w.objectSelector | default dict) -}}
{{- $labels := $sel.matchLabels | default dict -}}
{{- range $k, $v := .matchLabels | default dict -}}
{{- if and (hasKey $labels $k) (ne (index $labels $k) $v) -}}
{{- fail (printf "modules.%s.webhook.objectSelector: webhook %s: contradicts the webhook's own selector, it would match nothing: %s=%s (declared %s=%s)" $module $w.name $k $v $k (index $labels $k)) -}}
{{- end -}}
{{- $_ := set $labels $k $v -}}
{{- end -}}
{{- if $labels -}}
{{- $_ := set $sel "matchLabels" $labels -}}
{{- end -}}
{{- with .matchExpressions -}}
{{- $_ := set $sel "matchExpressions" (concat ($sel.matchExpressions | default list) .) -}}
{{- end -}}
{{- $_ := set $w "objectSelector" $sel -}}
{{- end -}}
{{- with $s.matchConditions -}}
{{- if $l.matchConditions -}}
{{- fail (printf "modules.%s.webhook.matchConditions: webhook %s takes no matchConditions: %s" $module $w.name $l.matchConditions) -}}
{{- end -}}
{{- $declared := list -}}
{{- range $c := $w.matchConditions | default list -}}
{{- $declared = append $declared $c.name -}}
{{- end -}}
{{- range $c := . -}}
{{- if has $c.name $declared -}}
{{- fail (printf "modules.%s.webhook.matchConditions: webhook %s declares conditions named %s already" $module $w.name $c.name) -}}
{{- end -}}
{{- end -}}
{{- $all := concat ($w.matchConditions | default list) . -}}
{{- if gt (len $all) 64 -}}
{{- fail (printf "modules.%s.webhook.matchConditions: webhook %s declares %d conditions: with these, %d, over the API server's 64" $module $w.name (len $declared) (len $all)) -}}
{{- end -}}
{{- $_ := set $w "matchConditions" $all -}}
{{- end -}}
{{- end -}}
{{- toYaml $entries -}}
{{- end -}}

{{/* The install's name (--instance-name): the webhook configurations are <instance>-validating and <instance>-mutating, the lease <instance>-leader. */}}
{{- define "gatehouse.instance" -}}
{{- include "gatehouse.fullname" . -}}
{{- end -}}

{{/*
gatehouse.config is the --config file: per enabled module, its enforcement,
webhook settings and its own settings (docs/install.md, "Configuration").
*/}}
{{- define "gatehouse.config" -}}
{{- $modules := dict -}}
{{- range $name, $m := .Values.modules -}}
{{- if $m.enabled -}}
{{- $c := dict "enabled" true "enforcement" (default "enforce" $m.enforcement) -}}
{{- $w := dict -}}
{{- with $m.webhook -}}
{{- if .failurePolicy }}{{ $_ := set $w "failurePolicy" .failurePolicy }}{{ end -}}
{{- if .timeoutSeconds }}{{ $_ := set $w "timeoutSeconds" (int .timeoutSeconds) }}{{ end -}}
{{- if .namespaceExclusions }}{{ $_ := set $w "namespaceExclusions" .namespaceExclusions }}{{ end -}}
{{- if .objectSelector }}{{ $_ := set $w "objectSelector" .objectSelector }}{{ end -}}
{{- if .matchConditions }}{{ $_ := set $w "matchConditions" .matchConditions }}{{ end -}}
{{- end -}}
{{- if $w -}}
{{- $_ := set $c "webhook" $w -}}
{{- /* A locked setting fails the render in managed mode too, as in static
mode, rather than a Gatehouse that refuses to start after the upgrade:
the same check, on the entries Gatehouse would write. */ -}}
{{- range $kind := list "validating" "mutating" -}}
{{- $file := $.Files.Get (printf "files/generated/webhooks/%s/%s.yaml" $name $kind) -}}
{{- if $file -}}
{{- $_ := include "gatehouse.applySettings" (list $ $name (include "gatehouse.fill" (list $ $file) | fromYamlArray)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* The module's settings (modules.<name>.settings, whose schema is
generated from the module's settings struct): an older values key of a
setting's name (modules.pvsafe.bypass) gives it, the settings map wins. */ -}}
{{- with $.Files.Get (printf "files/generated/settings/%s.yaml" $name) -}}
{{- $s := dict -}}
{{- range $field := fromYamlArray . -}}
{{- if hasKey $m $field -}}{{- $_ := set $s $field (get $m $field) -}}{{- end -}}
{{- end -}}
{{- $s = mergeOverwrite $s (deepCopy ($m.settings | default dict)) -}}
{{- if $s -}}{{- $_ := set $c "settings" $s -}}{{- end -}}
{{- end -}}
{{- $_ := set $modules $name $c -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "modules" $modules) -}}
{{- end -}}

{{/* The conversion stanza an enabled module serves for a CRD, if any. Arguments: (list $ crdName). */}}
{{- define "gatehouse.conversion" -}}
{{- $ctx := index . 0 -}}
{{- $crd := index . 1 -}}
{{- range $name, $m := $ctx.Values.modules -}}
{{- if $m.enabled -}}
{{- $file := $ctx.Files.Get (printf "files/generated/webhooks/%s/conversions/%s.yaml" $name $crd) -}}
{{- if $file -}}
{{ include "gatehouse.fill" (list $ctx $file) | trim }}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The annotations of the helm test's ServiceAccount and roles: created before its Pod, deleted after it, passed or failed. Arguments: (list weight). */}}
{{- define "gatehouse.testHook" -}}
helm.sh/hook: test
helm.sh/hook-weight: {{ index . 0 | quote }}
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded,hook-failed
{{- end -}}

{{/* A scrape endpoint's interval, scrapeTimeout and relabelings, from a ServiceMonitor's or PodMonitor's values. */}}
{{- define "gatehouse.scrapeSettings" -}}
interval: {{ .interval }}
{{- with .scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
{{- with .relabelings }}
relabelings:
{{- toYaml . | nindent 0 }}
{{- end }}
{{- with .metricRelabelings }}
metricRelabelings:
{{- toYaml . | nindent 0 }}
{{- end }}
{{- end -}}

{{/*
gatehouse.image: repository:tag, or with image.digest repository@digest
(repository:tag@digest when image.tag is set: the tag is then only a label
for people, the runtime pulls the digest).
*/}}
{{- define "gatehouse.image" -}}
{{- with .Values.image.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" .) -}}
{{- fail (printf "image.digest %q: want sha256: and 64 lowercase hex digits" .) -}}
{{- end -}}
{{- if $.Values.image.tag -}}
{{- printf "%s:%s@%s" $.Values.image.repository $.Values.image.tag . -}}
{{- else -}}
{{- printf "%s@%s" $.Values.image.repository . -}}
{{- end -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
gatehouse.goMemLimit is the server container's GOMEMLIMIT: .Values.goMemLimit,
else 90% of its memory limit in MiB, less the render workers' 512Mi when
configcheck runs them in this container (without separateIdentity), else
nothing.
*/}}
{{- define "gatehouse.goMemLimit" -}}
{{- if .Values.goMemLimit -}}
{{- .Values.goMemLimit -}}
{{- else -}}
{{- $workers := 0 -}}
{{- if and .Values.modules.configcheck.enabled (not (include "gatehouse.separateIdentity" .)) -}}
{{- $workers = 536870912 -}}
{{- end -}}
{{- include "gatehouse.goMemLimitOf" (list "resources.limits.memory" .Values.resources $workers) -}}
{{- end -}}
{{- end -}}

{{/*
gatehouse.runnerGoMemLimit is the sandbox runner's GOMEMLIMIT: 90% of its
memory limit less the render workers' 512Mi, which are processes of their
own (with a memory budget each, and no GOMEMLIMIT: their environment is
empty), in MiB, else nothing.
*/}}
{{- define "gatehouse.runnerGoMemLimit" -}}
{{- include "gatehouse.goMemLimitOf" (list "modules.configcheck.sandboxRunner.resources.limits.memory" .Values.modules.configcheck.sandboxRunner.resources 536870912) -}}
{{- end -}}

{{/*
gatehouse.goMemLimitOf (list name resources reservedBytes): 90% of the
memory limit in resources less reservedBytes, in MiB; nothing when there is
no limit or nothing is left. The limit is read as Kubernetes reads a
quantity: a decimal number (1.5, .5, 1e9, 15e2) with a binary (Ki, Mi, Gi,
Ti, Pi, Ei) or decimal (k, M, G, T, P, E) suffix, or a number YAML already
parsed (2147483648, 1e9). What it cannot read fails the render rather than
run without a soft limit.
*/}}
{{- define "gatehouse.goMemLimitOf" -}}
{{- $name := index . 0 -}}
{{- $raw := dig "limits" "memory" "" (index . 1 | default dict) -}}
{{- $reserved := index . 2 | float64 -}}
{{- if or (kindIs "float64" $raw) (kindIs "int" $raw) (kindIs "int64" $raw) -}}
{{- /* YAML's and --set's numbers: bytes. toString would write 2.147483648e+09. */ -}}
{{- $raw = printf "%.0f" (float64 $raw) -}}
{{- end -}}
{{- $limit := $raw | toString | trim -}}
{{- if $limit -}}
{{- $m := regexMatch `^([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$` $limit -}}
{{- if not $m -}}
{{- fail (printf "%s %q: not a memory quantity (want e.g. 512Mi, 1.5Gi, 1500M, 2G or bytes); set goMemLimit to choose GOMEMLIMIT yourself" $name $limit) -}}
{{- end -}}
{{- $units := dict "Ki" "1024" "Mi" "1048576" "Gi" "1073741824" "Ti" "1099511627776" "Pi" "1125899906842624" "Ei" "1152921504606846976" "k" "1e3" "M" "1e6" "G" "1e9" "T" "1e12" "P" "1e15" "E" "1e18" -}}
{{- $suffix := regexFind `(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)$` $limit -}}
{{- $bytes := float64 0 -}}
{{- if $suffix -}}
{{- $bytes = mulf (trimSuffix $suffix $limit | float64) (index $units $suffix | float64) -}}
{{- else -}}
{{- /* Plain bytes, or a decimal exponent (1e9), which float64 reads. */ -}}
{{- $bytes = float64 $limit -}}
{{- end -}}
{{- $mib := floor (divf (mulf (subf $bytes $reserved) 0.9) 1048576) -}}
{{- if gt $mib (float64 0) -}}
{{- printf "%.0fMiB" $mib -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
gatehouse.role renders a Role and its binding to Gatehouse's ServiceAccount,
labelled with the source of its rules (the core or a module).
Arguments: (list $ name namespace source rules).
*/}}
{{- define "gatehouse.role" -}}
{{- $ctx := index . 0 -}}
{{- $name := index . 1 -}}
{{- $ns := index . 2 -}}
{{- $source := index . 3 -}}
{{- $rules := index . 4 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels:
    {{- include "gatehouse.labels" $ctx | nindent 4 }}
    gatehouse.dev/rbac-for: {{ $source }}
rules:
{{- toYaml $rules | nindent 0 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels:
    {{- include "gatehouse.labels" $ctx | nindent 4 }}
    gatehouse.dev/rbac-for: {{ $source }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
subjects:
- kind: ServiceAccount
  name: {{ include "gatehouse.fullname" $ctx }}
  namespace: {{ $ctx.Release.Namespace }}
{{- end -}}

{{/* The client CA volume source with webhooks.clientAuth.enabled; fails unless exactly one of caSecret and caConfigMap is set. */}}
{{- define "gatehouse.clientCAVolume" -}}
{{- with .Values.webhooks.clientAuth }}
{{- if and .caSecret .caConfigMap }}
{{- fail "webhooks.clientAuth: set caSecret or caConfigMap, not both" }}
{{- else if .caSecret }}
secret:
  secretName: {{ .caSecret }}
  items:
  - key: {{ .caKey }}
    path: ca.crt
{{- else if .caConfigMap }}
configMap:
  name: {{ .caConfigMap }}
  items:
  - key: {{ .caKey }}
    path: ca.crt
{{- else }}
{{- fail "webhooks.clientAuth.enabled needs caSecret or caConfigMap: the CA that signed kube-apiserver's webhook client certificate" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
gatehouse.foreignCRDs: a JSON list of the enabled modules' CRDs that exist in
the cluster and belong to no Gatehouse release of this name and namespace
(Helm's meta.helm.sh/release-name and release-namespace annotations): Helm
would refuse to install over them ("exists and cannot be imported"), so the
chart renders them not and NOTES.txt says so. helm template and a dry run
without a cluster see none.
*/}}
{{- define "gatehouse.foreignCRDs" -}}
{{- $foreign := list -}}
{{- $external := .Values.crds.external | default list -}}
{{- if .Values.crds.install -}}
{{- range $module, $m := .Values.modules -}}
{{- if $m.enabled -}}
{{- range $path, $_ := $.Files.Glob (printf "files/generated/crds/%s/*.yaml" $module) -}}
{{- $name := base $path | trimSuffix ".yaml" -}}
{{- $live := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" $name -}}
{{- if has $name $external -}}
{{- $foreign = append $foreign $name -}}
{{- else if $live -}}
{{- $annotations := $live.metadata.annotations | default dict -}}
{{- if not (and (eq (index $annotations "meta.helm.sh/release-name" | default "") $.Release.Name) (eq (index $annotations "meta.helm.sh/release-namespace" | default "") $.Release.Namespace)) -}}
{{- $foreign = append $foreign $name -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $foreign -}}
{{- end -}}

{{/*
gatehouse.separateIdentity is "true" when configcheck's checks run in the
sandbox-runner container, under another user than the server.
*/}}
{{- define "gatehouse.separateIdentity" -}}
{{- if and .Values.modules.configcheck.enabled .Values.modules.configcheck.separateIdentity -}}
true
{{- end -}}
{{- end -}}

{{/*
gatehouse.serverUID is the server container's user: securityContext.runAsUser,
else the image's (65532). The runner serves this user alone.
*/}}
{{- define "gatehouse.serverUID" -}}
{{- (.Values.securityContext).runAsUser | default 65532 -}}
{{- end -}}
