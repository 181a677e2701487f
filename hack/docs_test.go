package hack

// The docs are a map of the repository, and this test keeps the map true:
// the Layout sections of README.md and docs/ARCHITECTURE.md name every
// package directory exactly once and nothing that does not exist, and no
// document links to or names (in backticks) a repository path that is not
// there. checkDocs does the work on any root, so the test runs it on the
// repository and on planted copies that must fail.

import (
	"bufio"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// layoutDocs are the documents whose Layout section must name every
// package directory.
var layoutDocs = []string{"README.md", "docs/ARCHITECTURE.md"}

// checkDocs returns every way the docs under root disagree with the tree,
// one line each ("file: what"), sorted; none when the map is true. An error
// is returned only when the tree cannot be read at all.
func checkDocs(root string) ([]string, error) {
	t, err := scanTree(root)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, doc := range layoutDocs {
		problems = append(problems, checkLayout(root, doc, t.packages)...)
	}
	for _, doc := range t.docs {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", doc, err))
			continue
		}
		problems = append(problems, checkRefs(root, doc, string(b), t.topLevel, t.docs)...)
	}
	// By file, then by line.
	sort.SliceStable(problems, func(i, j int) bool {
		fi, li := fileLine(problems[i])
		fj, lj := fileLine(problems[j])
		if fi != fj {
			return fi < fj
		}
		if li != lj {
			return li < lj
		}
		return problems[i] < problems[j]
	})
	return problems, nil
}

// tree is what checkDocs needs to know of the repository.
type tree struct {
	packages []string        // directories holding .go files, slash-separated, sorted
	docs     []string        // *.md files, slash-separated, sorted
	topLevel map[string]bool // names of the root's entries that a path may start with
}

// scanTree walks root. .git, testdata directories, the root's entries that
// .gitignore names (build outputs) and a Go module cache (a directory
// holding cache/download) are not part of the tree; as for the go command,
// a directory whose name begins with "." or "_" holds no package.
func scanTree(root string) (tree, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return tree{}, fmt.Errorf("read the repository root: %w", err)
	}
	ignored := rootIgnores(root)
	t := tree{topLevel: map[string]bool{}}
	for _, e := range entries {
		if e.Name() != ".git" && !ignored(e.Name()) {
			t.topLevel[e.Name()] = true
		}
	}
	pkgs := map[string]bool{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			name := d.Name()
			if name == ".git" || name == "testdata" ||
				(!strings.Contains(rel, "/") && ignored(name)) || isModCache(p) {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(rel, ".go"):
			if !slices.ContainsFunc(strings.Split(path.Dir(rel), "/"), func(seg string) bool {
				return strings.HasPrefix(seg, ".") || strings.HasPrefix(seg, "_")
			}) {
				pkgs[path.Dir(rel)] = true
			}
		case strings.HasSuffix(rel, ".md"):
			t.docs = append(t.docs, rel)
		}
		return nil
	})
	if err != nil {
		return tree{}, fmt.Errorf("walk the repository: %w", err)
	}
	delete(pkgs, ".") // a Go file at the root is no package directory to map
	for p := range pkgs {
		t.packages = append(t.packages, p)
	}
	sort.Strings(t.packages)
	sort.Strings(t.docs)
	return t, nil
}

// rootIgnores reports which names of the root's entries .gitignore
// excludes (its patterns without a slash inside, such as /bin/ or *.test).
func rootIgnores(root string) func(string) bool {
	var pats []string
	b, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "!") {
				continue
			}
			l = strings.TrimSuffix(strings.TrimPrefix(l, "/"), "/")
			if !strings.Contains(l, "/") {
				pats = append(pats, l)
			}
		}
	}
	return func(name string) bool {
		for _, p := range pats {
			if ok, _ := path.Match(p, name); ok {
				return true
			}
		}
		return false
	}
}

func isModCache(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "cache", "download"))
	return err == nil && fi.IsDir()
}

