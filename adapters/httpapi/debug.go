package httpapi

import (
	"html/template"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/actorlet/actorlet/internal/actorkit"
)

// ActorSource is what the debug page reads: the live actors and the stats
// per actor kind (the supervisors' registry is one; adapters do not import
// supervisors, so the page declares what it reads).
type ActorSource interface {
	// Snapshot returns every live actor, sorted by PID.
	Snapshot() []actorkit.ActorInfo
	// KindStats returns the stats of every kind seen since start.
	KindStats() []actorkit.KindStats
}

// DefaultDebugChildLimit bounds how many children of one actor the HTML
// page draws (a node of 10,000 pods); ?limit=N changes it, the JSON has
// them all.
const DefaultDebugChildLimit = 500

// NewDebug serves the research instruments under /debug/ (mount it as
// Config.Debug):
//
//	/debug/actors               the supervision tree, a live HTML page (refreshes every 2 s)
//	/debug/actors?format=json   the same as JSON: per kind, and the tree
//	/debug/pprof/               net/http/pprof (profile, heap, goroutine, trace, ...)
func NewDebug(actors ActorSource) http.Handler {
	mux := http.NewServeMux()
	d := &debugHandler{src: actors, now: time.Now}
	mux.HandleFunc("GET /debug/actors", d.serveActors)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

type debugHandler struct {
	src ActorSource
	now func() time.Time
}

// ActorNode is one actor of the tree in /debug/actors?format=json.
type ActorNode struct {
	actorkit.ActorInfo
	Name     string       `json:"name"`
	Children []*ActorNode `json:"children,omitempty"`
	// Omitted counts children not drawn (HTML only).
	Omitted int `json:"-"`
}

// KindSummary is one kind in /debug/actors?format=json.
type KindSummary struct {
	Kind               string  `json:"kind"`
	Live               int     `json:"live"`
	MailboxLength      int     `json:"mailboxLength"`
	MailboxMax         int     `json:"mailboxMax"`
	Handled            uint64  `json:"handled"`
	MeanHandlingMicros float64 `json:"meanHandlingMicros"`
}

// ActorsPage is the JSON of /debug/actors.
type ActorsPage struct {
	GeneratedAt time.Time     `json:"generatedAt"`
	Actors      int           `json:"actors"`
	Kinds       []KindSummary `json:"kinds"`
	Tree        []*ActorNode  `json:"tree"`
}

func (d *debugHandler) page() ActorsPage {
	snap := d.src.Snapshot()
	p := ActorsPage{GeneratedAt: d.now().UTC(), Actors: len(snap)}
	for _, k := range d.src.KindStats() {
		ks := KindSummary{Kind: k.Kind, Live: k.Live, MailboxLength: k.MailboxLength, MailboxMax: k.MailboxMax, Handled: k.Handled}
		if k.Handled > 0 {
			ks.MeanHandlingMicros = k.HandlingSeconds * 1e6 / float64(k.Handled)
		}
		p.Kinds = append(p.Kinds, ks)
	}
	p.Tree = buildTree(snap)
	return p
}

// buildTree links each actor to its parent; an actor whose parent is not
// live (the root) is a root of the forest. Children are sorted by PID.
func buildTree(snap []actorkit.ActorInfo) []*ActorNode {
	nodes := make(map[string]*ActorNode, len(snap))
	for _, a := range snap {
		name := a.PID
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
		nodes[a.PID] = &ActorNode{ActorInfo: a, Name: name}
	}
	var roots []*ActorNode
	for _, a := range snap { // sorted by PID: children come out sorted
		n := nodes[a.PID]
		if p, ok := nodes[a.Parent]; ok && a.Parent != "" {
			p.Children = append(p.Children, n)
		} else {
			roots = append(roots, n)
		}
	}
	return roots
}

// limitTree keeps at most limit children per actor, counting the rest.
func limitTree(ns []*ActorNode, limit int) {
	for _, n := range ns {
		if len(n.Children) > limit {
			n.Omitted = len(n.Children) - limit
			n.Children = n.Children[:limit]
		}
		limitTree(n.Children, limit)
	}
}

func (d *debugHandler) serveActors(w http.ResponseWriter, r *http.Request) {
	p := d.page()
	if r.URL.Query().Get("format") == "json" {
		writeJSON(w, http.StatusOK, p)
		return
	}
	limit := DefaultDebugChildLimit
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v > 0 {
		limit = v
	}
	limitTree(p.Tree, limit)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := actorsTmpl.Execute(w, struct {
		ActorsPage
		Limit int
	}{p, limit}); err != nil {
		// Headers are gone; the client sees a truncated page.
		return
	}
}

var actorsTmpl = template.Must(template.New("actors").Funcs(template.FuncMap{
	"micros": func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"mailbox": func(n int) string {
		if n < 0 {
			return "?"
		}
		return strconv.Itoa(n)
	},
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return time.Since(t).Round(time.Second).String() + " ago"
	},
	"sortKinds": func(ks []KindSummary) []KindSummary {
		return slices.SortedFunc(slices.Values(ks), func(a, b KindSummary) int { return strings.Compare(a.Kind, b.Kind) })
	},
}).Parse(actorsHTML))

