{{- define "breakglass.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "breakglass.serviceAccountName" -}}
{{- default (include "breakglass.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "breakglass.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "breakglass.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The pod: the same in a Deployment and in a CronJob's Job; only the arguments differ. */}}
{{- define "breakglass.podSpec" -}}
serviceAccountName: {{ include "breakglass.serviceAccountName" . }}
automountServiceAccountToken: true
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
containers:
  - name: breakglass
    image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    args:
      - exporter
      {{- if eq .Values.mode "cronjob" }}
      - --once
      - --push={{ required "cronjob mode needs cronjob.pushgateway (a Prometheus Pushgateway URL)" .Values.cronjob.pushgateway }}
      {{- else }}
      - --listen=0.0.0.0:{{ .Values.port }}
      {{- end }}
      {{- if and (ne .Values.mode "cronjob") (not .Values.findings.enabled) }}
      - --no-findings
      {{- end }}
      - --interval={{ .Values.interval }}
      {{- with .Values.targetVersion }}
      - --target-version={{ . }}
      {{- end }}
    {{- if ne .Values.mode "cronjob" }}
    ports:
      - name: metrics
        containerPort: {{ .Values.port }}
        protocol: TCP
    livenessProbe:
      httpGet: {path: /healthz, port: metrics}
    readinessProbe:
      httpGet: {path: /healthz, port: metrics}
    {{- end }}
    volumeMounts:
      - name: tmp  # the root filesystem is read-only; Python and the kubernetes client may want a temp dir
        mountPath: /tmp
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities:
        drop: [ALL]
    {{- with .Values.resources }}
    resources:
      {{- toYaml . | nindent 6 }}
    {{- end }}
volumes:
  - name: tmp
    emptyDir: {}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
