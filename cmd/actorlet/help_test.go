package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/spf13/pflag"
)

// helpOutput is what `actorlet args...` prints, for args that print help.
func helpOutput(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	stdout = &out
	t.Cleanup(func() { stdout = os.Stdout })
	if code := run(args); code != exitOK {
		t.Fatalf("run(%v) = %d, want 0", args, code)
	}
	if out.Len() == 0 {
		t.Fatalf("run(%v) printed nothing", args)
	}
	return out.String()
}

// Issue 28: --help had lines of up to ~400 characters.
func TestHelpWrapsAt100Columns(t *testing.T) {
	const maxColumns = 100 // the issue's, whatever helpWidth says
	for _, args := range [][]string{{"--help"}, {"-h"}, {"simruntime", "--help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out := helpOutput(t, args...)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) < 20 {
				t.Fatalf("%d lines of help, want the flags:\n%s", len(lines), out)
			}
			for i, l := range lines {
				if n := utf8.RuneCountInString(l); n > maxColumns {
					t.Errorf("line %d is %d columns (max %d): %q", i+1, n, maxColumns, l)
				}
				if strings.TrimRight(l, " ") != l {
					t.Errorf("line %d ends in spaces: %q", i+1, l)
				}
			}
		})
	}
}

var (
	sectionHeader = regexp.MustCompile(`^(\S.*) flags:$`)
	// a flag's entry starts at column 2 (with a shorthand) or 6; its
	// help's next lines start at helpColumn.
	flagEntry = regexp.MustCompile(`^(?:  -[a-zA-Z], |      )--([a-z0-9-]+)`)
)

// helpSections reads --help: the section headers in order, and for each
// flag the sections it is listed in.
func helpSections(out string) (order []string, in map[string][]string) {
	in = map[string][]string{}
	section := ""
	for _, l := range strings.Split(out, "\n") {
		if m := sectionHeader.FindStringSubmatch(l); m != nil {
			section = m[1]
			order = append(order, section)
			continue
		}
		if m := flagEntry.FindStringSubmatch(l); m != nil {
			in[m[1]] = append(in[m[1]], section)
		}
	}
	return order, in
}

func TestHelpListsEveryFlagInExactlyOneSection(t *testing.T) {
	_, in := helpSections(helpOutput(t, "--help"))
	fs := pflag.NewFlagSet("actorlet", pflag.ContinueOnError)
	defaultOptions().addFlags(fs)
	registered := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) {
		registered[f.Name] = true
		switch got := in[f.Name]; {
		case len(got) != 1:
			t.Errorf("--%s is listed in %d sections %q, want 1", f.Name, len(got), got)
		case got[0] == "":
			t.Errorf("--%s is listed before any section", f.Name)
		case got[0] == otherFlagsSection:
			t.Errorf("--%s has no section of its own; add it to one of flagSections", f.Name)
		case got[0] != helpSection(f):
			t.Errorf("--%s is listed under %q, registered under %q", f.Name, got[0], helpSection(f))
		}
	})
	if len(registered) < 80 {
		t.Fatalf("%d flags registered, want the agent's (80 or more)", len(registered))
	}
	for name := range in {
		if !registered[name] {
			t.Errorf("help lists --%s, which is not a flag", name)
		}
	}
}

