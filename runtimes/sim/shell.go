package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// A proc is one running program: a container's main program or an exec.
// Shell scripts (sh -c) run on mvdan.cc/sh's interpreter; every command
// that is not a shell builtin runs as one of the simulated programs below,
// against the container's tiny filesystem: nothing runs on the host. A
// container's program runs on a goroutine of its own, an exec on the
// caller's; both take r.mu only while they touch the runtime's state, and
// the blocking programs (sleep, listeners, unknown programs) wait on the
// proc's context, which kill cancels.
type proc struct {
	r      *Runtime
	c      *container
	exec   bool
	ctx    context.Context
	cancel context.CancelFunc

	// Under r.mu.
	closers []io.Closer
	timer   *time.Timer // main program: the sleep it waits on, if not a shell
	dead    bool
	killed  int            // exec: the code killAll ended it with (0: not killed)
	pending [2][]byte      // main program: the last line of stdout, stderr, until it ends
	onExit  func(code int) // main program: called once, under r.mu, when it ends by itself

	settled    chan struct{} // closed once the program first blocks or ends
	settleOnce sync.Once
	steps      atomic.Int64 // commands run, builtins included (see settleSteps)
}

// maxFrames bounds the interpreter's stack (about 8 frames a function
// call deep, 1 KiB each): deeper, the script fails with errTooDeep.
const maxFrames = 8192

var errTooDeep = errors.New("maximum function nesting level exceeded")

// settleSteps is how many commands a program runs without blocking before
// StartContainer stops waiting for it to block or end (a script that loops
// without sleeping).
const settleSteps = 10000