// checkLayout checks the Layout section of doc: its first fenced block,
// one entry per line that starts in the first column ("dir/   its job"),
// indented lines continuing the entry above.
func checkLayout(root, doc string, packages []string) []string {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", doc, err)}
	}
	entries, err := layoutEntries(string(b))
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", doc, err)}
	}
	var problems []string
	named := map[string]int{}
	for _, e := range entries {
		dir := strings.TrimSuffix(e.dir, "/")
		named[dir]++
		if named[dir] == 2 {
			problems = append(problems, fmt.Sprintf("%s:%d: Layout names %s more than once", doc, e.line, dir))
		}
		if named[dir] > 1 {
			continue
		}
		if e.job == "" {
			problems = append(problems, fmt.Sprintf("%s:%d: Layout names %s without a line on its job", doc, e.line, dir))
		}
		if !concretePath(dir) || strings.HasPrefix(dir, "/") || slices.Contains(strings.Split(dir, "/"), "..") {
			problems = append(problems, fmt.Sprintf("%s:%d: Layout entry %q is not a directory of the repository", doc, e.line, e.dir))
			continue
		}
		fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(dir)))
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s:%d: Layout names %s, which does not exist", doc, e.line, dir))
		case !fi.IsDir():
			problems = append(problems, fmt.Sprintf("%s:%d: Layout names %s, which is not a directory", doc, e.line, dir))
		}
	}
	for _, p := range packages {
		if named[p] == 0 {
			problems = append(problems, fmt.Sprintf("%s: Layout does not name the package directory %s", doc, p))
		}
	}
	return problems
}

type layoutEntry struct {
	line     int
	dir, job string
}

var layoutHeading = regexp.MustCompile(`^(#{1,6})\s+Layout\s*#*\s*$`)

func layoutEntries(text string) ([]layoutEntry, error) {
	lines := strings.Split(text, "\n")
	level, start := 0, -1
	inFence := false
	for i, l := range lines {
		if isFence(l) {
			inFence = !inFence
			continue
		}
		if m := layoutHeading.FindStringSubmatch(l); m != nil && !inFence {
			level, start = len(m[1]), i+1
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no Layout section")
	}
	var entries []layoutEntry
	open := false
	for i := start; i < len(lines); i++ {
		l := lines[i]
		if isFence(l) {
			if open {
				return entries, nil
			}
			open = true
			continue
		}
		if !open {
			if h := strings.TrimLeft(l, "#"); len(l)-len(h) > 0 && len(l)-len(h) <= level && strings.HasPrefix(h, " ") {
				break // the next section began: no block in this one
			}
			continue
		}
		if strings.TrimSpace(l) == "" || l[0] == ' ' || l[0] == '\t' {
			continue
		}
		f := strings.Fields(l)
		entries = append(entries, layoutEntry{line: i + 1, dir: f[0], job: strings.TrimSpace(strings.TrimPrefix(l, f[0]))})
	}
	if open {
		return nil, fmt.Errorf("the Layout block is not closed")
	}
	return nil, fmt.Errorf("the Layout section has no code block")
}

func isFence(l string) bool {
	l = strings.TrimLeft(l, " ")
	return strings.HasPrefix(l, "```") || strings.HasPrefix(l, "~~~")
}

// concretePath reports whether p names one path: no placeholder (<uid>),
// no glob (*.json, ?, [...]), no variable ($DIR, ~) and no elision (...).
func concretePath(p string) bool {
	return p != "" && !strings.ContainsAny(p, "<>*?[]{}$~|") && !strings.Contains(p, "...")
}

var (
	// [text](target "title"), ![alt](target); a target in <...> may hold spaces.
	inlineLink = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)`)
	// [label]: target
	refLink = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	// href="target", src="target" in inline HTML.
	htmlLink = regexp.MustCompile(`(?:href|src)\s*=\s*"([^"]*)"`)
	// a repository path: segments of word characters, dots, dashes and
	// pluses, at least one slash.
	repoPath = regexp.MustCompile(`^[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)+/?$|^[A-Za-z0-9_.+-]+/$`)
	// file.go:41, file.go:41-60: a line reference after a path.
	lineRef = regexp.MustCompile(`:\d+(?:-\d+)?$`)
	// a document's file name on its own: not after a slash, a dot or a word
	// character (a path or a URL names it whole).
	bareDoc = regexp.MustCompile(`(?:^|[^/\w.-])([A-Za-z0-9_-]+\.md)\b`)
)

