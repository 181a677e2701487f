// Command conformance-report summarises a run of the upstream e2e suite
// (deploy/local/conformance.sh run): passed/total by area (the [sig-*] tag)
// and by category (the outermost Describe text, such as "Pods" or
// "ConfigMap"), and the failed specs with the first line of their failure
// message. It reads ginkgo's JSON report (ginkgo.json) when the report dir
// has one, else the e2e framework's JUnit XML (junit_01.xml).
//
//	go run ./hack/conformance-report -dir REPORT_DIR [-doc docs/CONFORMANCE.md]
//
// With -doc it replaces what lies between the markers
// "<!-- conformance-results:begin -->" and "<!-- conformance-results:end -->"
// in that file (appending them when missing); without, it prints the section.
package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

const (
	beginMarker = "<!-- conformance-results:begin -->"
	endMarker   = "<!-- conformance-results:end -->"
)

// Spec is one selected spec of a run.
type Spec struct {
	Area     string // sig-node
	Category string // Pods
	Name     string // the full text without the leading [It]
	State    string // passed, failed, skipped (at run time), timedout, panicked, ...
	Message  string // the first line of the failure (or skip) message
	Location string // file:line of the failure
}

// Run is what a report dir holds.
type Run struct {
	Source      string
	Started     time.Time
	Duration    time.Duration
	Specs       []Spec
	SuiteErrors []string // a failed BeforeSuite and the like: "node: first line"
}

func main() {
	dir := flag.String("dir", "", "report dir of a run (holds ginkgo.json or junit_01.xml)")
	doc := flag.String("doc", "", "markdown file whose results section is replaced (default: print it)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: conformance-report -dir REPORT_DIR [-doc FILE]")
		os.Exit(2)
	}
	run, err := Load(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance-report:", err)
		os.Exit(1)
	}
	section := Markdown(run)
	if *doc == "" {
		fmt.Print(section)
		return
	}
	if err := replaceSection(*doc, section); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-report:", err)
		os.Exit(1)
	}
	p, t := Totals(run.Specs)
	fmt.Fprintf(os.Stderr, "conformance-report: %d/%d passed; wrote %s\n", p, t, *doc)
}

// Load reads the report of the run in dir.
func Load(dir string) (Run, error) {
	if b, err := os.ReadFile(filepath.Join(dir, "ginkgo.json")); err == nil {
		r, err := ParseGinkgoJSON(bytes.NewReader(b))
		if err != nil {
			return Run{}, fmt.Errorf("%s: %w", filepath.Join(dir, "ginkgo.json"), err)
		}
		r.Source = "ginkgo.json"
		return r, nil
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "junit*.xml"))
	if len(matches) == 0 {
		return Run{}, fmt.Errorf("no ginkgo.json or junit*.xml in %s", dir)
	}
	f, err := os.Open(matches[0])
	if err != nil {
		return Run{}, fmt.Errorf("open junit report: %w", err)
	}
	defer f.Close()
	r, err := ParseJUnit(f)
	if err != nil {
		return Run{}, fmt.Errorf("%s: %w", matches[0], err)
	}
	r.Source = filepath.Base(matches[0])
	return r, nil
}

// ginkgo's JSON report (github.com/onsi/ginkgo/v2/types.Report), the fields used.
type ginkgoReport struct {
	StartTime   time.Time
	RunTime     time.Duration
	SpecReports []struct {
		ContainerHierarchyTexts []string
		LeafNodeType            string
		LeafNodeText            string
		State                   string
		Failure                 struct {
			Message  string
			Location struct {
				FileName   string
				LineNumber int
			}
		}
	}
}

// ParseGinkgoJSON reads ginkgo's --json-report. Specs the focus and skip
// filtered out (skipped, never started) are left out; specs skipped while
// running (e2eskipper) stay, as skipped.
func ParseGinkgoJSON(r io.Reader) (Run, error) {
	var reports []ginkgoReport
	if err := json.NewDecoder(r).Decode(&reports); err != nil {
		return Run{}, fmt.Errorf("decode ginkgo JSON report: %w", err)
	}
	var run Run
	for _, rep := range reports {
		if run.Started.IsZero() {
			run.Started = rep.StartTime
		}
		run.Duration += rep.RunTime
		for _, s := range rep.SpecReports {
			msg := firstLine(s.Failure.Message)
			if s.LeafNodeType != "It" {
				if s.State != "passed" && s.State != "skipped" && msg != "" {
					run.SuiteErrors = append(run.SuiteErrors, fmt.Sprintf("%s: %s", s.LeafNodeType, msg))
				}
				continue
			}
			if s.State == "skipped" && msg == "" {
				continue // filtered out by the focus and skip (no reason, unlike e2eskipper's)
			}
			if s.State == "pending" {
				continue
			}
			name := strings.Join(append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText), " ")
			first := ""
			if len(s.ContainerHierarchyTexts) > 0 {
				first = s.ContainerHierarchyTexts[0]
			}
			area, cat := classify(first)
			loc := ""
			if s.Failure.Location.FileName != "" {
				loc = fmt.Sprintf("%s:%d", trimPath(s.Failure.Location.FileName), s.Failure.Location.LineNumber)
			}
			run.Specs = append(run.Specs, Spec{Area: area, Category: cat, Name: name, State: s.State, Message: msg, Location: loc})
		}
	}
	return run, nil
}