// newProc makes a program of c; the caller holds r.mu. ctx bounds it (an
// exec's timeout); kill cancels it.
func (r *Runtime) newProc(ctx context.Context, c *container, exec bool) *proc {
	p := &proc{r: r, c: c, exec: exec, settled: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(ctx)
	return p
}

// environ is the environment a shell of c starts with: the config's envs,
// HOSTNAME the sandbox's hostname unless they set it (as a runtime does),
// HOME /root and the ids of root; nothing of the host's. Both are set at
// creation and never change: no lock needed.
func (c *container) environ() expand.Environ {
	pairs := make([]string, 0, len(c.env)+5)
	for k, v := range c.env {
		pairs = append(pairs, k+"="+v)
	}
	for _, kv := range [...][2]string{{"HOSTNAME", c.sb.hostname}, {"HOME", "/root"}, {"UID", "0"}, {"EUID", "0"}, {"GID", "0"}} {
		if _, ok := c.env[kv[0]]; !ok {
			pairs = append(pairs, kv[0]+"="+kv[1])
		}
	}
	return expand.ListEnviron(pairs...)
}

// start runs a container's main program; the caller does not hold r.mu.
// A simulated program that is not a shell runs inline and then waits on a
// timer or for its stop, with no goroutine (a pod of `sleep 3600` costs a
// timer). A shell (or a builtin) runs on a goroutine of its own, as the
// interpreter runs a script synchronously; start returns once it first
// blocks (a sleep, a listener serving), ends, runs settleSteps commands,
// or ctx is done: what it does before that (its first output, its
// listeners) is done when StartContainer returns.
func (p *proc) start(ctx context.Context, argv []string) {
	argv = skipAssignments(argv)
	if len(argv) == 0 {
		return // no command: runs until stopped
	}
	if name := path.Base(argv[0]); !isShell(name) && !interp.IsBuiltin(name) {
		code, wait := p.run(p.ctx, p.stdio(), argv)
		p.r.mu.Lock()
		defer p.r.mu.Unlock()
		switch {
		case wait == 0:
			p.finish(code)
		case wait > 0 && !p.dead:
			p.timer = time.AfterFunc(wait, func() {
				p.r.mu.Lock()
				defer p.r.mu.Unlock()
				p.finish(0)
			})
		}
		return
	}
	go func() {
		code := p.runWait(p.ctx, p.stdio(), argv)
		p.r.mu.Lock()
		p.finish(code)
		p.r.mu.Unlock()
		p.settle()
	}()
	select {
	case <-p.settled:
	case <-ctx.Done():
	case <-p.ctx.Done():
	}
}

func (p *proc) settle() { p.settleOnce.Do(func() { close(p.settled) }) }

// forever is the wait of a program that runs until it is stopped.
const forever = time.Duration(-1)

// wait waits d (forever: until the program is stopped).
func (p *proc) wait(ctx context.Context, d time.Duration) {
	p.settle()
	if d < 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// finish ends the proc by itself and reports code; the caller holds r.mu.
func (p *proc) finish(code int) {
	if p.dead {
		return
	}
	p.release()
	if p.onExit != nil {
		p.onExit(code)
	}
}

// kill ends the proc without reporting; the caller holds r.mu.
func (p *proc) kill() {
	if !p.dead {
		p.release()
	}
}

func (p *proc) release() {
	p.dead = true
	p.flushLog()
	p.cancel()
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	for _, c := range p.closers {
		_ = c.Close()
	}
	p.closers = nil
}

// ---- output

// stdio is a program's standard streams. in may be nil.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// stdio is the main program's streams: its log and attached clients.
func (p *proc) stdio() stdio {
	return stdio{out: procOut{p, runtimeapi.Stdout}, err: procOut{p, runtimeapi.Stderr}}
}

// procOut is one stream of a container's main program.
type procOut struct {
	p      *proc
	stream runtimeapi.LogStreamType
}

func (w procOut) Write(b []byte) (int, error) {
	w.p.r.mu.Lock()
	defer w.p.r.mu.Unlock()
	if !w.p.dead {
		w.p.emit(w.stream, b)
	}
	return len(b), nil
}

// lockedBuffer is an exec's output: background jobs of its script may
// write while another reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(b)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

// maxLogLine is the longest line kept whole in a container's log; longer
// ones are cut in partial (P) entries, as runtimes do.
const maxLogLine = 16 << 10

// emit writes b of a container's main program to attached clients and the
// container's log; the caller holds r.mu. The log gets whole lines, as a
// runtime reading the program's pipe writes them (the shell may write a
// line in pieces); what is left of a line when the program ends is
// written as partial.
func (p *proc) emit(stream runtimeapi.LogStreamType, b []byte) {
	p.c.broadcast(stream, b)
	if p.c.logPath == "" || len(b) == 0 {
		return
	}
	pend := &p.pending[0]
	if stream == runtimeapi.Stderr {
		pend = &p.pending[1]
	}
	*pend = append(*pend, b...)
	end := bytes.LastIndexByte(*pend, '\n') + 1
	if end == 0 && len(*pend) < maxLogLine {
		return
	}
	if end == 0 {
		end = len(*pend)
	}
	p.writeLog(stream, (*pend)[:end])
	*pend = append((*pend)[:0], (*pend)[end:]...)
}

// flushLog writes what is left of the program's lines; the caller holds
// r.mu.
func (p *proc) flushLog() {
	for i, stream := range [...]runtimeapi.LogStreamType{runtimeapi.Stdout, runtimeapi.Stderr} {
		if len(p.pending[i]) > 0 {
			p.writeLog(stream, p.pending[i])
			p.pending[i] = nil
		}
	}
}

// writeLog appends b to the container's log in the CRI format: a line
// that ends in a newline is full (F), one that does not partial (P).
func (p *proc) writeLog(stream runtimeapi.LogStreamType, b []byte) {
	var buf bytes.Buffer
	ts := time.Now().Format(time.RFC3339Nano)
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		buf.WriteString(ts)
		buf.WriteByte(' ')
		buf.WriteString(string(stream))
		if strings.HasSuffix(line, "\n") {
			buf.WriteString(" F ")
			buf.WriteString(line)
		} else {
			buf.WriteString(" P ")
			buf.WriteString(line)
			buf.WriteByte('\n')
		}
	}
	f, err := os.OpenFile(p.c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return
	}
	_, _ = f.Write(buf.Bytes())
	_ = f.Close()
}

// hostPath is the host file mounted at the container path name (a file
// mount, such as the termination message file or /etc/hosts), or "".
func (c *container) hostPath(name string) string {
	file := func(containerPath, hostPath string) bool {
		if containerPath != name || hostPath == "" {
			return false
		}
		st, err := os.Stat(hostPath)
		return err == nil && !st.IsDir()
	}
	for _, m := range c.mounts {
		if file(m.containerPath, m.hostPath) {
			return m.hostPath
		}
	}
	for _, m := range c.rawMounts {
		if file(m.GetContainerPath(), m.GetHostPath()) {
			return m.GetHostPath()
		}
	}
	return ""
}

func appendFile(path string, b []byte) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	_, _ = f.Write(b)
	_ = f.Close()
}

