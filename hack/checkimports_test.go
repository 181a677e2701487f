// Package hack holds the repository's scripts; this test checks that
// check-imports.sh catches every import docs/DESIGN.md forbids, on a small
// module made for each case.
package hack

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const mod = "github.com/actorlet/actorlet"

// allowedTree follows every rule: the imports docs/DESIGN.md allows.
var allowedTree = map[string]string{
	"go.mod":                      "module " + mod + "\n\ngo 1.22\n",
	"errdefs/errdefs.go":          "package errdefs\n",
	"podspec/podspec.go":          "package podspec\n",
	"messages/messages.go":        "package messages\n",
	"actors/pod/pod.go":           pkg("pod", "messages", "errdefs", "podspec", "actors/probe"),
	"actors/probe/probe.go":       pkg("probe", "messages"),
	"adapters/httpapi/httpapi.go": pkg("httpapi", "messages", "errdefs"),
	"adapters/manifest/m.go":      pkg("manifest", "messages", "podspec"),
	"adapters/cri/cri.go":         pkg("cri", "errdefs", "podspec"),
	"runtimes/sim/sim.go":         pkg("sim", "adapters/cri"),
	"adapters/kube/kube.go":       pkg("kube", "errdefs"),
	"supervisors/supervisors.go":  pkg("supervisors", "messages"),
	// Test files may use anything (fakes, live trees).
	"actors/pod/pod_test.go": pkg("pod", "adapters/cri", "supervisors"),
	"cmd/actorlet/main.go":   pkg("main", "actors/pod", "adapters/cri", "adapters/httpapi", "supervisors"),
}

// pkg is a Go file of package name importing the module's packages imps.
func pkg(name string, imps ...string) string {
	var b strings.Builder
	b.WriteString("package " + name + "\n\n")
	for _, imp := range imps {
		b.WriteString("import _ \"" + mod + "/" + imp + "\"\n")
	}
	return b.String()
}

func TestCheckImports(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("skipping: no go command in PATH")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("skipping: no bash")
	}
	tests := []struct {
		name string
		file string // added to allowedTree
		body string
		want string            // "" : the check passes
		more map[string]string // further files added to allowedTree
	}{
		{name: "allowed imports"},
		{name: "adapter imports supervisors (old debug page)", file: "adapters/httpapi/debug.go",
			body: pkg("httpapi", "supervisors"), want: "adapters/httpapi imports " + mod + "/supervisors"},
		{name: "adapter imports an actor", file: "adapters/httpapi/x.go",
			body: pkg("httpapi", "actors/pod"), want: "adapters/httpapi imports " + mod + "/actors/pod"},
		{name: "actor imports an adapter", file: "actors/probe/x.go",
			body: pkg("probe", "adapters/kube"), want: "actors/probe imports " + mod + "/adapters/kube"},
		{name: "actor imports supervisors", file: "actors/probe/x.go",
			body: pkg("probe", "supervisors"), want: "actors/probe imports " + mod + "/supervisors"},
		{name: "outbound adapter imports messages", file: "adapters/kube/x.go",
			body: pkg("kube", "messages"), want: "adapters/kube imports " + mod + "/messages"},
		{name: "sim runtime imports messages", file: "runtimes/sim/x.go",
			body: pkg("sim", "messages"), want: "runtimes/sim imports " + mod + "/messages"},
		{name: "nvml imports an actor", file: "adapters/nvml/nvml.go",
			body: pkg("nvml", "actors/probe"), want: "adapters/nvml imports " + mod + "/actors/probe"},
		{name: "messages import errdefs", file: "messages/x.go",
			body: pkg("messages", "errdefs"), want: "messages imports " + mod + "/errdefs"},
		{name: "podspec imports messages", file: "podspec/x.go",
			body: pkg("podspec", "messages"), want: "podspec imports " + mod + "/messages"},
		{name: "errdefs imports podspec", file: "errdefs/x.go",
			body: pkg("errdefs", "podspec"), want: "errdefs imports " + mod + "/podspec"},
		{name: "supervisors import an adapter", file: "supervisors/x.go",
			body: pkg("supervisors", "adapters/httpapi"), want: "supervisors imports " + mod + "/adapters/httpapi"},
		{name: "supervisors import an actor", file: "supervisors/x.go",
			body: pkg("supervisors", "actors/probe"), want: "supervisors imports " + mod + "/actors/probe"},
		{name: "a name that only starts like a rule's is not in it", file: "adaptersextra/x.go",
			body: pkg("adaptersextra", "supervisors")},
		{name: "the agent links the bench harness", file: "cmd/actorlet/bench.go",
			body: pkg("main", "internal/bench"), more: map[string]string{"internal/bench/bench.go": "package bench\n"},
			want: "cmd/actorlet links " + mod + "/internal/bench"},
		{name: "the agent links the fake CRI through an adapter", file: "adapters/httpapi/x.go",
			body: pkg("httpapi", "internal/fakecri"), more: map[string]string{"internal/fakecri/fakecri.go": "package fakecri\n"},
			want: "cmd/actorlet links " + mod + "/internal/fakecri"},
		{name: "the agent links the fake systemd through an adapter", file: "adapters/httpapi/x.go",
			body: pkg("httpapi", "internal/fakesystemd"), more: map[string]string{"internal/fakesystemd/fakesystemd.go": "package fakesystemd\n"},
			want: "cmd/actorlet links " + mod + "/internal/fakesystemd"},
		{name: "the agent links package testing", file: "cmd/actorlet/x.go",
			body: "package main\n\nimport _ \"testing\"\n", want: "cmd/actorlet links testing"},
		{name: "an adapter builds on the kubelet plugin helper", file: "adapters/dra/x.go",
			body: "package dra\n\nimport _ \"k8s.io/dynamic-resource-allocation/kubeletplugin\"\n",
			want: "adapters/dra imports k8s.io/dynamic-resource-allocation/kubeletplugin"},
		{name: "the DRA test driver may build on the kubelet plugin helper", file: "test/dradriver/main.go",
			body: "package main\n\nimport _ \"k8s.io/dynamic-resource-allocation/kubeletplugin\"\n"},
		{name: "the bench command and tests may link the bench and the fakes", file: "cmd/actorlet-bench/main.go",
			body: pkg("main", "internal/bench", "internal/fakecri"), more: map[string]string{
				"internal/bench/bench.go":     "package bench\n",
				"internal/fakecri/fakecri.go": "package fakecri\n",
				"cmd/actorlet/main_test.go":   pkg("main", "internal/bench"),
			}},
	}
	script, err := filepath.Abs("check-imports.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			files := map[string]string{}
			for p, b := range allowedTree {
				files[p] = b
			}
			if tc.file != "" {
				files[tc.file] = tc.body
			}
			for p, b := range tc.more {
				files[p] = b
			}
			for p, b := range files {
				p = filepath.Join(dir, p)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("bash", script, dir)
			cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("check failed on allowed imports: %v\n%s", err, out)
			case tc.want != "" && !(errors.As(err, &exit) && exit.ExitCode() == 1):
				t.Fatalf("want exit status 1, got %v\n%s", err, out)
			case !strings.Contains(string(out), tc.want):
				t.Fatalf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}
