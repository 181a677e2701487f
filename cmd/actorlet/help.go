package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/pflag"
)

// The help of actorlet and of actorlet simruntime: a description, the
// usage lines, then the flags, in named sections for the agent (as
// upstream's components print theirs, component-base's NamedFlagSets),
// every line at most helpWidth columns.
const (
	// helpWidth is the column --help wraps at.
	helpWidth = 100
	// helpColumn is where a flag's help text starts; a flag whose name and
	// type reach past it has its help on the lines below, at this column.
	helpColumn = 34
	// helpSectionKey is the annotation that names a flag's help section.
	helpSectionKey = "actorlet/help-section"
)

// setHelpSection files f under the named section of `actorlet --help`.
func setHelpSection(f *pflag.Flag, section string) {
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[helpSectionKey] = []string{section}
}

// helpSection is the section f is filed under, "" if none.
func helpSection(f *pflag.Flag) string {
	if s := f.Annotations[helpSectionKey]; len(s) == 1 {
		return s[0]
	}
	return ""
}

// otherFlagsSection lists the flags filed under no section of flagSections,
// so that --help never leaves a flag out (the tests keep it empty).
const otherFlagsSection = "Other"

const agentDescription = `actorlet is a Kubernetes node agent (a kubelet) built as an actor system. ` +
	`It runs the pods of its node on a CRI container runtime: standalone, from static pod manifests ` +
	`(--pod-manifest-path, --manifest-url) and the node API, or in a cluster, from the API server ` +
	`(--kubeconfig). The simulated runtime is built in: --container-runtime-endpoint sim:// runs pods ` +
	`without containers, for tests and density measurements.`

const agentCommands = `Usage:
  actorlet [flags]               run the node agent
  actorlet simruntime [flags]    serve the simulated CRI runtime alone (actorlet simruntime --help)
  actorlet --version             print the version
`

const agentBenchNote = `Benchmarks, load generators and the fake CRI server are a separate command, ` +
	`actorlet-bench (actorlet-bench --help).`

