package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestBadFlagsExitTwo(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "unknown flag", args: []string{"--no-such-flag"}},
		{name: "not a duration", args: []string{"--sync-frequency", "soon"}},
		{name: "negative duration", args: []string{"--file-check-frequency", "-1s"}},
		{name: "port out of range", args: []string{"--port", "70000"}},
		{name: "bad address", args: []string{"--address", "localhost:1"}},
		{name: "bad endpoint", args: []string{"--container-runtime-endpoint", "tcp://1.2.3.4:5"}},
		{name: "relative socket", args: []string{"--container-runtime-endpoint", "unix://run/x.sock"}},
		{name: "bad manifest url", args: []string{"--manifest-url", "ftp://x/y"}},
		{name: "negative max pods", args: []string{"--max-pods", "-1"}},
		{name: "unknown chaos kind", args: []string{"--chaos-kinds", "pod,gremlin"}},
		{name: "negative chaos rate", args: []string{"--chaos-kill-rate", "-2"}},
		{name: "backoff max below initial", args: []string{"--crashloop-backoff-initial", "1m", "--crashloop-backoff-max", "10s"}},
		{name: "stray argument", args: []string{"extra"}},
		{name: "bad sim option", args: []string{"simruntime", "--fault-rate", "2"}},
		{name: "sim unknown flag", args: []string{"simruntime", "--bogus"}},
		{name: "webhook authorization in standalone", args: []string{"--authorization-mode", "Webhook"}},
		{name: "token webhook in standalone", args: []string{"--authentication-token-webhook"}},
		{name: "unknown authorization mode", args: []string{"--authorization-mode", "RBAC"}},
		{name: "cert without key", args: []string{"--tls-cert-file", "flags_test.go"}},
		{name: "missing client CA file", args: []string{"--client-ca-file", "/nonexistent/ca.crt"}},
		{name: "client CA is a directory", args: []string{"--client-ca-file", "."}},
		{name: "negative token cache ttl", args: []string{"--authentication-token-webhook-cache-ttl", "-1s"}},
		{name: "not a bool", args: []string{"--anonymous-auth=maybe"}},
		{name: "version not a bool", args: []string{"--version=maybe"}},
		{name: "version as a subcommand", args: []string{"version"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code := run(tt.args); code != exitUsage {
				t.Fatalf("run(%v) = %d, want %d", tt.args, code, exitUsage)
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	if code := run([]string{"--help"}); code != exitOK {
		t.Fatalf("--help: %d", code)
	}
}

func TestBuildVersion(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}}
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{name: "module version", bi: debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: rev}, want: "v1.2.3"},
		{name: "revision", bi: debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: rev}, want: "dev-0123456789ab"},
		{name: "modified tree", bi: debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: append(rev, debug.BuildSetting{Key: "vcs.modified", Value: "true"})}, want: "dev-0123456789ab-dirty"},
		{name: "nothing recorded", bi: debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := buildVersion(&tt.bi); got != tt.want {
				t.Fatalf("buildVersion = %q, want %q", got, tt.want)
			}
		})
	}
}

