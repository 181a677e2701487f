package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const ginkgoJSON = `[{"StartTime":"2026-11-26T19:00:00Z","RunTime":60000000000,"SpecReports":[
{"ContainerHierarchyTexts":["[sig-node] Pods"],"LeafNodeType":"It","LeafNodeText":"should get a host IP [NodeConformance] [Conformance]","State":"passed","StartTime":"2026-11-26T19:00:01Z"},
{"ContainerHierarchyTexts":["[sig-node] Pods"],"LeafNodeType":"It","LeafNodeText":"should be updated [NodeConformance] [Conformance]","State":"failed","StartTime":"2026-11-26T19:00:02Z",
 "Failure":{"Message":"\nTimed out after 60.001s.\nExpected\n    <string>: x\nto equal\n    <string>: y\nmore detail","Location":{"FileName":"/root/go/pkg/mod/k8s.io/kubernetes@v1.37.2/test/e2e/common/node/pods.go","LineNumber":370}}},
{"ContainerHierarchyTexts":["[sig-storage] ConfigMap"],"LeafNodeType":"It","LeafNodeText":"should be consumable from pods in volume [NodeConformance] [Conformance]","State":"passed","StartTime":"2026-11-26T19:00:03Z"},
{"ContainerHierarchyTexts":["[sig-storage] ConfigMap"],"LeafNodeType":"It","LeafNodeText":"filtered out","State":"skipped","StartTime":"2026-11-26T19:00:03Z"},
{"ContainerHierarchyTexts":["[sig-network] Networking","Granular Checks: Pods"],"LeafNodeType":"It","LeafNodeText":"needs two nodes [NodeConformance]","State":"skipped","StartTime":"2026-11-26T19:00:04Z","Failure":{"Message":"Requires at least 2 nodes"}},
{"ContainerHierarchyTexts":[],"LeafNodeType":"SynchronizedBeforeSuite","LeafNodeText":"","State":"passed"}
]}]`

const junitXML = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" failures="1">
 <testsuite name="Kubernetes e2e suite" timestamp="2026-11-26T19:00:00" time="60">
  <testcase name="[It] [sig-node] Pods should get a host IP [NodeConformance] [Conformance]" status="passed"></testcase>
  <testcase name="[It] [sig-node] Pods should be updated [NodeConformance] [Conformance]" status="failed"><failure type="failed">[FAILED] expected pod to be running
more detail</failure></testcase>
  <testcase name="[It] [sig-storage] ConfigMap filtered out" status="skipped"><skipped message="skipped"></skipped></testcase>
  <testcase name="[It] [sig-network] Networking should need two nodes [NodeConformance]" status="skipped"><skipped message="skipped - Requires at least 2 nodes"></skipped></testcase>
  <testcase name="[SynchronizedBeforeSuite] " status="passed"></testcase>
 </testsuite>
</testsuites>`

func TestLoad(t *testing.T) {
	tests := []struct {
		name       string
		file       string
		content    string
		wantPass   int
		wantTotal  int
		wantInDoc  []string
		wantSource string
	}{
		{
			name: "ginkgo JSON", file: "ginkgo.json", content: ginkgoJSON,
			wantPass: 2, wantTotal: 3, wantSource: "ginkgo.json",
			wantInDoc: []string{
				"**2/3 passed**; 1 skipped at run time",
				"| sig-node | 1 | 2 |",
				"| sig-storage | ConfigMap | 1 | 1 |",
				"- [sig-node] Pods should be updated [NodeConformance] [Conformance]: `Timed out after 60.001s. Expected <string>: x to equal <string>: y more detail` (test/e2e/common/node/pods.go:370)",
				"- [sig-network] Networking Granular Checks: Pods needs two nodes [NodeConformance]: Requires at least 2 nodes",
			},
		},
		{
			name: "JUnit", file: "junit_01.xml", content: junitXML,
			wantPass: 1, wantTotal: 2, wantSource: "junit_01.xml",
			wantInDoc: []string{
				"**1/2 passed**",
				"| sig-node | Pods | 1 | 2 |",
				"`[FAILED] expected pod to be running`",
				"Requires at least 2 nodes",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, tt.file), []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			run, err := Load(dir)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if p, tot := Totals(run.Specs); p != tt.wantPass || tot != tt.wantTotal {
				t.Errorf("Totals = %d/%d, want %d/%d", p, tot, tt.wantPass, tt.wantTotal)
			}
			if run.Source != tt.wantSource {
				t.Errorf("Source = %q, want %q", run.Source, tt.wantSource)
			}
			doc := Markdown(run)
			for _, w := range tt.wantInDoc {
				if !strings.Contains(doc, w) {
					t.Errorf("section lacks %q:\n%s", w, doc)
				}
			}
		})
	}
}

func TestReplaceSection(t *testing.T) {
	tests := []struct {
		name, before, want string
	}{
		{name: "markers present", before: "# T\n\nintro\n" + beginMarker + "\nold\n" + endMarker + "\ntail\n",
			want: "# T\n\nintro\n" + beginMarker + "\nnew\n" + endMarker + "\ntail\n"},
		{name: "no markers: appended", before: "# T\n",
			want: "# T\n\n" + beginMarker + "\nnew\n" + endMarker + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "doc.md")
			if err := os.WriteFile(p, []byte(tt.before), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := replaceSection(p, beginMarker+"\nnew\n"+endMarker+"\n"); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(p)
			if string(got) != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
