package manifest_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/actorlet/actorlet/adapters/manifest"
)

// maxFuzzManifest bounds a fuzzed manifest (the sources cap files and
// bodies far higher; the properties do not depend on size).
const maxFuzzManifest = 64 << 10

// FuzzDecodeAndValidate feeds arbitrary bytes to the exported entry points
// the sources and the push endpoint use (DecodeDocuments, Decode,
// ApplyDefaults, Validate) and checks that they never panic and agree:
// every document error names its document, Decode fails exactly when a
// document does, and a pod that validates encodes and decodes back to one
// pod that still validates.
func FuzzDecodeAndValidate(f *testing.F) {
	for _, dir := range []string{"../../deploy/examples", "../../deploy/push"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	for _, s := range []string{
		"",
		"---\n---\n",
		"null",
		"[]",
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"}}`,
		`{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i"}]}},{"kind":"Service"}]}`,
		`{"apiVersion":"v1","kind":"List","items":[{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}}]}`,
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {\"bad key!\": x}}\nspec: {containers: [{name: c, image: i}]}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: i, resources: {requests: {cpu: 100000000, memory: 999Pi}}}]}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: good}\nspec: {containers: [{name: c, image: i}]}\n---\nkind: Pod\napiVersion: v1\nmetadata: {name: Bad_Name}\n---\n: [\n",
		"a: &a [*a, *a]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: i, ports: [{containerPort: 99999, hostPort: -1}]}], volumes: [{name: v, hostPath: {path: /}}]}\n",
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\",\"creationTimestamp\":\"9999-12-31T23:59:59Z\"}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzManifest {
			return
		}
		docs, errs := manifest.DecodeDocuments(data)
		last := 0
		for _, d := range docs {
			if d.Pod == nil || d.Index < 1 || d.Index < last {
				t.Fatalf("document %d: pod %v (index out of order after %d)", d.Index, d.Pod, last)
			}
			last = d.Index
			if d.Pod.Kind != "Pod" || d.Pod.APIVersion != "v1" {
				t.Fatalf("document %d decoded as %s/%s", d.Index, d.Pod.APIVersion, d.Pod.Kind)
			}
		}
		for _, err := range errs {
			var de *manifest.DocumentError
			if !errors.As(err, &de) || de.Index < 1 || de.Err == nil || err.Error() == "" {
				t.Fatalf("error %v (%T) does not name its document", err, err)
			}
		}
		pods, err := manifest.Decode(data)
		if (err != nil) != (len(errs) > 0) {
			t.Fatalf("Decode error %v, DecodeDocuments errors %v", err, errs)
		}
		if err == nil && len(pods) != len(docs) {
			t.Fatalf("Decode gave %d pods, DecodeDocuments %d", len(pods), len(docs))
		}
		for _, d := range docs {
			// Validate as given and as the sources default it; neither
			// may panic.
			_ = manifest.Validate(d.Pod.DeepCopy())
			p := d.Pod.DeepCopy()
			manifest.ApplyDefaults(p, "file", "fuzz-node", "/etc/kubernetes/manifests/fuzz.yaml")
			if manifest.Validate(p) != nil {
				continue
			}
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatalf("a valid pod does not encode: %v", err)
			}
			again, err := manifest.Decode(b)
			if err != nil || len(again) != 1 {
				t.Fatalf("a valid pod, encoded, does not decode to one pod: %d pods, %v\n%s", len(again), err, b)
			}
			if err := manifest.Validate(again[0]); err != nil {
				t.Fatalf("a valid pod is invalid after encoding and decoding: %v\n%s", err, b)
			}
		}
	})
}