// ---- programs

// run runs argv as the container's runtime would exec it: a simulated
// program, a shell builtin (echo, test, exit...) as the shell runs it, or
// any other program, which runs until it is stopped. It returns the exit
// code and how long the program then waits before it exits 0 (forever:
// until stopped); once ctx is done the code means nothing.
func (p *proc) run(ctx context.Context, std stdio, argv []string) (int, time.Duration) {
	argv = skipAssignments(argv)
	if len(argv) == 0 {
		return 0, 0
	}
	name := path.Base(argv[0])
	if code, wait, ok := p.program(ctx, std, name, argv[1:]); ok {
		return code, wait
	}
	if interp.IsBuiltin(name) {
		words := make([]*syntax.Word, len(argv))
		for i, a := range argv {
			if i == 0 {
				a = name
			}
			words[i] = &syntax.Word{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: a}}}
		}
		return p.runNode(ctx, std, &syntax.CallExpr{Args: words}, nil), 0
	}
	return 0, forever
}

// runWait is run, waiting as the program does.
func (p *proc) runWait(ctx context.Context, std stdio, argv []string) int {
	code, wait := p.run(ctx, std, argv)
	if wait != 0 {
		p.wait(ctx, wait)
	}
	return code
}

// skipAssignments drops leading variable assignments (FOO=bar cmd): they
// are accepted and ignored.
func skipAssignments(argv []string) []string {
	for len(argv) > 0 && isAssignment(argv[0]) {
		argv = argv[1:]
	}
	return argv
}

func isShell(name string) bool {
	switch name {
	case "sh", "bash", "ash", "dash":
		return true
	}
	return false
}

// program runs the simulated program name: its exit code, and how long
// it then waits before it exits 0 (forever: until stopped); ok is false
// where there is no program of that name.
func (p *proc) program(ctx context.Context, std stdio, name string, args []string) (code int, wait time.Duration, ok bool) {
	switch name {
	case "sh", "bash", "ash", "dash":
		return p.shell(ctx, std, name, args), 0, true
	case "sleep":
		code, wait = p.sleep(std, args)
		return code, wait, true
	case "httpd":
		return serving(p.httpd(std, args))
	case "nc", "netcat":
		return serving(p.nc(std, args))
	case "grpc-health-checking":
		return serving(p.grpcHealth(std, args))
	case "agnhost": // agnhost grpc-health-checking --port N, as upstream's e2e tests run it
		if len(args) > 0 && args[0] == "grpc-health-checking" {
			return serving(p.grpcHealth(std, args[1:]))
		}
		return 0, 0, false
	}
	code, ok = p.instant(std, name, args)
	return code, 0, ok
}

// serving is what program answers for a server that started (code 0: it
// runs until stopped) or failed.
func serving(code int) (int, time.Duration, bool) {
	if code != 0 {
		return code, 0, true
	}
	return 0, forever, true
}

// instant runs the simulated program name that ends at once.
func (p *proc) instant(std stdio, name string, args []string) (code int, ok bool) {
	switch name {
	case "cat":
		return p.cat(std, args), true
	case "mkdir":
		return 0, true
	case "touch":
		return p.locked(std, func(sink) int { return p.touch(args) }), true
	case "rm":
		return p.locked(std, func(stderr sink) int { return p.rm(args, stderr) }), true
	case "alloc":
		return p.locked(std, func(stderr sink) int { return p.alloc(args, stderr) }), true
	case "free":
		return p.locked(std, func(stderr sink) int { return p.free(args, stderr) }), true
	case "fill":
		return p.locked(std, func(stderr sink) int { return p.fill(args, stderr) }), true
	case "spawn":
		return p.locked(std, func(stderr sink) int { return p.spawn(args, stderr) }), true
	case "reap":
		return p.locked(std, func(stderr sink) int { return p.reap(args, stderr) }), true
	}
	return 0, false
}

