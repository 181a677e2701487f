package manifest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// errDigest is the ContentDigest of err ("" when it names no content).
func errDigest(err error) string {
	var c *ContentError
	if errors.As(err, &c) {
		return c.ContentDigest()
	}
	return ""
}

// A skipped manifest's error names the content it is about, so the source
// can warn once per content: the same file listed again gives the same
// digest; the file changed but still broken the same way gives another.
func TestSkippedManifestErrorsNameTheirContent(t *testing.T) {
	noImage := strings.Replace(podYAML, "    image: nginx:1.25\n", "", 1)
	tests := []struct {
		name    string
		content string // the bad file
		changed string // another content with the same error
		wantErr string
	}{
		{name: "undecodable", content: "kind: [", changed: "kind:  [", wantErr: "a.yaml: document 1"},
		{name: "invalid field", content: noImage, changed: noImage + "# edited\n", wantErr: "spec.containers[0].image: Required value"},
		{name: "duplicate name", content: podYAML, changed: podYAML + "# edited\n", wantErr: "duplicate of the pod in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"0.yaml": podYAML, "a.yaml": tt.content})
			list := func() error {
				t.Helper()
				_, errs := DirLister{Dir: dir, NodeName: "n1"}.List(context.Background())
				if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.wantErr) {
					t.Fatalf("errs = %v, want one with %q", errs, tt.wantErr)
				}
				return errs[0]
			}
			first := list()
			again := list()
			if errDigest(first) == "" || errDigest(again) != errDigest(first) {
				t.Fatalf("digests %q then %q of the same content, want one and the same", errDigest(first), errDigest(again))
			}
			if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(tt.changed), 0o644); err != nil {
				t.Fatal(err)
			}
			changed := list()
			if changed.Error() != first.Error() {
				t.Fatalf("the edit changed the error: %q, was %q", changed, first)
			}
			if errDigest(changed) == errDigest(first) {
				t.Fatal("another content, the same digest")
			}
		})
	}

	t.Run("url body", func(t *testing.T) {
		body := noImage
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }))
		defer srv.Close()
		l := URLLister{URL: srv.URL, NodeName: "n1", Client: srv.Client()}
		_, errs := l.List(context.Background())
		_, errs2 := l.List(context.Background())
		body = noImage + "# edited\n"
		_, errs3 := l.List(context.Background())
		if len(errs) != 1 || len(errs2) != 1 || len(errs3) != 1 {
			t.Fatalf("errs %v, %v, %v: want one each", errs, errs2, errs3)
		}
		if d := errDigest(errs[0]); d == "" || errDigest(errs2[0]) != d || errDigest(errs3[0]) == d {
			t.Fatalf("digests %q %q %q: want the same twice, then another", d, errDigest(errs2[0]), errDigest(errs3[0]))
		}
	})
}