// checkRefs checks the links of one markdown document (relative to its
// directory, or to the root with a leading /) and the repository paths it
// names in code spans (relative to the root: their first segment is one of
// the root's entries).
func checkRefs(root, doc, text string, topLevel map[string]bool, docs []string) []string {
	prose, spans := splitMarkdown(text)
	var problems []string
	report := func(line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: ", doc, line)+fmt.Sprintf(format, args...))
	}
	var targets []ref
	for _, re := range []*regexp.Regexp{inlineLink, refLink, htmlLink} {
		for _, m := range re.FindAllStringSubmatchIndex(prose, -1) {
			targets = append(targets, ref{lineAt(prose, m[2]), prose[m[2]:m[3]]})
		}
	}
	for _, r := range targets {
		target := strings.Trim(r.text, "<>")
		if target == "" || strings.HasPrefix(target, "#") || strings.Contains(target, "://") ||
			strings.HasPrefix(target, "mailto:") {
			continue
		}
		if i := strings.IndexAny(target, "#?"); i >= 0 {
			target = target[:i]
		}
		if t, err := url.PathUnescape(target); err == nil {
			target = t
		}
		var rel string
		if strings.HasPrefix(target, "/") {
			rel = path.Clean(strings.TrimPrefix(target, "/"))
		} else {
			rel = path.Join(path.Dir(doc), target)
		}
		if rel == ".." || strings.HasPrefix(rel, "../") {
			report(r.line, "link %s points outside the repository", r.text)
			continue
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
			report(r.line, "link %s: %s is not in the repository", r.text, rel)
		}
	}
	for _, s := range spans {
		for _, tok := range strings.FieldsFunc(s.text, func(r rune) bool {
			return strings.ContainsRune(" \t\n=,;()\"'@`", r)
		}) {
			p := lineRef.ReplaceAllString(tok, "")
			if strings.HasPrefix(p, "../") && concretePath(p) {
				// Relative to the document, as a link would be.
				rel := path.Join(path.Dir(doc), p)
				if rel == ".." || strings.HasPrefix(rel, "../") {
					report(s.line, "`%s` names %s, outside the repository", s.text, p)
				} else if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
					report(s.line, "`%s` names %s, which is not in the repository", s.text, rel)
				}
				continue
			}
			if !repoPath.MatchString(p) || !topLevel[strings.SplitN(p, "/", 2)[0]] ||
				slices.Contains(strings.Split(p, "/"), "..") || strings.Contains(p, "...") {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(p, "/")))); err != nil {
				report(s.line, "`%s` names %s, which is not in the repository", s.text, p)
			}
		}
	}
	// A document named alone (DESIGN.md, "see BENCHMARKS.md") must be one
	// of the repository's documents.
	known := map[string]bool{}
	for _, d := range docs {
		known[path.Base(d)] = true
	}
	// Link targets were checked above: blank them (keeping the lines).
	for _, re := range []*regexp.Regexp{inlineLink, refLink, htmlLink} {
		prose = re.ReplaceAllStringFunc(prose, func(m string) string {
			return strings.Map(func(r rune) rune {
				if r == '\n' {
					return r
				}
				return ' '
			}, m)
		})
	}
	for _, src := range append([]ref{{1, prose}}, spans...) {
		for _, m := range bareDoc.FindAllStringSubmatchIndex(src.text, -1) {
			if name := src.text[m[2]:m[3]]; !known[name] {
				report(src.line+lineAt(src.text, m[2])-1, "names %s, which is not a document of the repository", name)
			}
		}
	}
	return problems
}

type ref struct {
	line int
	text string
}

// splitMarkdown returns the text outside fenced blocks and code spans (with
// the same line breaks, so offsets map to lines) and the code spans.
func splitMarkdown(text string) (string, []ref) {
	var out strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<24)
	inFence := false
	for sc.Scan() {
		l := sc.Text()
		if isFence(l) {
			inFence = !inFence
			out.WriteString("\n")
			continue
		}
		if !inFence {
			out.WriteString(l)
		}
		out.WriteString("\n")
	}
	s := out.String()
	var prose strings.Builder
	var spans []ref
	for i := 0; i < len(s); {
		if s[i] != '`' {
			prose.WriteByte(s[i])
			i++
			continue
		}
		n := 0
		for i+n < len(s) && s[i+n] == '`' {
			n++
		}
		fence := strings.Repeat("`", n)
		end := -1
		for j := i + n; j < len(s); {
			k := strings.Index(s[j:], fence)
			if k < 0 {
				break
			}
			k += j
			m := 0
			for k+m < len(s) && s[k+m] == '`' {
				m++
			}
			if m == n {
				end = k
				break
			}
			j = k + m
		}
		if end < 0 { // an unmatched run is literal text
			prose.WriteString(fence)
			i += n
			continue
		}
		spans = append(spans, ref{lineAt(s, i), strings.TrimSpace(strings.ReplaceAll(s[i+n:end], "\n", " "))})
		// Keep the line breaks of the span so later offsets map to lines.
		for _, c := range s[i : end+n] {
			if c == '\n' {
				prose.WriteByte('\n')
			} else {
				prose.WriteByte(' ')
			}
		}
		i = end + n
	}
	return prose.String(), spans
}