type junitSuites struct {
	Suites []struct {
		Timestamp string  `xml:"timestamp,attr"`
		Time      float64 `xml:"time,attr"`
		Cases     []struct {
			Name    string `xml:"name,attr"`
			Status  string `xml:"status,attr"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

var ginkgoNodeType = regexp.MustCompile(`^\[(It|BeforeSuite|AfterSuite|SynchronizedBeforeSuite|SynchronizedAfterSuite|ReportBeforeSuite|ReportAfterSuite|DeferCleanup \([^)]*\))\] `)

// ParseJUnit reads the e2e framework's junit_01.xml. The category is the
// text between the [sig-*] tag and the first " should " or " when "
// (the JUnit names do not separate the Describe texts).
func ParseJUnit(r io.Reader) (Run, error) {
	var doc junitSuites
	if err := xml.NewDecoder(r).Decode(&doc); err != nil {
		return Run{}, fmt.Errorf("decode JUnit XML: %w", err)
	}
	var run Run
	for _, s := range doc.Suites {
		if t, err := time.Parse("2006-01-02T15:04:05", s.Timestamp); err == nil && run.Started.IsZero() {
			run.Started = t
		}
		run.Duration += time.Duration(s.Time * float64(time.Second))
		for _, c := range s.Cases {
			m := ginkgoNodeType.FindStringSubmatch(c.Name)
			name := strings.TrimSpace(ginkgoNodeType.ReplaceAllString(c.Name, ""))
			state := c.Status
			msg := ""
			switch {
			case c.Failure != nil:
				msg = firstLine(c.Failure.Message + "\n" + c.Failure.Text)
			case c.Error != nil:
				msg = firstLine(c.Error.Message + "\n" + c.Error.Text)
			case c.Skipped != nil:
				msg = strings.TrimPrefix(strings.TrimPrefix(c.Skipped.Message, "skipped"), " - ")
			}
			if m != nil && m[1] != "It" {
				if state != "passed" && state != "skipped" && msg != "" {
					run.SuiteErrors = append(run.SuiteErrors, fmt.Sprintf("%s: %s", m[1], msg))
				}
				continue
			}
			if state == "skipped" && msg == "" || state == "pending" {
				continue // filtered out
			}
			area, cat := classify(name)
			if i := indexAny(cat, " should ", " when ", " with ", " on "); i > 0 {
				cat = cat[:i]
			}
			run.Specs = append(run.Specs, Spec{Area: area, Category: cat, Name: name, State: state, Message: msg})
		}
	}
	return run, nil
}

var (
	sigTag = regexp.MustCompile(`\[(sig-[a-z-]+)\]`)
	anyTag = regexp.MustCompile(`\s*\[[^\]]*\]`)
)

// classify splits "[sig-node] Pods [NodeConformance]" into ("sig-node", "Pods").
func classify(text string) (area, category string) {
	area = "other"
	if m := sigTag.FindStringSubmatch(text); m != nil {
		area = m[1]
	}
	category = strings.TrimSpace(anyTag.ReplaceAllString(text, ""))
	if category == "" {
		category = "-"
	}
	return area, category
}

func indexAny(s string, subs ...string) int {
	best := -1
	for _, sub := range subs {
		if i := strings.Index(s, sub); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// firstLine is the first non-empty line of a failure message, with the
// next lines joined to it while it says too little on its own (gomega's
// "Timed out after 60s." or "Expected" before the values), at most 300
// characters.
func firstLine(s string) string {
	var out string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if out != "" {
			out += " "
		}
		out += l
		if len(out) >= 120 || !(strings.HasPrefix(out, "Timed out after") || strings.HasPrefix(out, "Expected") || strings.HasSuffix(out, ":") || strings.HasSuffix(out, ",")) {
			break
		}
	}
	if len(out) > 300 {
		out = out[:297] + "..."
	}
	return out
}

func trimPath(p string) string {
	if i := strings.Index(p, "/test/e2e/"); i >= 0 {
		return p[i+1:]
	}
	return filepath.Base(p)
}

func passed(s Spec) bool { return s.State == "passed" }

// counted: the specs in the figures; skipped ones (a precondition this
// cluster does not meet, as e2eskipper decides) are listed apart.
func counted(s Spec) bool { return s.State != "skipped" }

// Totals counts the passed and the counted specs.
func Totals(specs []Spec) (pass, total int) {
	for _, s := range specs {
		if !counted(s) {
			continue
		}
		total++
		if passed(s) {
			pass++
		}
	}
	return pass, total
}

type tally struct{ pass, total int }

// Markdown is the results section of docs/CONFORMANCE.md.
func Markdown(run Run) string {
	var b strings.Builder
	pass, total := Totals(run.Specs)
	fmt.Fprintln(&b, beginMarker)
	fmt.Fprintf(&b, "### Results\n\n")
	when := "unknown time"
	if !run.Started.IsZero() {
		when = run.Started.UTC().Format("2006-01-02 15:04 UTC")
	}
	fmt.Fprintf(&b, "Run of %s, %s (from %s). **%d/%d passed**", when, run.Duration.Round(time.Second), run.Source, pass, total)
	skipped := 0
	for _, s := range run.Specs {
		if !counted(s) {
			skipped++
		}
	}
	if skipped > 0 {
		fmt.Fprintf(&b, "; %d skipped at run time (listed below)", skipped)
	}
	fmt.Fprintf(&b, ".\n\n")
	if len(run.SuiteErrors) > 0 {
		fmt.Fprintf(&b, "Suite-level failures:\n\n")
		for _, e := range run.SuiteErrors {
			fmt.Fprintf(&b, "- %s\n", mdEscape(e))
		}
		fmt.Fprintln(&b)
	}

	areas := map[string]*tally{}
	cats := map[[2]string]*tally{}
	for _, s := range run.Specs {
		if !counted(s) {
			continue
		}
		a := areas[s.Area]
		if a == nil {
			a = &tally{}
			areas[s.Area] = a
		}
		k := [2]string{s.Area, s.Category}
		c := cats[k]
		if c == nil {
			c = &tally{}
			cats[k] = c
		}
		a.total++
		c.total++
		if passed(s) {
			a.pass++
			c.pass++
		}
	}
	fmt.Fprintf(&b, "| Area | Passed | Total |\n|---|---:|---:|\n")
	for _, a := range sortedKeys(areas) {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", a, areas[a].pass, areas[a].total)
	}
	fmt.Fprintf(&b, "\n| Area | Category | Passed | Total |\n|---|---|---:|---:|\n")
	keys := make([][2]string, 0, len(cats))
	for k := range cats {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %s | %d | %d |\n", k[0], mdEscape(k[1]), cats[k].pass, cats[k].total)
	}

	var failed, skippedSpecs []Spec
	for _, s := range run.Specs {
		switch {
		case !counted(s):
			skippedSpecs = append(skippedSpecs, s)
		case !passed(s):
			failed = append(failed, s)
		}
	}
	sort.Slice(failed, func(i, j int) bool { return failed[i].Name < failed[j].Name })
	fmt.Fprintf(&b, "\n#### Failures (%d)\n\n", len(failed))
	if len(failed) == 0 {
		fmt.Fprintln(&b, "None.")
	}
	for _, s := range failed {
		state := ""
		if s.State != "failed" {
			state = " (" + s.State + ")"
		}
		loc := ""
		if s.Location != "" {
			loc = " (" + s.Location + ")"
		}
		fmt.Fprintf(&b, "- %s%s: `%s`%s\n", mdEscape(s.Name), state, strings.ReplaceAll(s.Message, "`", "'"), loc)
	}
	if len(skippedSpecs) > 0 {
		sort.Slice(skippedSpecs, func(i, j int) bool { return skippedSpecs[i].Name < skippedSpecs[j].Name })
		fmt.Fprintf(&b, "\n#### Skipped at run time (%d)\n\n", len(skippedSpecs))
		for _, s := range skippedSpecs {
			fmt.Fprintf(&b, "- %s: %s\n", mdEscape(s.Name), mdEscape(s.Message))
		}
	}
	fmt.Fprintln(&b, endMarker)
	return b.String()
}

func sortedKeys(m map[string]*tally) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// replaceSection puts section between the markers of the file at path.
func replaceSection(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	s := string(old)
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	switch {
	case i >= 0 && j > i:
		s = s[:i] + section + strings.TrimPrefix(s[j+len(endMarker):], "\n")
	default:
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		s += "\n" + section
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
