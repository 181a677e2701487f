package main

import (
	"os"
	"strings"
	"testing"
)

// TestHelp: --help prints both command lines and every flag, wrapped at
// 100 columns, on stdout, and exits 0; for fake-cri too.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"actorlet-bench [flags]", "actorlet-bench fake-cri [flags]", "--scenario", "--against", "--after-delete", "--actorlet"}},
		{[]string{"-h"}, []string{"--scenario"}},
		{[]string{"fake-cri", "--help"}, []string{"actorlet-bench fake-cri --listen", "--calls-file", "--image-size"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out strings.Builder
			stdout = &out
			defer func() { stdout = os.Stdout }()
			if code := run(tc.args); code != exitOK {
				t.Fatalf("exit %d, want %d", code, exitOK)
			}
			help := out.String()
			for _, w := range tc.want {
				if !strings.Contains(help, w) {
					t.Errorf("help lacks %q:\n%s", w, help)
				}
			}
			for i, line := range strings.Split(help, "\n") {
				if n := len([]rune(line)); n > helpColumns {
					t.Errorf("line %d has %d columns (over %d): %q", i+1, n, helpColumns, line)
				}
			}
		})
	}
}

// TestUsageErrors: a bad flag or a stray argument is exit 2, before any
// agent starts.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--nope"},
		{"--scenario", "standalone-sim", "stray"},
		{"bench", "--scenario", "standalone-sim"}, // the old subcommand name
		{"--scenario", "standalone-sim", "--cpu-profile-after-ready", "1s"},
		{"fake-cri", "--listen", "unix:///tmp/x.sock", "extra"},
	} {
		if code := run(args); code != exitUsage {
			t.Errorf("run(%q) = %d, want %d", args, code, exitUsage)
		}
	}
}