// sink takes what a program writes while it holds r.mu.
type sink func(b []byte)

// locked runs f under r.mu, then writes what it wrote to stderr (the
// streams take r.mu themselves). A killed proc runs nothing.
func (p *proc) locked(std stdio, f func(stderr sink) int) int {
	var errb []byte
	p.r.mu.Lock()
	code := 137
	if !p.dead {
		code = f(func(b []byte) { errb = append(errb, b...) })
	}
	p.r.mu.Unlock()
	if len(errb) > 0 {
		_, _ = std.err.Write(errb)
	}
	return code
}

func isAssignment(w string) bool {
	i := strings.IndexByte(w, '=')
	if i <= 0 {
		return false
	}
	for j, r := range w[:i] {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || j > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// ---- the shell

// shellScript finds the -c script in a shell's arguments (-c, -ec, -xc...):
// the shell options given with it (e, u, x) and the positional parameters
// after the script's $0.
func shellScript(args []string) (script string, opts, params []string, ok bool) {
	for i, a := range args {
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") {
			return "", nil, nil, false
		}
		for _, f := range a[1:] {
			if f == 'e' || f == 'u' || f == 'x' {
				opts = append(opts, "-"+string(f))
			}
		}
		if strings.Contains(a[1:], "c") {
			if i+1 >= len(args) {
				return "", nil, nil, false
			}
			if i+3 <= len(args) {
				params = args[i+3:]
			}
			return args[i+1], opts, params, true
		}
	}
	return "", nil, nil, false
}

// shell is sh -c SCRIPT; without -c it is an interactive shell, which runs
// until stopped (streaming exec feeds one its input: stream.go).
func (p *proc) shell(ctx context.Context, std stdio, name string, args []string) int {
	script, opts, params, ok := shellScript(args)
	if !ok {
		p.wait(ctx, forever)
		return 0
	}
	file, err := parseScript(script)
	if err != nil {
		fmt.Fprintf(std.err, "%s: %v\n", name, err)
		return 2
	}
	return p.runNode(ctx, std, file, append(append(opts, "--"), params...))
}

// parseScript parses a sh -c script (bash syntax, as busybox's ash
// accepts much of it). Process substitution is refused: the interpreter
// makes it of named pipes on the host.
func parseScript(src string) (*syntax.File, error) {
	file, err := syntax.NewParser().Parse(strings.NewReader(src), "")
	if err != nil {
		return nil, err
	}
	syntax.Walk(file, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.ProcSubst:
			err = fmt.Errorf("%s: process substitution is not simulated", n.Pos())
		case *syntax.Word:
			if braceWords(n) > maxBraceWords {
				err = fmt.Errorf("%s: brace expansion of more than %d words", n.Pos(), maxBraceWords)
			}
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	return file, nil
}

// maxBraceWords bounds what one word's brace expansion makes: the
// interpreter builds it in memory ({1..1000000000} would take the agent's).
const maxBraceWords = 100000

// braceRE finds a brace group: a range {A..B[..STEP]} or a list {a,b,...}.
var braceRE = regexp.MustCompile(`\{(-?[0-9]+)\.\.(-?[0-9]+)(?:\.\.-?[0-9]+)?\}|\{[^{}]*,[^{}]*\}`)

// braceWords is about how many words w's brace expansion makes (the
// product of its groups' sizes; steps ignored), saturating past
// maxBraceWords.
func braceWords(w *syntax.Word) int {
	var lit strings.Builder
	for _, part := range w.Parts {
		if l, ok := part.(*syntax.Lit); ok {
			lit.WriteString(l.Value)
		}
	}
	n := 1
	for _, m := range braceRE.FindAllStringSubmatch(lit.String(), -1) {
		size := strings.Count(m[0], ",") + 1
		if m[1] != "" {
			a, err1 := strconv.ParseInt(m[1], 10, 64)
			b, err2 := strconv.ParseInt(m[2], 10, 64)
			if err1 != nil || err2 != nil || a-b > maxBraceWords || b-a > maxBraceWords {
				return maxBraceWords + 1
			}
			size = int(max(a-b, b-a)) + 1
		}
		n *= size
		if n > maxBraceWords {
			return maxBraceWords + 1
		}
	}
	return n
}

// runNode interprets node with the container's environment and the
// simulated programs, files and directories.
func (p *proc) runNode(ctx context.Context, std stdio, node syntax.Node, params []string) int {
	opts := []interp.RunnerOption{
		interp.Env(p.c.environ()),
		func(r *interp.Runner) error { r.Dir = "/"; return nil },
		interp.StdIO(std.in, std.out, std.err),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return p.execHandler }),
		interp.CallHandler(p.callHandler),
		interp.OpenHandler(p.open),
		interp.StatHandler(p.stat),
		interp.AccessHandler(p.access),
		interp.ReadDirHandler2(p.readDir),
	}
	if len(params) > 0 {
		opts = append(opts, interp.Params(params...))
	}
	runner, err := interp.New(opts...)
	if err != nil {
		fmt.Fprintf(std.err, "sh: %v\n", err)
		return 2
	}
	err = runner.Run(ctx, node)
	if _, ok := errors.AsType[interp.ExitStatus](err); err != nil && !ok && ctx.Err() == nil {
		fmt.Fprintf(std.err, "sh: %v\n", err)
		return 2
	}
	return statusCode(err)
}