// The page is drawn on the server (so it reads without JavaScript) and
// redrawn every 2 s by a small script that fetches the same page.
const actorsHTML = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>actorlet: actors</title>
<style>
body{font:13px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}
h1{font-size:18px;margin:0 0 .3em}
table{border-collapse:collapse;margin:.5em 0 1em}
td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left}
ul.tree,ul.tree ul{list-style:none;margin:0;padding-left:1.4em;border-left:1px dotted #bbb}
ul.tree{border:0;padding:0}
.actor{white-space:nowrap;padding:1px 0}
.name{font-weight:600;font-family:ui-monospace,monospace}
.kind{display:inline-block;min-width:4.5em;padding:0 4px;margin-right:4px;border-radius:3px;background:#e8eef7;font-size:11px;text-align:center}
.k-pod{background:#e3f4e1}.k-probe{background:#fbf1d9}.k-root{background:#eee}.k-node{background:#dde7fb}
.stat{color:#555;margin-left:1em;font-size:12px}
.busy{color:#b36b00;font-weight:600}
.fail{color:#b00020;margin-left:1em;font-size:12px}
.more{color:#777;font-style:italic}
#stamp{color:#777}
</style></head>
<body>
<h1>actorlet supervision tree</h1>
<div id="stamp">{{.Actors}} live actors, generated {{.GeneratedAt.Format "15:04:05"}} UTC; refreshes every 2 s &middot; <a href="?format=json">JSON</a> &middot; <a href="/debug/pprof/">pprof</a></div>
<table id="kinds"><thead><tr><th>kind</th><th>live</th><th>mailbox (sum)</th><th>mailbox (max)</th><th>messages</th><th>mean handling (&micro;s)</th></tr></thead><tbody>
{{range sortKinds .Kinds}}<tr data-kind="{{.Kind}}"><td>{{.Kind}}</td><td>{{.Live}}</td><td>{{.MailboxLength}}</td><td>{{.MailboxMax}}</td><td>{{.Handled}}</td><td>{{micros .MeanHandlingMicros}}</td></tr>
{{end}}</tbody></table>
<div id="tree"><ul class="tree">{{range .Tree}}{{template "node" .}}{{end}}</ul></div>
<script>
setInterval(async () => {
  try {
    const r = await fetch(location.pathname + location.search, {cache: "no-store"});
    if (!r.ok) return;
    const doc = new DOMParser().parseFromString(await r.text(), "text/html");
    for (const id of ["stamp", "kinds", "tree"]) {
      const el = doc.getElementById(id);
      if (el) document.getElementById(id).replaceWith(el);
    }
  } catch (e) { /* the agent restarts: try again */ }
}, 2000);
</script>
</body></html>
{{define "node"}}<li><div class="actor" id="actor-{{.PID}}" data-pid="{{.PID}}" data-kind="{{.Kind}}">
<span class="kind k-{{.Kind}}">{{.Kind}}</span><span class="name">{{.Name}}</span>
<span class="stat">pid {{.PID}}</span>
<span class="stat{{if gt .Mailbox 0}} busy{{end}}">mailbox {{mailbox .Mailbox}}</span>
<span class="stat">messages {{.Messages}}</span>
<span class="stat">mean {{micros .MeanHandlingMicros}} &micro;s</span>
<span class="stat">restarts {{.Restarts}}</span>
{{if .LastFailure}}<span class="fail" title="{{.LastFailureAt}}">last failure: {{.LastFailure}} ({{ago .LastFailureAt}})</span>{{end}}
</div>{{if or .Children .Omitted}}<ul>{{range .Children}}{{template "node" .}}{{end}}{{if .Omitted}}<li class="more">&hellip; and {{.Omitted}} more (?limit=N)</li>{{end}}</ul>{{end}}</li>{{end}}
`
