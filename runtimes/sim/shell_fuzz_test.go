package sim

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"mvdan.cc/sh/v3/syntax"
)

// FuzzShellParser feeds arbitrary scripts to the sim's shell (what exec
// commands and container commands go through): the parser must never
// panic and must be deterministic; a script that parses runs, as an exec
// of a running container, to its end or its timeout without panicking,
// with an exit code of a byte; the sleep argument parser must never
// panic, and a sleep is forever (-1) or a duration that is not negative
// and never shorter than any of its summed arguments alone.
func FuzzShellParser(f *testing.F) {
	for _, s := range []string{
		"a; b && c || d",
		`echo 'a b' "c $X" d\ e`,
		"echo hi > /f 2>&1",
		"echo hi 2>>/err",
		"a # c\n\nb",
		"sleep 1 & wait",
		"echo ${Y:-dflt} ${X} $? $$ $1",
		"touch /tmp/ready; sleep infinity",
		"echo partial; exit 3",
		"while true; do echo x; done",
		"cat < /etc/hosts 1>&2 2>&-",
		"sleep 1e9d",
		"sleep 200000000 200000000 200000000 200000000 200000000",
		`echo "unterminated`,
		"${",
		"a &&",
		"2>",
		"echo \\\n continued",
		"cat <(echo x)",
		"f() { f; }; f",
		"alloc 1Mi; fill /d 1Mi; spawn 2; reap; free; rm /d",
	} {
		f.Add(s, "x")
	}
	e := newEnv(f, Config{})
	sb, sbCfg := e.runPod(f, "fuzz")
	id := e.create(f, sb, sbCfg, ctrConfig("c", "sleep", "infinity"))
	e.start(f, id)
	f.Fuzz(func(t *testing.T, src, val string) {
		if len(src) > 4096 {
			return
		}
		file, err := parseScript(src)
		again, err2 := parseScript(src)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("parseScript(%q) is not deterministic: %v, %v", src, err, err2)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("parseScript(%q): empty error", src)
			}
		} else if !reflect.DeepEqual(printed(t, file), printed(t, again)) {
			t.Fatalf("parseScript(%q) is not deterministic", src)
		}
		if got, _, _, ok := shellScript([]string{"-c", src}); !ok || got != src {
			t.Fatalf("shellScript(-c %q) = %q %v", src, got, ok)
		}
		checkSleep(t, strings.Fields(src))
		if err != nil {
			return
		}
		// A script that blocks or loops ends at the deadline.
		c, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		resp, err := e.r.ExecSync(c, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sh", "-c", src, "sh", val}})
		if err == nil && (resp.ExitCode < 0 || resp.ExitCode > 255) {
			t.Fatalf("%q: exit code %d", src, resp.ExitCode)
		}
	})
}

// printed is file as the syntax printer writes it.
func printed(t *testing.T, file *syntax.File) string {
	var b strings.Builder
	if err := syntax.NewPrinter().Print(&b, file); err != nil {
		t.Fatalf("print: %v", err)
	}
	return b.String()
}

func checkSleep(t *testing.T, args []string) {
	t.Helper()
	d, err := parseSleep(args)
	if err != nil {
		return
	}
	if d < 0 && d != -1 {
		t.Fatalf("sleep %q = %v: negative", args, d)
	}
	if d == -1 {
		return
	}
	for i := range args {
		one, err := parseSleep(args[i : i+1])
		if err == nil && (one == -1 || one > d) {
			t.Fatalf("sleep %q = %v, shorter than its argument %q alone (%v)", args, d, args[i], one)
		}
	}
}