// statusCode is the exit code of a run's result.
func statusCode(err error) int {
	if err == nil {
		return 0
	}
	if es, ok := errors.AsType[interp.ExitStatus](err); ok {
		return int(es)
	}
	return 1
}

// callHandler sees every command, builtins included: it counts them for
// start (settleSteps) and runs ulimit and umask, which the interpreter
// lacks, as true (the old shell did too).
func (p *proc) callHandler(_ context.Context, args []string) ([]string, error) {
	n := p.steps.Add(1)
	if n == settleSteps {
		p.settle()
	}
	// The interpreter recurses on the goroutine's stack without a bound: a
	// function that calls itself would grow it until the agent dies.
	var pc [1]uintptr
	if n%16 == 0 && runtime.Callers(maxFrames, pc[:]) > 0 {
		return nil, errTooDeep
	}
	switch args[0] {
	case "ulimit", "umask":
		return []string{"true"}, nil
	}
	return args, nil
}

// execHandler runs every command that is not a builtin or a function as a
// simulated program; /bin/echo and the like run as their builtins.
func (p *proc) execHandler(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	std := stdio{in: hc.Stdin, out: hc.Stdout, err: hc.Stderr}
	if f, ok := std.in.(*os.File); ok && f == nil {
		std.in = nil
	}
	name := path.Base(args[0])
	if interp.IsBuiltin(name) {
		return hc.Builtin(ctx, append([]string{name}, args[1:]...))
	}
	code, wait, ok := p.program(ctx, std, name, args[1:])
	if !ok {
		wait = forever
	}
	if wait != 0 {
		p.wait(ctx, wait)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if code != 0 {
		return interp.ExitStatus(uint8(code))
	}
	return nil
}

// ---- files

// absPath is name from the shell's directory.
func absPath(ctx context.Context, name string) string {
	if !path.IsAbs(name) {
		name = path.Join(interp.HandlerCtx(ctx).Dir, name)
	}
	return name
}

// open opens the container's file name for a redirection: writes go to its
// filesystem (and to the host file mounted there, if one is); /dev/null,
// /dev/stdout and /dev/stderr are what they are.
func (p *proc) open(ctx context.Context, name string, flag int, _ os.FileMode) (io.ReadWriteCloser, error) {
	hc := interp.HandlerCtx(ctx)
	name = absPath(ctx, name)
	switch name {
	case "/dev/null":
		return nopRWC{w: io.Discard}, nil
	case "/dev/stdout", "/proc/1/fd/1", "/proc/self/fd/1":
		return nopRWC{w: hc.Stdout}, nil
	case "/dev/stderr", "/proc/1/fd/2", "/proc/self/fd/2":
		return nopRWC{w: hc.Stderr}, nil
	}
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	c := p.c
	if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		b, ok := c.fs[name]
		if host := c.hostPath(name); host != "" {
			hb, err := os.ReadFile(host)
			b, ok = hb, err == nil
		}
		if !ok {
			return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
		}
		return nopRWC{r: bytes.NewReader(bytes.Clone(b))}, nil
	}
	host := c.hostPath(name)
	if flag&os.O_TRUNC != 0 {
		c.fsw()[name] = nil
		delete(c.filled, name)
		if host != "" {
			_ = os.WriteFile(host, nil, 0o666)
		}
	} else if _, ok := c.fs[name]; !ok {
		c.fsw()[name] = nil
	}
	return &fileWriter{p: p, name: name, host: host}, nil
}