func lineAt(s string, off int) int { return strings.Count(s[:off], "\n") + 1 }

func TestDocsMatchTheTree(t *testing.T) {
	problems, err := checkDocs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// copyTree makes a copy of the repository at root under a temporary
// directory that checkDocs sees as it sees root: the documents and
// .gitignore with their content, every other file empty (only its
// existence matters).
func copyTree(t *testing.T, root string) string {
	t.Helper()
	dst := t.TempDir()
	ignored := rootIgnores(root)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" || (!strings.Contains(filepath.ToSlash(rel), "/") && ignored(d.Name())) {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		var body []byte
		if strings.HasSuffix(rel, ".md") || rel == ".gitignore" {
			if body, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		return os.WriteFile(filepath.Join(dst, rel), body, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// edit replaces old with new in the file rel of the tree at root (old must
// be there) or, with old "", appends new.
func edit(t *testing.T, root, rel, old, new string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	switch {
	case old == "":
		s += new
	case strings.Contains(s, old):
		s = strings.Replace(s, old, new, 1)
	default:
		t.Fatalf("%s has no %q", rel, old)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// addToLayout adds line as the first entry of doc's Layout block.
func addToLayout(t *testing.T, root, doc, line string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(doc))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if layoutHeading.MatchString(l) {
			for j := i + 1; j < len(lines); j++ {
				if isFence(lines[j]) {
					lines = slices.Insert(lines, j+1, line)
					if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
			}
		}
	}
	t.Fatalf("%s has no Layout block", doc)
}

// The checker finds what it is for: each planted fault is reported, with
// its file, and nothing else is (the copy's other problems are those of
// the repository itself, whatever they are).
func TestDocsCheckerCatchesPlantedFaults(t *testing.T) {
	base, err := checkDocs(copyTree(t, ".."))
	if err != nil {
		t.Fatal(err)
	}
	real, err := checkDocs("..")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(base, real) {
		t.Fatalf("the copy is checked unlike the repository:\ncopy: %q\nrepository: %q", base, real)
	}
	tests := []struct {
		name  string
		plant func(t *testing.T, root string)
		want  []string // one new problem per entry, containing it
	}{
		{name: "stale Layout entry", plant: func(t *testing.T, root string) {
			addToLayout(t, root, "README.md", "adapters/gone/     a package removed long ago")
		}, want: []string{"README.md:", "Layout names adapters/gone, which does not exist"}},
		{name: "Layout entry naming a file", plant: func(t *testing.T, root string) {
			addToLayout(t, root, "docs/ARCHITECTURE.md", "go.mod     the module")
		}, want: []string{"docs/ARCHITECTURE.md:", "Layout names go.mod, which is not a directory"}},
		{name: "Layout entry twice", plant: func(t *testing.T, root string) {
			addToLayout(t, root, "README.md", "messages/    again")
		}, want: []string{"README.md:", "Layout names messages more than once"}},
		{name: "Layout entry without its job", plant: func(t *testing.T, root string) {
			if err := os.MkdirAll(filepath.Join(root, "deploy", "newdir"), 0o755); err != nil {
				t.Fatal(err)
			}
			addToLayout(t, root, "README.md", "deploy/newdir/")
		}, want: []string{"README.md:", "Layout names deploy/newdir without a line on its job"}},
		{name: "package missing from both Layouts", plant: func(t *testing.T, root string) {
			if err := os.MkdirAll(filepath.Join(root, "actors", "newactor"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "actors", "newactor", "a.go"), []byte("package newactor\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: []string{
			"README.md: Layout does not name the package directory actors/newactor",
			"docs/ARCHITECTURE.md: Layout does not name the package directory actors/newactor",
		}},
		{name: "broken link", plant: func(t *testing.T, root string) {
			edit(t, root, "docs/ARCHITECTURE.md", "", "\nSee [the plan](PLAN.md#first) and [the tree](../cmd/actorlet/).\n")
		}, want: []string{"docs/ARCHITECTURE.md:", "link PLAN.md#first: docs/PLAN.md is not in the repository"}},
		{name: "link out of the repository", plant: func(t *testing.T, root string) {
			edit(t, root, "README.md", "", "\n[notes][n]\n\n[n]: ../notes/DESIGN.md\n")
		}, want: []string{"README.md:", "link ../notes/DESIGN.md points outside the repository"}},
		{name: "missing path in backticks", plant: func(t *testing.T, root string) {
			edit(t, root, "README.md", "", "\nRun `hack/gone.sh --all` then `cmd/actorlet/main.go:12`.\n")
		}, want: []string{"README.md:", "names hack/gone.sh, which is not in the repository"}},
		{name: "document named alone", plant: func(t *testing.T, root string) {
			edit(t, root, "docs/ARCHITECTURE.md", "", "\nThe design notes (NOTES.md) say so; README.md agrees.\n")
		}, want: []string{"docs/ARCHITECTURE.md:", "names NOTES.md, which is not a document of the repository"}},
		{name: "no Layout section", plant: func(t *testing.T, root string) {
			if err := os.WriteFile(filepath.Join(root, "README.md"), []byte("# actorlet\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: []string{"README.md: no Layout section"}},
		{name: "not paths: temp dirs, globs, placeholders, build outputs, URLs, code", plant: func(t *testing.T, root string) {
			edit(t, root, "README.md", "", "\n`/tmp/actorlet/pods`, `docs/bench/*.json`, `actors/<name>/`, "+
				"`bin/actorlet`, `$ROOT/hack/x`, `~/.cache/actorlet/tools`, `k8s.io/cri-api/pkg/apis`, "+
				"[site](https://example.com/a.md), [top](#layout), `pods/<uid>/volumes`, `hack/...`.\n"+
				"\n```\nhack/gone.sh [x](gone.md) GONE.md\n```\n")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, "..")
			tc.plant(t, root)
			got, err := checkDocs(root)
			if err != nil {
				t.Fatal(err)
			}
			// New problems: those the repository does not have, line numbers
			// aside (a planted line moves the lines below it).
			old := map[string]int{}
			for _, p := range base {
				old[noLine(p)]++
			}
			var added []string
			for _, p := range got {
				if old[noLine(p)] > 0 {
					old[noLine(p)]--
					continue
				}
				added = append(added, p)
			}
			if tc.name == "no Layout section" {
				// The README's own problems go with its content.
				added = slices.DeleteFunc(added, func(p string) bool { return !strings.HasPrefix(p, "README.md") })
			}
			wants := tc.want
			if len(wants) == 2 && strings.HasSuffix(wants[0], ":") {
				wants = []string{wants[0] + "*" + wants[1]} // file prefix, then the fault
			}
			if len(added) != len(wants) {
				t.Fatalf("new problems %q, want %d matching %q", added, len(wants), wants)
			}
			for i, w := range wants {
				if !matches(added[i], w) {
					t.Errorf("problem %q does not match %q", added[i], w)
				}
			}
		})
	}
}

// matches reports whether p holds w, where a * in w stands for any text.
func matches(p, w string) bool {
	parts := strings.Split(w, "*")
	if !strings.HasPrefix(p, parts[0]) && len(parts) > 1 {
		return false
	}
	for _, part := range parts {
		i := strings.Index(p, part)
		if i < 0 {
			return false
		}
		p = p[i+len(part):]
	}
	return true
}

var problemLine = regexp.MustCompile(`^([^: ]+):\d+:`)

func noLine(p string) string { return problemLine.ReplaceAllString(p, "$1:") }

// fileLine splits "file:line: what" (or "file: what", line 0).
func fileLine(p string) (string, int) {
	file, rest, _ := strings.Cut(p, ":")
	n := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return file, n
}
