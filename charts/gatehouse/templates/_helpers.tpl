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
{{- else -}}
{{- printf "%s-serving-cert" (include "gatehouse.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "gatehouse.certMode" -}}
{{- $mode := .Values.certificates.mode -}}
{{- if not (has $mode (list "certManager" "selfSigned" "secret")) -}}
{{- fail (printf "certificates.mode %q: want certManager, selfSigned or secret" $mode) -}}
{{- end -}}
{{- $mode -}}
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

{{/*
The self-signed CA and serving certificate (selfSigned mode) as JSON
{ca, crt, key}, base64-encoded. An existing Secret is reused (lookup), so an
upgrade keeps the certificate; otherwise they are generated once per render
and memoized, so the Secret and every caBundle agree.
*/}}
{{- define "gatehouse.selfSignedCerts" -}}
{{- if not (hasKey .Values "gatehouseGeneratedCerts") -}}
{{- $secretName := include "gatehouse.certSecretName" . -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $secretName -}}
{{- $certs := dict -}}
{{- if and $existing $existing.data (index $existing.data "ca.crt") (index $existing.data "tls.crt") (index $existing.data "tls.key") -}}
{{- $certs = dict "ca" (index $existing.data "ca.crt") "crt" (index $existing.data "tls.crt") "key" (index $existing.data "tls.key") -}}
{{- else -}}
{{- $svc := include "gatehouse.serviceName" . -}}
{{- $days := int .Values.certificates.selfSigned.validityDays -}}
{{- $ca := genCA (printf "%s-ca" (include "gatehouse.fullname" .)) $days -}}
{{- $dns := list (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) -}}
{{- $cert := genSignedCert (first $dns) nil $dns $days $ca -}}
{{- $certs = dict "ca" ($ca.Cert | b64enc) "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc) -}}
{{- end -}}
{{- $_ := set .Values "gatehouseGeneratedCerts" $certs -}}
{{- end -}}
{{- toJson .Values.gatehouseGeneratedCerts -}}
{{- end -}}

{{/* The base64 CA bundle for caBundle fields; empty with cert-manager (its cainjector writes it). */}}
{{- define "gatehouse.caBundle" -}}
{{- $mode := include "gatehouse.certMode" . -}}
{{- if eq $mode "selfSigned" -}}
{{- (include "gatehouse.selfSignedCerts" . | fromJson).ca -}}
{{- else if eq $mode "secret" -}}
{{- required "certificates.secret.caBundle (base64 PEM CA) is required with certificates.mode=secret" .Values.certificates.secret.caBundle -}}
{{- end -}}
{{- end -}}

{{/* The cainjector annotation, certManager mode only. */}}
{{- define "gatehouse.caInjectAnnotation" -}}
{{- if eq (include "gatehouse.certMode" .) "certManager" -}}
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

{{/* The enabled modules' generated webhook entries of one kind. Arguments: (list $ "validating"|"mutating"). */}}
{{- define "gatehouse.webhooks" -}}
{{- $ctx := index . 0 -}}
{{- $kind := index . 1 -}}
{{- range $name, $m := $ctx.Values.modules -}}
{{- if $m.enabled -}}
{{- $file := $ctx.Files.Get (printf "files/generated/webhooks/%s/%s.yaml" $name $kind) -}}
{{- if $file }}
{{ include "gatehouse.fill" (list $ctx $file) | trim }}
{{- end -}}
{{- end -}}
{{- end -}}
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

{{- define "gatehouse.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