// fileWriter appends to a file of the container's filesystem.
type fileWriter struct {
	p          *proc
	name, host string
}

func (f *fileWriter) Write(b []byte) (int, error) {
	p := f.p
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if p.dead {
		return 0, os.ErrClosed
	}
	p.c.fsw()[f.name] = append(p.c.fs[f.name], b...)
	if f.host != "" {
		appendFile(f.host, b)
	}
	return len(b), nil
}

func (f *fileWriter) Read([]byte) (int, error) { return 0, io.EOF }
func (f *fileWriter) Close() error             { return nil }

// nopRWC reads r or writes w; Close does nothing.
type nopRWC struct {
	r io.Reader
	w io.Writer
}

func (n nopRWC) Read(b []byte) (int, error) {
	if n.r == nil {
		return 0, io.EOF
	}
	return n.r.Read(b)
}

func (n nopRWC) Write(b []byte) (int, error) {
	if n.w == nil {
		return 0, os.ErrInvalid
	}
	return n.w.Write(b)
}

func (nopRWC) Close() error { return nil }

// fileInfo is a file or directory of the container's filesystem.
type fileInfo struct {
	name string
	size int64
	dir  bool
}

func (f fileInfo) Name() string       { return path.Base(f.name) }
func (f fileInfo) Size() int64        { return f.size }
func (f fileInfo) ModTime() time.Time { return time.Time{} }
func (f fileInfo) IsDir() bool        { return f.dir }
func (f fileInfo) Sys() any           { return nil }
func (f fileInfo) Mode() os.FileMode {
	if f.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}

// stat is test -e/-f/-d/-s and cd on the container's filesystem.
func (p *proc) stat(ctx context.Context, name string, _ bool) (os.FileInfo, error) {
	name = absPath(ctx, name)
	p.r.mu.RLock()
	defer p.r.mu.RUnlock()
	c := p.c
	if b, ok := c.fs[name]; ok {
		return fileInfo{name: name, size: int64(len(b)) + int64(c.filled[name])}, nil
	}
	if host := c.hostPath(name); host != "" {
		if st, err := os.Stat(host); err == nil {
			return fileInfo{name: name, size: st.Size()}, nil
		}
	}
	if p.isDir(name) {
		return fileInfo{name: name, dir: true}, nil
	}
	return nil, &os.PathError{Op: "stat", Path: name, Err: os.ErrNotExist}
}

// access is test -r/-w/-x: root may do anything to what exists.
func (p *proc) access(ctx context.Context, name string, _ interp.AccessMode) error {
	_, err := p.stat(ctx, name, true)
	return err
}

// readDir lists a directory of the container's filesystem (for globs).
func (p *proc) readDir(ctx context.Context, dir string) ([]os.DirEntry, error) {
	dir = strings.TrimSuffix(absPath(ctx, dir), "/")
	p.r.mu.RLock()
	defer p.r.mu.RUnlock()
	if !p.isDir(dir) {
		return nil, &os.PathError{Op: "open", Path: dir, Err: os.ErrNotExist}
	}
	seen := map[string]bool{}
	var out []os.DirEntry
	for f, b := range p.c.fs {
		rest, ok := strings.CutPrefix(f, dir+"/")
		if !ok || rest == "" {
			continue
		}
		name, _, isDir := strings.Cut(rest, "/")
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, fsDirEntry(fileInfo{name: dir + "/" + name, size: int64(len(b)), dir: isDir}))
	}
	return out, nil
}

