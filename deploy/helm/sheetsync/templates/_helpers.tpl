{{/* The release's base name, at most 63 characters (DNS labels). */}}
{{- define "sheetsync.fullname" -}}
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

{{- define "sheetsync.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "worker-default"). */}}
{{- define "sheetsync.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sheetsync.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sheetsync.labels" -}}
{{ include "sheetsync.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: sheetsync
{{- end -}}

{{/* repository@sha256:...; rendering fails without a digest, or with anything else. */}}
{{- define "sheetsync.imageRef" -}}
{{- $digest := required "image.digest is required: name the image by digest (sha256:...), never by tag" .digest -}}
{{- if not (regexMatch "^sha256:[a-f0-9]{64}$" $digest) -}}
{{- fail (printf "image digest %q is not sha256:<64 hex digits>" $digest) -}}
{{- end -}}
{{- printf "%s@%s" (required "image.repository is required" .repository) $digest -}}
{{- end -}}

{{- define "sheetsync.image" -}}
{{ include "sheetsync.imageRef" .Values.image }}
{{- end -}}

{{/*
One environment variable from an existing Secret:
(dict "root" $ "env" "SHEETSYNC_REDIS_URL" "ref" .Values.secrets.redisUrl "what" "secrets.redisUrl").
*/}}
{{- define "sheetsync.secretEnv" -}}
{{- $name := default .root.Values.secrets.existingSecret .ref.name -}}
{{- $message := printf "%s.name (or secrets.existingSecret) must name an existing Secret holding %s" .what .env -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ required $message $name }}
      key: {{ required (printf "%s.key is required" .what) .ref.key }}
      {{- if .ref.optional }}
      optional: true
      {{- end }}
{{- end -}}

{{/* Redis and the broker: every process but migrate. */}}
{{- define "sheetsync.redisEnv" -}}
{{ include "sheetsync.secretEnv" (dict "root" . "env" "SHEETSYNC_REDIS_URL" "ref" .Values.secrets.redisUrl "what" "secrets.redisUrl") }}
{{ include "sheetsync.secretEnv" (dict "root" . "env" "SHEETSYNC_BROKER_URL" "ref" .Values.secrets.brokerUrl "what" "secrets.brokerUrl") }}
{{- end -}}

{{/* The plain settings of `config`, then the variables every container gets. */}}
{{- define "sheetsync.configEnv" -}}
{{- range $name, $value := .Values.config }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{- define "sheetsync.containerSecurityContext" -}}
{{ toYaml .Values.securityContext }}
{{- end -}}

{{- define "sheetsync.podSpecCommon" -}}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  - name: tmp
    emptyDir:
      sizeLimit: {{ .Values.tmpVolume.sizeLimit }}
{{- end -}}

{{- define "sheetsync.tmpMount" -}}
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- end -}}

{{- define "sheetsync.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
A heartbeat probe's command: `sheetsync health` for the process named NAME@<pod
hostname> (Celery's %h), as docker-compose.yml's healthchecks. "strict": fail when
Redis cannot be asked too (readiness, startup); otherwise pass then (liveness).
(dict "node" "default" "maxAge" 60 "strict" false)
*/}}
{{- define "sheetsync.healthCommand" -}}
- sh
- -c
{{- if .strict }}
- exec sheetsync health --max-age {{ .maxAge }} "{{ .node }}@$(hostname)"
{{- else }}
- |
  out=$(sheetsync health --max-age {{ .maxAge }} "{{ .node }}@$(hostname)" 2>&1)
  status=$?
  echo "$out"
  [ "$status" -eq 0 ] && exit 0
  case "$out" in *"no heartbeat within"*) exit 1 ;; esac
  echo "liveness: Redis could not be asked; not restarting for it"
{{- end }}
{{- end -}}

{{- define "sheetsync.probeTimings" -}}
periodSeconds: {{ .periodSeconds }}
failureThreshold: {{ .failureThreshold }}
timeoutSeconds: {{ .timeoutSeconds }}
{{- end -}}
