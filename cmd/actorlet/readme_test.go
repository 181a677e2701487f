package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/adapters/manifest"
)

// Issue 9: the README pushed deploy/examples/web.yaml, which `make run`
// already runs as a static pod (two default/web-actorlet-demo), and `make
// run`'s "its logs" line named a container that logs nothing. What the
// README and `make run` tell a newcomer to push is not one of the pods
// `make run` runs, and every log they point at is of an existing pod and
// container that writes something.
func TestQuickstartHintsMatchTheManifests(t *testing.T) {
	root := filepath.Join("..", "..")
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	makefile, readme := read("Makefile"), read("README.md")
	arg := func(flag string) string {
		t.Helper()
		m := regexp.MustCompile(`--` + flag + ` (\S+)`).FindStringSubmatch(makefile)
		if m == nil {
			t.Fatalf("make run has no --%s", flag)
		}
		return m[1]
	}
	node := arg("hostname-override")
	static, errs := manifest.DirLister{Dir: filepath.Join(root, arg("pod-manifest-path")), NodeName: node}.List(context.Background())
	if len(errs) > 0 || len(static) == 0 {
		t.Fatalf("make run's pods: %d, errors %v", len(static), errs)
	}
	pods, running := map[string]*v1.Pod{}, map[string]bool{}
	for _, p := range static {
		pods[p.Namespace+"/"+p.Name], running[p.Namespace+"/"+p.Name] = p, true
	}
	for _, doc := range []struct{ name, text string }{{"Makefile", makefile}, {"README.md", readme}} {
		pushes := regexp.MustCompile(`--data-binary @(\S+)`).FindAllStringSubmatch(doc.text, -1)
		if len(pushes) == 0 {
			t.Errorf("%s pushes no pod", doc.name)
		}
		for _, m := range pushes {
			p, err := pushDecoder(node)([]byte(read(m[1])))
			if err != nil {
				t.Fatalf("%s pushes %s: %v", doc.name, m[1], err)
			}
			key := p.Namespace + "/" + p.Name
			if running[key] {
				t.Errorf("%s pushes %s: %s, which make run already runs", doc.name, m[1], key)
			}
			pods[key] = p
		}
	}
	for _, doc := range []struct{ name, text string }{{"Makefile", makefile}, {"README.md", readme}} {
		logs := regexp.MustCompile(`containerLogs/([a-z0-9-]+)/([a-z0-9.-]+)/([a-z0-9-]+)`).FindAllStringSubmatch(doc.text, -1)
		for _, m := range logs {
			p := pods[m[1]+"/"+m[2]]
			if p == nil {
				t.Errorf("%s shows the logs of pod %s/%s, which is neither run nor pushed", doc.name, m[1], m[2])
				continue
			}
			var c *v1.Container
			for i := range p.Spec.Containers {
				if p.Spec.Containers[i].Name == m[3] {
					c = &p.Spec.Containers[i]
				}
			}
			if c == nil {
				t.Errorf("%s shows the logs of container %s, which pod %s/%s does not have", doc.name, m[3], m[1], m[2])
				continue
			}
			if cmd := strings.Join(append(c.Command, c.Args...), " "); !strings.Contains(cmd, "echo") {
				t.Errorf("%s shows the logs of %s/%s/%s, whose command (%s) writes nothing", doc.name, m[1], m[2], m[3], cmd)
			}
		}
	}
}
