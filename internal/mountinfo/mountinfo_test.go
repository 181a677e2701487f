package mountinfo

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestUnescape(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{name: "plain", in: "/var/lib/x", want: "/var/lib/x"},
		{name: "space", in: `/a\040b`, want: "/a b"},
		{name: "trailing backslash", in: `/a\`, want: `/a\`},
		{name: "not an octal escape", in: `/a\9zz`, want: `/a\9zz`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Unescape(tt.in); got != tt.want {
				t.Errorf("%q -> %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestPointsUnder(t *testing.T) {
	table := filepath.Join(t.TempDir(), "mountinfo")
	lines := "22 1 0:21 / /proc rw,nosuid - proc proc rw\n" +
		"30 22 0:40 / /r/pods/u/volumes/s rw - tmpfs tmpfs rw\n" +
		"31 30 0:41 / /r/pods/u/volumes/s/deeper rw - tmpfs tmpfs rw\n" +
		"32 22 0:42 / /r/pods/u\\040v rw - tmpfs tmpfs rw\n" +
		"33 22 0:43 / /rr/pods rw - tmpfs tmpfs rw\n" +
		"short line\n"
	if err := os.WriteFile(table, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := PointsUnder(table, "/r/")
	want := []string{"/r/pods/u/volumes/s/deeper", "/r/pods/u/volumes/s", "/r/pods/u v"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("got %q %v, want %q (deepest first, not /rr)", got, err, want)
	}
	if _, err := PointsUnder(filepath.Join(t.TempDir(), "none"), "/"); err == nil {
		t.Error("a missing table read as empty")
	}
}
