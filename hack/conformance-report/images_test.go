package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/actorlet/actorlet/internal/testenv"
)

// TestConformanceImagesAreUpstreams checks that every image
// deploy/local/conformance.sh builds carries a name the e2e suite of the
// pinned version asks for (test/utils/image/manifest.go), so that a version
// bump that renames one fails here, in `make test`, and not an hour into
// `make conformance`.
func TestConformanceImagesAreUpstreams(t *testing.T) {
	script, err := os.ReadFile("../../deploy/local/conformance.sh")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../../deploy/conformance/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("deploy/conformance/go.mod requires no k8s.io/kubernetes")
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	manifest := filepath.Join(strings.TrimSpace(string(out)), "k8s.io", "kubernetes@"+string(m[1]), "test", "utils", "image", "manifest.go")
	src, err := os.ReadFile(manifest)
	if errors.Is(err, fs.ErrNotExist) {
		// Not fetched yet on this machine: the module proxy has it.
		dl := exec.Command("go", "mod", "download", "k8s.io/kubernetes@"+string(m[1]))
		dl.Dir = filepath.Join(testenv.RepoRoot(t), "deploy", "conformance")
		dl.Env = append(os.Environ(), "GOWORK=off")
		if b, derr := dl.CombinedOutput(); derr != nil {
			testenv.CannotRun(t, fmt.Sprintf("the e2e suite's source cannot be fetched: %v\n%s", derr, b))
		}
		src, err = os.ReadFile(manifest)
	}
	if err != nil {
		t.Fatalf("the e2e suite's image manifest: %v", err)
	}
	registries := map[string]string{}
	for _, r := range regexp.MustCompile(`(\w+Registry):\s+"([^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		registries[r[1]] = r[2]
	}
	upstream := map[string]bool{}
	for _, c := range regexp.MustCompile(`Config\{list\.(\w+), "([^"]+)", "([^"]+)"\}`).FindAllStringSubmatch(string(src), -1) {
		upstream[registries[c[1]]+"/"+c[2]+":"+c[3]] = true
	}
	if len(upstream) == 0 {
		t.Fatalf("no image configs found in %s", manifest)
	}

	body := regexp.MustCompile(`(?s)image_refs\(\) \{.*?<<EOF\n(.*?)\nEOF`).FindSubmatch(script)
	if body == nil {
		t.Fatal("no image_refs heredoc in deploy/local/conformance.sh")
	}
	registry := regexp.MustCompile(`(?m)^E2E_REGISTRY=(\S+)`).FindSubmatch(script)
	if registry == nil {
		t.Fatal("no E2E_REGISTRY in deploy/local/conformance.sh")
	}
	for _, line := range strings.Split(string(body[1]), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		ref := strings.ReplaceAll(f[0], "$E2E_REGISTRY", string(registry[1]))
		t.Run(ref, func(t *testing.T) {
			if !upstream[ref] {
				t.Errorf("conformance.sh builds %s (archive %s), which k8s.io/kubernetes@%s's e2e suite does not name", ref, f[1], m[1])
			}
		})
	}
}
