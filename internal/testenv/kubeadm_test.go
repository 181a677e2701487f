package testenv

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSplitWords(t *testing.T) {
	vars := map[string]string{
		"ARGS":  "--a=1  --b=2",
		"EMPTY": "",
		"ONE":   "x y",
	}
	tests := []struct {
		name string
		in   string
		vars map[string]string
		want []string
		err  string
	}{
		{name: "plain words", in: "/bin/x  a\tb", want: []string{"/bin/x", "a", "b"}},
		{name: "double quotes keep spaces", in: `"KEY=a b" C=d`, want: []string{"KEY=a b", "C=d"}},
		{name: "single quotes", in: `'a "b"' c`, want: []string{`a "b"`, "c"}},
		{name: "backslash escapes", in: `a\ b "c\"d"`, want: []string{"a b", `c"d`}},
		{name: "$VAR word splits", in: "/bin/x $ARGS y", vars: vars, want: []string{"/bin/x", "--a=1", "--b=2", "y"}},
		{name: "empty $VAR is no word", in: "/bin/x $EMPTY $UNSET y", vars: vars, want: []string{"/bin/x", "y"}},
		{name: "${VAR} is one word", in: "/bin/x ${ONE}", vars: vars, want: []string{"/bin/x", "x y"}},
		{name: "${VAR} inside a word", in: "--f=${ONE}!", vars: vars, want: []string{"--f=x y!"}},
		{name: "quoted $VAR is one word", in: `"$ONE"`, vars: vars, want: []string{"x y"}},
		{name: "$$ is a dollar", in: "a$$b", vars: vars, want: []string{"a$b"}},
		{name: "no expansion without vars", in: "$ARGS", want: []string{"$ARGS"}},
		{name: "unterminated quote", in: `"abc`, err: "unterminated"},
		{name: "bad reference", in: "${A", vars: vars, err: "bad variable reference"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := splitWords(tc.in, tc.vars)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("splitWords(%q) error %v, want one containing %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("splitWords(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseEnvironmentFile(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
		err  string
	}{
		{
			name: "kubeadm-flags.env as kubeadm writes it (Go %q)",
			in:   "KUBELET_KUBEADM_ARGS=\"--hostname-override=n1 --register-with-taints=a=b:NoSchedule\"\n",
			want: []string{"KUBELET_KUBEADM_ARGS=--hostname-override=n1 --register-with-taints=a=b:NoSchedule"},
		},
		{
			name: "comments, blanks, unquoted values trimmed, later wins in order",
			in:   "# c\n; c\n\nA = x y  \nB='q \"r\"'\nA=z\n",
			want: []string{"A=x y", `B=q "r"`, "A=z"},
		},
		{name: "escaped quote", in: `A="a\"b"`, want: []string{`A=a"b`}},
		{name: "continuation", in: "A=a\\\nb", want: []string{"A=ab"}},
		{name: "not an assignment", in: "--flag", err: "line 1: not KEY=VALUE"},
		{name: "bad name", in: "1A=x", err: "not KEY=VALUE"},
		{name: "unterminated", in: `A="x`, err: "unterminated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEnvironmentFile([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// installUnits puts deploy/systemd's files into dir as deploy/install.sh
// names them (kubelet.service and its drop-in), unchanged.
func installUnits(t *testing.T, dir string) {
	t.Helper()
	root := RepoRoot(t)
	copyFile := func(src, dst string) {
		b, err := os.ReadFile(filepath.Join(root, src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("deploy/systemd/actorlet.service", filepath.Join(dir, "kubelet.service"))
	copyFile("deploy/systemd/10-kubeadm.conf", filepath.Join(dir, "kubelet.service.d", "10-kubeadm.conf"))
}

// The committed unit and drop-in start actorlet with kubeadm's flags, the
// flags kubeadm join writes and the user's KUBELET_EXTRA_ARGS, in that order.
func TestKubeadmDropInCommand(t *testing.T) {
	dir := t.TempDir()
	installUnits(t, dir)
	u, err := LoadUnit(dir, "kubelet")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name: "before kubeadm join: no env files",
			want: []string{"/usr/bin/actorlet",
				"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
				"--config=/var/lib/kubelet/config.yaml"},
		},
		{
			name: "after kubeadm join, with /etc/default/kubelet",
			files: map[string]string{
				"/var/lib/kubelet/kubeadm-flags.env": "KUBELET_KUBEADM_ARGS=\"--hostname-override=n1\"\n",
				"/etc/default/kubelet":               "KUBELET_EXTRA_ARGS=--root-dir=/srv/a --node-ip=10.0.0.5\n",
			},
			want: []string{"/usr/bin/actorlet",
				"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
				"--config=/var/lib/kubelet/config.yaml", "--hostname-override=n1", "--root-dir=/srv/a", "--node-ip=10.0.0.5"},
		},
		{
			name: "an env file overrides Environment=",
			files: map[string]string{
				"/etc/default/kubelet": "KUBELET_CONFIG_ARGS=--config=/other.yaml\n",
			},
			want: []string{"/usr/bin/actorlet",
				"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
				"--config=/other.yaml"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			read := func(p string) ([]byte, error) {
				if s, ok := tc.files[p]; ok {
					return []byte(s), nil
				}
				return nil, os.ErrNotExist
			}
			argv, _, err := u.Command(read)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(argv, tc.want) {
				t.Fatalf("argv %q, want %q", argv, tc.want)
			}
		})
	}
}

func TestLoadUnitErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		err   string
	}{
		{name: "missing unit", err: "not found"},
		{
			name:  "two ExecStart without reset",
			files: map[string]string{"kubelet.service": "[Service]\nExecStart=/a\n", "kubelet.service.d/10.conf": "[Service]\nExecStart=/b\n"},
			err:   "2 ExecStart= lines",
		},
		{
			name:  "no ExecStart",
			files: map[string]string{"kubelet.service": "[Unit]\nDescription=x\n"},
			err:   "no ExecStart=",
		},
		{
			name:  "bad Environment",
			files: map[string]string{"kubelet.service": "[Service]\nEnvironment=novalue\nExecStart=/a\n"},
			err:   `"novalue" is not KEY=VALUE`,
		},
		{
			name:  "relative EnvironmentFile",
			files: map[string]string{"kubelet.service": "[Service]\nEnvironmentFile=x.env\nExecStart=/a\n"},
			err:   "not an absolute path",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := LoadUnit(dir, "kubelet")
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("LoadUnit error %v, want one containing %q", err, tc.err)
			}
		})
	}
	if _, err := LoadUnit(t.TempDir(), "kubelet"); !errors.Is(err, ErrUnitNotFound) {
		t.Fatalf("missing unit: %v, want ErrUnitNotFound", err)
	}
}

// The stand-in starts the unit's command as systemd would, reports it
// active, and stops it; unknown units are inactive, as kubeadm expects of
// e.g. systemd-resolved.
func TestSystemctlStandIn(t *testing.T) {
	unitDir, stateDir := t.TempDir(), t.TempDir()
	envFile := filepath.Join(t.TempDir(), "extra.env")
	out := filepath.Join(t.TempDir(), "args")
	if err := os.WriteFile(envFile, []byte(`EXTRA="b c"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unit := "[Service]\nEnvironment=\"A=a\"\nEnvironmentFile=" + envFile + "\nEnvironmentFile=-/nonexistent/file\n" +
		"ExecStart=/bin/sh -c 'echo \"$0 $*\" > " + out + "; exec sleep 600' $A $EXTRA\n"
	if err := os.WriteFile(filepath.Join(unitDir, "kubelet.service"), []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvSystemctlUnitDir, unitDir)
	t.Setenv(EnvSystemctlStateDir, stateDir)
	t.Cleanup(func() { _ = StopService(stateDir, "kubelet") })

	run := func(args ...string) (int, string) {
		var o, e bytes.Buffer
		code := SystemctlMain(args, &o, &e)
		return code, strings.TrimSpace(o.String() + e.String())
	}
	steps := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{name: "kubelet inactive before start", args: []string{"is-active", "kubelet"}, code: 3, out: "inactive"},
		{name: "kubelet enabled (unit exists)", args: []string{"is-enabled", "kubelet"}, code: 0, out: "enabled"},
		{name: "unknown unit is inactive", args: []string{"is-active", "systemd-resolved"}, code: 3, out: "inactive"},
		{name: "unknown unit status", args: []string{"status", "firewalld"}, code: 4, out: "could not be found"},
		{name: "daemon-reload", args: []string{"daemon-reload"}, code: 0},
		{name: "restart starts it", args: []string{"restart", "kubelet"}, code: 0},
		{name: "active after start", args: []string{"is-active", "kubelet.service"}, code: 0, out: "active"},
		{name: "status running", args: []string{"status", "kubelet"}, code: 0, out: "Active: active (running)"},
		{name: "unsupported command", args: []string{"mask", "kubelet"}, code: 1, out: `command "mask" is not supported`},
	}
	for _, s := range steps {
		code, got := run(s.args...)
		if code != s.code || !strings.Contains(got, s.out) {
			t.Fatalf("%s: systemctl %q = %d %q, want %d and %q", s.name, s.args, code, got, s.code, s.out)
		}
	}
	pid, ok := ServicePID(stateDir, "kubelet")
	if !ok {
		t.Fatal("no pid after start")
	}
	WaitFor(t, 10*time.Second, "the service's arguments", func() (bool, error) {
		b, err := os.ReadFile(out)
		return err == nil && strings.TrimSpace(string(b)) == "a b c", err
	})
	if code, got := run("stop", "kubelet"); code != 0 {
		t.Fatalf("stop: %d %q", code, got)
	}
	if processAlive(pid) {
		t.Fatalf("pid %d still alive after stop", pid)
	}
	if code, got := run("is-active", "kubelet"); code != 3 || got != "inactive" {
		t.Fatalf("after stop: is-active = %d %q", code, got)
	}
}