// Issue 9: no --version, and --help did not list the subcommands.
func TestVersionAndHelp(t *testing.T) {
	goVersion := regexp.QuoteMeta(runtime.Version())
	tests := []struct {
		name    string
		args    []string
		ldflags string   // main.version as -ldflags -X sets it
		want    []string // regexps the output matches
	}{
		{name: "version", args: []string{"--version"}, want: []string{`^actorlet \S+ \(` + goVersion + `\)\n$`}},
		{name: "version set at build time", args: []string{"--version"}, ldflags: "v1.2.3",
			want: []string{`^actorlet v1\.2\.3 \(` + goVersion + `\)\n$`}},
		{name: "version wins over the other flags", args: []string{"--max-pods", "-1", "--version"}, want: []string{`^actorlet `}},
		{name: "help lists the subcommands", args: []string{"--help"}, want: []string{
			`(?m)^  actorlet \[flags\] .*node agent`, `(?m)^  actorlet simruntime `, `actorlet-bench`,
			`--version`, `--pod-manifest-path string`}},
		{name: "-h too", args: []string{"-h"}, want: []string{`actorlet simruntime`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			stdout, version = &out, tt.ldflags
			t.Cleanup(func() { stdout, version = os.Stdout, "" })
			if code := run(tt.args); code != exitOK {
				t.Fatalf("run(%v) = %d, want 0", tt.args, code)
			}
			for _, w := range tt.want {
				if !regexp.MustCompile(w).MatchString(out.String()) {
					t.Errorf("output does not match %s:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	o := defaultOptions()
	o.Port = -1
	o.MaxPods = -3
	err := o.validate()
	if err == nil || !strings.Contains(err.Error(), "--port") || !strings.Contains(err.Error(), "--max-pods") {
		t.Fatalf("validate: %v", err)
	}
}

func TestSimOptionsFromEndpointQuery(t *testing.T) {
	tests := []struct {
		name    string
		query   string
		wantErr bool
	}{
		{name: "empty", query: ""},
		{name: "latency and faults", query: "start-latency=50ms&fault-rate=0.5&fault-seed=3"},
		{name: "unknown option", query: "colour=blue", wantErr: true},
		{name: "bad value", query: "start-latency=fast", wantErr: true},
		{name: "rate out of range", query: "fault-rate=7", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := simConfigFromQuery(tt.query)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tt.wantErr)
			}
			if tt.name == "latency and faults" && (cfg.StartLatency.String() != "50ms" || cfg.FaultRate != 0.5 || cfg.Seed != 3) {
				t.Fatalf("cfg %+v", cfg)
			}
		})
	}
}

func TestNodeAPISecurityDefaultsAreUpstreams(t *testing.T) {
	o := defaultOptions()
	if !o.AnonymousAuth || o.AuthorizationMode != "AlwaysAllow" || o.AuthenticationTokenWebhook ||
		o.AuthenticationTokenWebhookTTL.String() != "2m0s" || o.AuthorizationWebhookAuthorized.String() != "5m0s" ||
		o.AuthorizationWebhookUnauthorized.String() != "30s" {
		t.Fatalf("defaults %+v", o)
	}
	if got := o.certDir(); got != "/var/lib/kubelet/pki" {
		t.Fatalf("cert dir %q, want upstream's /var/lib/kubelet/pki with the default --root-dir", got)
	}
	o.RootDir = "/tmp/n1"
	if got := o.certDir(); got != "/tmp/n1/pki" {
		t.Fatalf("cert dir %q", got)
	}
	o.CertDir = "/etc/x"
	if got := o.certDir(); got != "/etc/x" {
		t.Fatalf("cert dir %q", got)
	}
	o = defaultOptions()
	o.Kubeconfig = "/some/kubeconfig"
	o.AuthorizationMode = "Webhook"
	o.AuthenticationTokenWebhook = true
	o.AnonymousAuth = false
	if err := o.validate(); err != nil {
		t.Fatalf("cluster-mode auth flags: %v", err)
	}
}

// Issue 9, failure 7: a default run (upstream's flag defaults, --address
// 0.0.0.0) refuses writes and exec without credentials from other machines
// and says so at Info; --insecure-anonymous-remote-writes opens them and
// the start-up log says so loudly (Warn), naming what is open to whom.
func TestNodeAPIExposureAtStart(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantLevel  slog.Level
		wantMsg    string
		wantAttrs  map[string]string // substrings of attributes
		remotePush int               // status of an anonymous POST /pods from another machine
	}{
		{name: "default", wantLevel: slog.LevelInfo,
			wantMsg:    "may read from any address; push, exec, attach, port-forward and /debug/ only from loopback",
			wantAttrs:  map[string]string{"address": "0.0.0.0:10250", "writes": "loopback"},
			remotePush: http.StatusForbidden},
		{name: "opened", args: []string{"--insecure-anonymous-remote-writes"}, wantLevel: slog.LevelWarn,
			wantMsg: "NODE API OPEN WITHOUT CREDENTIALS",
			wantAttrs: map[string]string{"to": "any machine that reaches 0.0.0.0:10250", "open": "POST /pods",
				"because": "--insecure-anonymous-remote-writes"},
			remotePush: http.StatusOK},
		{name: "opened on loopback only", args: []string{"--insecure-anonymous-remote-writes", "--address", "127.0.0.1"},
			wantLevel: slog.LevelWarn, wantMsg: "NODE API OPEN WITHOUT CREDENTIALS",
			wantAttrs: map[string]string{"to": "this machine only (--address 127.0.0.1)"}, remotePush: http.StatusOK},
		{name: "anonymous off", args: []string{"--anonymous-auth=false", "--insecure-anonymous-remote-writes"},
			wantLevel: slog.LevelInfo, wantMsg: "requests without credentials are refused", remotePush: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := defaultOptions()
			fs := pflag.NewFlagSet("actorlet", pflag.ContinueOnError)
			o.addFlags(fs)
			if err := fs.Parse(append(tt.args, "--root-dir", t.TempDir())); err != nil {
				t.Fatal(err)
			}
			if err := o.validate(); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			secure, err := nodeAPISecurity(o, "n1", "127.0.0.1", nil, log)
			if err != nil {
				t.Fatal(err)
			}
			var found map[string]any
			var warns int
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if rec["level"] == slog.LevelWarn.String() || rec["level"] == slog.LevelError.String() {
					warns++
				}
				if msg, _ := rec["msg"].(string); strings.Contains(msg, tt.wantMsg) {
					found = rec
				}
			}
			if found == nil {
				t.Fatalf("no start-up line with %q:\n%s", tt.wantMsg, buf.String())
			}
			if found["level"] != tt.wantLevel.String() {
				t.Fatalf("level %v, want %v: %v", found["level"], tt.wantLevel, found)
			}
			if tt.wantLevel < slog.LevelWarn && warns > 0 {
				t.Fatalf("a warning without the opening flag:\n%s", buf.String())
			}
			for k, want := range tt.wantAttrs {
				if got, _ := found[k].(string); !strings.Contains(got, want) {
					t.Errorf("attribute %s = %q, want it to contain %q", k, got, want)
				}
			}
			// What the flags built does what the line says.
			h := secure.auth.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
			r := httptest.NewRequest(http.MethodPost, "/pods", strings.NewReader("{}"))
			r.RemoteAddr = "203.0.113.5:4444"
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tt.remotePush {
				t.Fatalf("anonymous POST /pods from another machine: %d %q, want %d", rec.Code, rec.Body.String(), tt.remotePush)
			}
		})
	}
}

// kubeadm's preflight parses `kubelet --version` with this expression
// (cmd/kubeadm/app/preflight: kubeletVersionRegex); actorlet installed as
// kubelet must match it.
func TestVersionLineAsKubelet(t *testing.T) {
	re := regexp.MustCompile(`^\s*Kubernetes v((0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)([-0-9a-zA-Z_\.+]*)?)\s*$`)
	if got := versionLine("/usr/bin/kubelet"); !re.MatchString(got) {
		t.Errorf("as kubelet: %q does not match kubeadm's expression", got)
	}
	if got := versionLine("/usr/bin/actorlet"); !strings.HasPrefix(got, "actorlet ") {
		t.Errorf("as actorlet: %q", got)
	}
}
