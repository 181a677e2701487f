package sim

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzShellParser feeds arbitrary scripts to the sim's sh -c parser (what
// exec commands and container commands go through) and the sleep argument
// parser: they must never panic or hang, must be deterministic, and what
// they produce must be something the interpreter handles: statements joined
// by "", ";", "&&" or "||" (the first by ""), output redirections of fd 1
// or 2 only (a statement left empty, such as "<0" once its input
// redirection is dropped, runs as true); a sleep is forever
// (-1) or a duration that is not negative and never shorter than any of
// its summed arguments alone.
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
	} {
		f.Add(s, "x")
	}
	f.Fuzz(func(t *testing.T, src, val string) {
		if len(src) > 4096 {
			return
		}
		env := map[string]string{"X": val, "HOME": "/root"}
		list, err := parseScript(src, env)
		again, err2 := parseScript(src, env)
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(list, again) {
			t.Fatalf("parseScript(%q) is not deterministic", src)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("parseScript(%q): empty error", src)
			}
			return
		}
		for i, s := range list {
			switch {
			case i == 0 && s.op != "":
				t.Fatalf("%q: first statement joined by %q", src, s.op)
			case i > 0 && s.op != ";" && s.op != "&&" && s.op != "||":
				t.Fatalf("%q: statement %d joined by %q", src, i, s.op)
			}
			for _, r := range s.redirs {
				if r.fd != 1 && r.fd != 2 {
					t.Fatalf("%q: statement %d redirects fd %d", src, i, r.fd)
				}
			}
			_ = echo(s.args)
			if len(s.args) > 0 && (s.args[0] == "sleep") {
				checkSleep(t, s.args[1:])
			}
		}
		if got, ok := shellScript([]string{"-c", src}); !ok || got != src {
			t.Fatalf("shellScript(-c %q) = %q %v", src, got, ok)
		}
		checkSleep(t, strings.Fields(src))
	})
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
	_ = time.Duration(d)
}