// agentUsage is `actorlet --help`: what actorlet is, its commands, then the
// agent's flags section by section, in the order of flagSections.
func agentUsage(w io.Writer, fs *pflag.FlagSet) {
	var b strings.Builder
	b.WriteString(wrapText(agentDescription, 0, helpWidth))
	b.WriteString("\n\n")
	b.WriteString(agentCommands)
	b.WriteString("\n")
	b.WriteString(wrapText(agentBenchNote, 0, helpWidth))
	b.WriteString("\n")
	bySection := map[string][]*pflag.Flag{}
	fs.VisitAll(func(f *pflag.Flag) {
		s := helpSection(f)
		if !knownSection(s) {
			s = otherFlagsSection
		}
		bySection[s] = append(bySection[s], f)
	})
	names := make([]string, 0, len(flagSections)+1)
	for _, s := range flagSections {
		names = append(names, s.name)
	}
	for _, name := range append(names, otherFlagsSection) {
		if len(bySection[name]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s flags:\n\n", name)
		writeFlagUsages(&b, bySection[name])
	}
	_, _ = io.WriteString(w, b.String())
}

func knownSection(name string) bool {
	for _, s := range flagSections {
		if s.name == name {
			return true
		}
	}
	return false
}

// writeFlagUsages writes one entry per visible flag: "-s, --name type"
// from column 2 (column 6 without a shorthand), then its help with its
// default, wrapped at helpWidth from helpColumn.
func writeFlagUsages(b *strings.Builder, flags []*pflag.Flag) {
	for _, f := range flags {
		if f.Hidden {
			continue
		}
		head := "      --" + f.Name
		if f.Shorthand != "" && f.ShorthandDeprecated == "" {
			head = "  -" + f.Shorthand + ", --" + f.Name
		}
		varname, usage := pflag.UnquoteUsage(f)
		if varname != "" {
			head += " " + varname
		}
		if f.NoOptDefVal != "" && f.Value.Type() != "bool" {
			head += "[=" + f.NoOptDefVal + "]"
		}
		if d, ok := shownDefault(f); ok {
			usage += " (default" + nbsp + d + ")"
		}
		if f.Deprecated != "" {
			usage += " (DEPRECATED: " + f.Deprecated + ")"
		}
		b.WriteString(head)
		if n := utf8.RuneCountInString(head); n+2 > helpColumn {
			b.WriteString("\n")
			b.WriteString(strings.Repeat(" ", helpColumn))
		} else {
			b.WriteString(strings.Repeat(" ", helpColumn-n))
		}
		b.WriteString(wrapText(usage, helpColumn, helpWidth))
		b.WriteString("\n")
	}
}

// shownDefault is f's default as --help shows it (quoted for strings), and
// false when it is the zero value of its type, which help leaves out.
func shownDefault(f *pflag.Flag) (string, bool) {
	d := f.DefValue
	if f.Value.Type() == "string" {
		return fmt.Sprintf("%q", d), d != ""
	}
	switch d {
	case "", "0", "0s", "false", "[]", "map[]", "<nil>":
		return "", false
	}
	return d, true
}

// wrapText wraps s into lines of at most width columns, the first line
// starting at column indent (the caller has written what comes before it)
// and the others indented by indent spaces. Lines break at spaces (not at
// nbsp, which prints as one); a word longer than a line breaks after its
// last ',', '&', '|' or ';' that fits, else where the line ends. Newlines
// in s start a new line.
func wrapText(s string, indent, width int) string {
	avail := max(width-indent, 20)
	pad := strings.Repeat(" ", indent)
	var out strings.Builder
	for i, para := range strings.Split(s, "\n") {
		if i > 0 {
			out.WriteString("\n" + pad)
		}
		n := 0 // columns used on this line
		for _, word := range strings.Fields(para) {
			for {
				wn := utf8.RuneCountInString(word)
				switch {
				case n == 0:
				case n+1+wn > avail:
					out.WriteString("\n" + pad)
					n = 0
				default:
					out.WriteString(" ")
					n++
				}
				if wn <= avail-n {
					out.WriteString(strings.ReplaceAll(word, nbsp, " "))
					n += wn
					break
				}
				head, rest := splitWord(word, avail-n)
				out.WriteString(strings.ReplaceAll(head, nbsp, " "))
				n += utf8.RuneCountInString(head)
				word = rest
			}
		}
	}
	return out.String()
}

// nbsp joins words that wrapText keeps on one line ("(default" and its
// value); it prints as a space.
const nbsp = "\x00"

// splitWord splits word after the last ',', '&', '|' or ';' among its first
// n runes, else after n runes (at least one).
func splitWord(word string, n int) (head, rest string) {
	r := []rune(word)
	n = max(n, 1)
	for i := n - 1; i > 0; i-- {
		if strings.ContainsRune(",&|;", r[i]) {
			return string(r[:i+1]), string(r[i+1:])
		}
	}
	return string(r[:n]), string(r[n:])
}

const simRuntimeDescription = `actorlet simruntime serves the simulated CRI runtime on its own, so that ` +
	`any CRI client (the upstream kubelet included) can use it. Nothing runs: containers ` +
	`"run" a small shell subset read from their command and args, in memory, with the latencies, ` +
	`faults and node capacity the flags below set. The agent runs the same runtime in-process with ` +
	`--container-runtime-endpoint sim://, the flags as query options (sim://?start-latency=50ms&fault-rate=0.01).`

// simRuntimeUsage is `actorlet simruntime --help`.
func simRuntimeUsage(w io.Writer, fs *pflag.FlagSet) {
	var b strings.Builder
	b.WriteString(wrapText(simRuntimeDescription, 0, helpWidth))
	b.WriteString("\n\nUsage:\n  actorlet simruntime [flags]\n\nFlags:\n\n")
	var flags []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) { flags = append(flags, f) })
	writeFlagUsages(&b, flags)
	_, _ = io.WriteString(w, b.String())
}