func TestHelpSectionsInOrder(t *testing.T) {
	order, _ := helpSections(helpOutput(t, "--help"))
	var want []string
	for _, s := range flagSections {
		want = append(want, s.name)
	}
	if strings.Join(order, "\n") != strings.Join(want, "\n") {
		t.Fatalf("sections:\n  %s\nwant (flagSections, every one with flags):\n  %s",
			strings.Join(order, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestHelpUsageLines(t *testing.T) {
	out := helpOutput(t, "--help")
	for _, w := range []string{
		`(?m)^Usage:\n  actorlet \[flags\] +run the node agent$`,
		`(?m)^  actorlet simruntime \[flags\] +serve the simulated CRI runtime alone`,
		`(?m)^  actorlet --version +print the version$`,
		`actorlet-bench`,
	} {
		if !regexp.MustCompile(w).MatchString(out) {
			t.Errorf("--help does not match %s:\n%s", w, out)
		}
	}
	sim := helpOutput(t, "simruntime", "--help")
	for _, w := range []string{`(?m)^Usage:\n  actorlet simruntime \[flags\]$`, `(?m)^      --listen string +\S`, `(?m)^      --fault-rate float +\S`} {
		if !regexp.MustCompile(w).MatchString(sim) {
			t.Errorf("simruntime --help does not match %s:\n%s", w, sim)
		}
	}
}

// A flag filed under no section still shows, under "Other flags:".
func TestHelpListsUnsectionedFlags(t *testing.T) {
	fs := pflag.NewFlagSet("actorlet", pflag.ContinueOnError)
	defaultOptions().addFlags(fs)
	fs.Bool("stray", false, "A flag added outside flagSections.")
	var out bytes.Buffer
	agentUsage(&out, fs)
	order, in := helpSections(out.String())
	if got := in["stray"]; len(got) != 1 || got[0] != otherFlagsSection {
		t.Fatalf("--stray listed in %q, want [%q]", got, otherFlagsSection)
	}
	if order[len(order)-1] != otherFlagsSection {
		t.Fatalf("sections %q: want %q last", order, otherFlagsSection)
	}
}

func TestFlagEntries(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("short", "x", "A string.")
	fs.String("empty", "", "No default shown.")
	fs.Duration("a-rather-long-flag-name-for-a-duration", 0, "Help below the flag.")
	fs.IntP("verbose", "v", 3, "With a shorthand.")
	fs.Bool("on", true, "A bool on by default.")
	fs.StringSlice("list", nil, "A `name` from the help.")
	var flags []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) { flags = append(flags, f) })
	var b strings.Builder
	writeFlagUsages(&b, flags)
	col := strings.Repeat(" ", helpColumn)
	want := "" +
		"      --a-rather-long-flag-name-for-a-duration duration\n" +
		col + "Help below the flag.\n" +
		"      --empty string" + strings.Repeat(" ", helpColumn-len("      --empty string")) + "No default shown.\n" +
		"      --list name" + strings.Repeat(" ", helpColumn-len("      --list name")) + "A name from the help.\n" +
		"      --on" + strings.Repeat(" ", helpColumn-len("      --on")) + "A bool on by default. (default true)\n" +
		"      --short string" + strings.Repeat(" ", helpColumn-len("      --short string")) + `A string. (default "x")` + "\n" +
		"  -v, --verbose int" + strings.Repeat(" ", helpColumn-len("  -v, --verbose int")) + "With a shorthand. (default 3)\n"
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWrapText(t *testing.T) {
	tests := []struct {
		name          string
		s             string
		indent, width int
		want          string
	}{
		{name: "fits", s: "one two three", indent: 0, width: 30, want: "one two three"},
		{name: "breaks at spaces", s: "aaaa bbbb cccc dddd eeee ffff", indent: 0, width: 20,
			want: "aaaa bbbb cccc dddd\neeee ffff"},
		{name: "indents the next lines", s: "aaaa bbbb cccc dddd eeee ffff", indent: 4, width: 24,
			want: "aaaa bbbb cccc dddd\n    eeee ffff"},
		{name: "squeezes spaces", s: "a   b\tc", indent: 0, width: 30, want: "a b c"},
		{name: "newline starts a line", s: "first\nsecond", indent: 2, width: 30, want: "first\n  second"},
		{name: "nbsp keeps words together", s: "aaaa bbbb cccc dddd (default" + nbsp + "x)", indent: 0, width: 22,
			want: "aaaa bbbb cccc dddd\n(default x)"},
		{name: "long word breaks after a comma", s: "x a=1,bb=2,ccc=3,dddd=4,eeeee=5", indent: 0, width: 20,
			want: "x\na=1,bb=2,ccc=3,\ndddd=4,eeeee=5"},
		{name: "long word without a comma breaks at the width", s: strings.Repeat("z", 45), indent: 0, width: 20,
			want: strings.Repeat("z", 20) + "\n" + strings.Repeat("z", 20) + "\n" + strings.Repeat("z", 5)},
		{name: "counts runes, not bytes", s: "ééééé ééééé ééééé ééééé", indent: 0, width: 20,
			want: "ééééé ééééé ééééé\nééééé"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wrapText(tt.s, tt.indent, tt.width); got != tt.want {
				t.Fatalf("wrapText(%q, %d, %d) =\n%s\nwant:\n%s", tt.s, tt.indent, tt.width, got, tt.want)
			}
		})
	}
}