func fsDirEntry(fi fileInfo) os.DirEntry { return dirEntry{fi} }

type dirEntry struct{ fi fileInfo }

func (d dirEntry) Name() string               { return d.fi.Name() }
func (d dirEntry) IsDir() bool                { return d.fi.dir }
func (d dirEntry) Type() os.FileMode          { return d.fi.Mode().Type() }
func (d dirEntry) Info() (os.FileInfo, error) { return d.fi, nil }

func (p *proc) isDir(d string) bool {
	d = strings.TrimSuffix(d, "/")
	switch d {
	case "", "/tmp", "/etc", "/var", "/proc", "/dev", "/bin", "/usr", "/root", "/home", "/run":
		return true
	}
	for f := range p.c.fs {
		if strings.HasPrefix(f, d+"/") {
			return true
		}
	}
	return false
}

// touch creates files; the caller holds r.mu.
func (p *proc) touch(args []string) int {
	for _, f := range args {
		if strings.HasPrefix(f, "-") {
			continue
		}
		if _, ok := p.c.fs[f]; !ok {
			p.c.fsw()[f] = nil
		}
	}
	return 0
}

// rm removes files; the caller holds r.mu.
func (p *proc) rm(args []string, stderr sink) int {
	force := false
	code := 0
	for _, a := range args {
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			force = force || strings.Contains(a, "f")
			continue
		}
		if _, ok := p.c.fs[a]; ok {
			delete(p.c.fs, a)
			delete(p.c.filled, a)
		} else if !force {
			stderr([]byte("rm: can't remove '" + a + "': No such file or directory\n"))
			code = 1
		}
	}
	return code
}

// cat writes files of the container's filesystem (or host files mounted
// there), or its standard input without files.
func (p *proc) cat(std stdio, args []string) int {
	code := 0
	files := 0
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		files++
		p.r.mu.RLock()
		b, ok := p.c.fs[a]
		b = bytes.Clone(b)
		host := p.c.hostPath(a)
		p.r.mu.RUnlock()
		if host != "" {
			hb, err := os.ReadFile(host)
			b, ok = hb, err == nil
		}
		if !ok {
			fmt.Fprintf(std.err, "cat: can't open '%s': No such file or directory\n", a)
			code = 1
			continue
		}
		_, _ = std.out.Write(b)
	}
	if files == 0 && std.in != nil {
		_, _ = io.Copy(std.out, std.in)
	}
	return code
}

// ---- sleep

// parseSleep parses busybox sleep arguments: seconds (fractional) with an
// optional s/m/h/d suffix, summed; "infinity" means forever (-1).
func parseSleep(args []string) (time.Duration, error) {
	if len(args) == 0 {
		return 0, errors.New("sleep: missing operand")
	}
	var total time.Duration
	for _, a := range args {
		if a == "infinity" || a == "inf" {
			return -1, nil
		}
		mult := time.Second
		switch {
		case strings.HasSuffix(a, "s"):
			a = strings.TrimSuffix(a, "s")
		case strings.HasSuffix(a, "m"):
			a, mult = strings.TrimSuffix(a, "m"), time.Minute
		case strings.HasSuffix(a, "h"):
			a, mult = strings.TrimSuffix(a, "h"), time.Hour
		case strings.HasSuffix(a, "d"):
			a, mult = strings.TrimSuffix(a, "d"), 24*time.Hour
		}
		f, err := strconv.ParseFloat(a, 64)
		if err != nil || !(f >= 0 && f <= 1e9) { // NaN too
			return 0, fmt.Errorf("sleep: invalid number '%s'", a)
		}
		// Longer than a Duration holds (292 years) is forever; the
		// conversion would overflow to a negative or short sleep.
		x := f * float64(mult)
		if x >= float64(math.MaxInt64-total) {
			return -1, nil
		}
		total += time.Duration(x)
	}
	return total, nil
}

// sleep is how long sleep ARGS waits.
func (p *proc) sleep(std stdio, args []string) (int, time.Duration) {
	d, err := parseSleep(args)
	if err != nil {
		fmt.Fprintln(std.err, err)
		return 1, 0
	}
	if d == 0 {
		return 0, 0
	}
	return 0, d
}

// ---- listeners

// serve starts server program name (httpd, nc, ...) on port of the
// sandbox address: start serves l in the background and returns what
// stops it with the program, which then runs until stopped. From exec
// there are no listeners; a port it cannot listen on fails the program.
func (p *proc) serve(std stdio, name, port string, start func(l net.Listener) io.Closer) int {
	if p.exec {
		return 0
	}
	p.r.mu.Lock()
	if p.dead {
		p.r.mu.Unlock()
		return exitKilled
	}
	l, err := p.listen(port)
	if err == nil {
		p.closers = append(p.closers, start(l))
	}
	p.r.mu.Unlock()
	if err != nil {
		fmt.Fprintf(std.err, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

// listen opens a real TCP listener on the sandbox address.
func (p *proc) listen(port string) (net.Listener, error) {
	if i := strings.LastIndexByte(port, ':'); i >= 0 {
		port = port[i+1:]
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return nil, fmt.Errorf("bad port '%s'", port)
	}
	return net.Listen("tcp", net.JoinHostPort(p.c.sb.listenAddr(), strconv.Itoa(n)))
}

// httpd -p [IP:]PORT serves 200 "ok\n" to every request until stopped.
func (p *proc) httpd(std stdio, args []string) int {
	port := "80"
	for i := 0; i < len(args); i++ {
		if args[i] == "-p" && i+1 < len(args) {
			port = args[i+1]
			i++
		} else if strings.HasPrefix(args[i], "-p") && len(args[i]) > 2 {
			port = args[i][2:]
		}
	}
	return p.serve(std, "httpd", port, func(l net.Listener) io.Closer {
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = w.Write([]byte("ok\n"))
			}),
			ReadHeaderTimeout: 10 * time.Second,
		}
		go func() { _ = srv.Serve(l) }()
		return srv
	})
}

// grpc-health-checking [--port PORT] [--service NAME]... serves the
// standard gRPC health service (grpc.health.v1.Health) until stopped, as
// agnhost's subcommand of that name: the server ("") and each named service
// answer SERVING; other names NOT_FOUND. The default port is 5000.
func (p *proc) grpcHealth(std stdio, args []string) int {
	port := "5000"
	var services []string
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !hasValue && i+1 < len(args) && (name == "port" || name == "service") {
			value = args[i+1]
			i++
		}
		switch name {
		case "port":
			port = value
		case "service":
			services = append(services, value)
		}
	}
	return p.serve(std, "grpc-health-checking", port, func(l net.Listener) io.Closer {
		srv := grpc.NewServer()
		hs := health.NewServer()
		for _, s := range services {
			hs.SetServingStatus(s, healthpb.HealthCheckResponse_SERVING)
		}
		healthpb.RegisterHealthServer(srv, hs)
		go func() { _ = srv.Serve(l) }()
		return grpcCloser{srv}
	})
}

// grpcCloser stops a gRPC server with the process.
type grpcCloser struct{ srv *grpc.Server }

func (g grpcCloser) Close() error {
	g.srv.Stop()
	return nil
}

// nc -l[k] -p PORT accepts connections and closes them until stopped.
func (p *proc) nc(std stdio, args []string) int {
	listen := false
	port := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || len(a) < 2 {
			if listen && port == "" {
				port = a
			}
			continue
		}
		flags := a[1:]
		if strings.Contains(flags, "l") {
			listen = true
		}
		if j := strings.IndexByte(flags, 'p'); j >= 0 {
			if rest := flags[j+1:]; rest != "" {
				port = rest
			} else if i+1 < len(args) {
				port = args[i+1]
				i++
			}
		}
	}
	if !listen || port == "" {
		return 0 // client mode: runs until stopped
	}
	return p.serve(std, "nc", port, func(l net.Listener) io.Closer {
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				_ = conn.Close()
			}
		}()
		return l
	})
}
