package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A proc is one running program: a container's main program or an exec. It
// runs entirely under r.mu: synchronous commands run inline, sleeps continue
// from a time.AfterFunc callback, blocking commands (listeners, unknown
// programs, sleep infinity) simply never continue until the proc is killed.
type proc struct {
	r       *Runtime
	c       *container
	exec    bool         // exec: output goes to stdout/stderr buffers
	stdout  bytes.Buffer // exec only
	stderr  bytes.Buffer // exec only
	timer   *time.Timer
	closers []io.Closer
	dead    bool
	onExit  func(code int) // called once, under r.mu, when the program ends by itself
}

// lastExitMarker stands for $? inside parsed words; it is replaced when the
// command runs.
const lastExitMarker = "\x00?"

type redirect struct {
	fd     int // 1 or 2
	append bool
	target string // file, or "&1" / "&2"
}

type stmt struct {
	op     string // how it joins the previous statement: "", ";", "&&", "||"
	args   []string
	redirs []redirect
}

// cont receives a command's exit code; exit is true when the command ends
// the enclosing shell (exit, exec).
type cont func(code int, exit bool)

func (p *proc) start(argv []string) {
	if len(argv) == 0 {
		return // no command: runs until stopped
	}
	p.run(argv, nil, 0, func(code int, _ bool) { p.finish(code) })
}

// finish ends the proc by itself and reports code.
func (p *proc) finish(code int) {
	if p.dead {
		return
	}
	p.release()
	p.onExit(code)
}

// kill ends the proc without reporting.
func (p *proc) kill() {
	if !p.dead {
		p.release()
	}
}

func (p *proc) release() {
	p.dead = true
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

type sink func(b []byte)

func (p *proc) streams(redirs []redirect) (stdout, stderr sink) {
	stdout = func(b []byte) { p.emit(runtimeapi.Stdout, b) }
	stderr = func(b []byte) { p.emit(runtimeapi.Stderr, b) }
	for _, rd := range redirs {
		var s sink
		switch rd.target {
		case "&1", "/dev/stdout", "/proc/1/fd/1", "/proc/self/fd/1":
			s = stdout
		case "&2", "/dev/stderr", "/proc/1/fd/2", "/proc/self/fd/2":
			s = stderr
		case "/dev/null":
			s = func([]byte) {}
		default:
			name := rd.target
			if !rd.append {
				p.c.fsw()[name] = nil
				delete(p.c.filled, name)
			} else if _, ok := p.c.fs[name]; !ok {
				p.c.fsw()[name] = nil
			}
			host := p.c.hostPath(name)
			if host != "" && !rd.append {
				_ = os.WriteFile(host, nil, 0o666)
			}
			s = func(b []byte) {
				p.c.fsw()[name] = append(p.c.fs[name], b...)
				if host != "" {
					appendFile(host, b)
				}
			}
		}
		if rd.fd == 2 {
			stderr = s
		} else {
			stdout = s
		}
	}
	return stdout, stderr
}

func (p *proc) emit(stream runtimeapi.LogStreamType, b []byte) {
	if p.exec {
		if stream == runtimeapi.Stderr {
			p.stderr.Write(b)
		} else {
			p.stdout.Write(b)
		}
		return
	}
	p.c.broadcast(stream, b)
	if p.c.logPath == "" || len(b) == 0 {
		return
	}
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

// ---- interpreter

func (p *proc) runList(list []stmt, i, last int, k func(code int)) {
	for i < len(list) {
		s := list[i]
		if (s.op == "&&" && last != 0) || (s.op == "||" && last == 0) {
			i++
			continue
		}
		break
	}
	if i >= len(list) {
		k(last)
		return
	}
	s := list[i]
	args := make([]string, len(s.args))
	for j, a := range s.args {
		args[j] = strings.ReplaceAll(a, lastExitMarker, strconv.Itoa(last))
	}
	p.run(args, s.redirs, last, func(code int, exit bool) {
		if p.dead {
			return
		}
		if exit {
			k(code)
			return
		}
		p.runList(list, i+1, code, k)
	})
}

// run executes one command and calls k with its result, now or later.
func (p *proc) run(argv []string, redirs []redirect, last int, k cont) {
	if p.dead {
		return
	}
	// Leading variable assignments (FOO=bar cmd) are accepted and ignored.
	for len(argv) > 0 && isAssignment(argv[0]) {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		k(0, false)
		return
	}
	stdout, stderr := p.streams(redirs)
	name := path.Base(argv[0])
	args := argv[1:]
	switch name {
	case "sh", "bash", "ash", "dash":
		script, ok := shellScript(args)
		if !ok {
			return // an interactive shell: runs until stopped
		}
		list, err := parseScriptEnv(script, p.c.getenv)
		if err != nil {
			stderr([]byte(name + ": " + err.Error() + "\n"))
			k(2, false)
			return
		}
		p.runList(list, 0, 0, func(code int) { k(code, false) })
	case "exec":
		if len(args) == 0 {
			k(0, false)
			return
		}
		p.run(args, redirs, last, func(code int, _ bool) { k(code, true) })
	case "exit":
		code := last
		if len(args) > 0 {
			n, err := strconv.Atoi(args[0])
			if err != nil {
				stderr([]byte("sh: exit: illegal number: " + args[0] + "\n"))
				n = 2
			}
			code = n & 0xff
		}
		k(code, true)
	case "true", ":", "mkdir", "trap", "wait", "set", "export", "cd", "ulimit", "umask":
		k(0, false)
	case "false":
		k(1, false)
	case "sleep":
		p.sleep(args, stderr, k)
	case "echo":
		stdout([]byte(echo(args)))
		k(0, false)
	case "touch":
		for _, f := range args {
			if strings.HasPrefix(f, "-") {
				continue
			}
			if _, ok := p.c.fs[f]; !ok {
				p.c.fsw()[f] = nil
			}
		}
		k(0, false)
	case "rm":
		k(p.rm(args, stderr), false)
	case "alloc":
		k(p.alloc(args, stderr), false)
	case "free":
		k(p.free(args, stderr), false)
	case "fill":
		k(p.fill(args, stderr), false)
	case "spawn":
		k(p.spawn(args, stderr), false)
	case "reap":
		k(p.reap(args, stderr), false)
	case "cat":
		k(p.cat(args, stdout, stderr), false)
	case "test":
		k(p.test(args, stderr), false)
	case "[":
		if len(args) == 0 || args[len(args)-1] != "]" {
			stderr([]byte("[: missing ]\n"))
			k(2, false)
			return
		}
		k(p.test(args[:len(args)-1], stderr), false)
	case "httpd":
		p.httpd(args, stderr, k)
	case "nc", "netcat":
		p.nc(args, stderr, k)
	case "grpc-health-checking":
		p.grpcHealth(args, stderr, k)
	case "agnhost": // agnhost grpc-health-checking --port N, as upstream's e2e tests run it
		if len(args) > 0 && args[0] == "grpc-health-checking" {
			p.grpcHealth(args[1:], stderr, k)
		}
	default:
		// Any other program runs until it is stopped.
	}
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

// shellScript finds the -c script in a shell's arguments (-c, -ec, -xc...).
func shellScript(args []string) (string, bool) {
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			return "", false
		}
		if strings.Contains(a[1:], "c") && !strings.HasPrefix(a, "--") {
			if i+1 < len(args) {
				return args[i+1], true
			}
			return "", false
		}
	}
	return "", false
}

func echo(args []string) string {
	newline := true
	for len(args) > 0 && (args[0] == "-n" || args[0] == "-e" || args[0] == "-E" || args[0] == "-ne" || args[0] == "-en") {
		if strings.Contains(args[0], "n") {
			newline = false
		}
		args = args[1:]
	}
	s := strings.Join(args, " ")
	if newline {
		s += "\n"
	}
	return s
}

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

func (p *proc) sleep(args []string, stderr sink, k cont) {
	d, err := parseSleep(args)
	if err != nil {
		stderr([]byte(err.Error() + "\n"))
		k(1, false)
		return
	}
	if d < 0 {
		return // sleep infinity
	}
	r := p.r
	p.timer = time.AfterFunc(d, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if p.dead {
			return
		}
		p.timer = nil
		k(0, false)
	})
}

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

func (p *proc) cat(args []string, stdout, stderr sink) int {
	code := 0
	for _, a := range args {
		if a == "-" || strings.HasPrefix(a, "-") {
			continue
		}
		b, ok := p.c.fs[a]
		if host := p.c.hostPath(a); host != "" {
			hb, err := os.ReadFile(host)
			b, ok = hb, err == nil
		}
		if !ok {
			stderr([]byte("cat: can't open '" + a + "': No such file or directory\n"))
			code = 1
			continue
		}
		stdout(b)
	}
	return code
}

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

// test evaluates test(1) expressions: -f -e -d -s -n -z, = != -eq -ne -lt
// -le -gt -ge, and a leading !.
func (p *proc) test(args []string, stderr sink) int {
	neg := false
	for len(args) > 0 && args[0] == "!" {
		neg = !neg
		args = args[1:]
	}
	ok, bad := p.testExpr(args)
	if bad {
		stderr([]byte("test: unsupported expression " + strconv.Quote(strings.Join(args, " ")) + "\n"))
		return 2
	}
	if ok != neg {
		return 0
	}
	return 1
}

func (p *proc) testExpr(args []string) (ok, bad bool) {
	switch len(args) {
	case 0:
		return false, false
	case 1:
		return args[0] != "", false
	case 2:
		a := args[1]
		switch args[0] {
		case "-f":
			_, ok := p.c.fs[a]
			return ok || p.c.hostPath(a) != "", false
		case "-e":
			_, ok := p.c.fs[a]
			return ok || p.isDir(a) || p.c.hostPath(a) != "", false
		case "-d":
			return p.isDir(a), false
		case "-s":
			return len(p.c.fs[a]) > 0 || p.c.filled[a] > 0, false
		case "-n":
			return a != "", false
		case "-z":
			return a == "", false
		}
	case 3:
		a, op, b := args[0], args[1], args[2]
		switch op {
		case "=", "==":
			return a == b, false
		case "!=":
			return a != b, false
		}
		x, err1 := strconv.Atoi(a)
		y, err2 := strconv.Atoi(b)
		if err1 != nil || err2 != nil {
			return false, true
		}
		switch op {
		case "-eq":
			return x == y, false
		case "-ne":
			return x != y, false
		case "-lt":
			return x < y, false
		case "-le":
			return x <= y, false
		case "-gt":
			return x > y, false
		case "-ge":
			return x >= y, false
		}
	}
	return false, true
}

// serve runs server program name (httpd, nc, ...) on port of the sandbox
// address: start serves l in the background and returns what stops it with
// the process. From exec there are no listeners (the program blocks until
// the timeout); a port it cannot listen on fails the program.
func (p *proc) serve(name, port string, stderr sink, k cont, start func(l net.Listener) io.Closer) {
	if p.exec {
		return
	}
	l, err := p.listen(port)
	if err != nil {
		stderr([]byte(name + ": " + err.Error() + "\n"))
		k(1, false)
		return
	}
	p.closers = append(p.closers, start(l))
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
func (p *proc) httpd(args []string, stderr sink, k cont) {
	port := "80"
	for i := 0; i < len(args); i++ {
		if args[i] == "-p" && i+1 < len(args) {
			port = args[i+1]
			i++
		} else if strings.HasPrefix(args[i], "-p") && len(args[i]) > 2 {
			port = args[i][2:]
		}
	}
	p.serve("httpd", port, stderr, k, func(l net.Listener) io.Closer {
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = io.WriteString(w, "ok\n")
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
func (p *proc) grpcHealth(args []string, stderr sink, k cont) {
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
	p.serve("grpc-health-checking", port, stderr, k, func(l net.Listener) io.Closer {
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
func (p *proc) nc(args []string, stderr sink, k cont) {
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
		return // client mode: runs until stopped
	}
	p.serve("nc", port, stderr, k, func(l net.Listener) io.Closer {
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

// ---- parser

// parseScript splits a sh -c script into statements joined by ; && || | &
// and newlines, with quotes, backslashes, comments, $VAR/${VAR} expanded
// from env, $? kept as a marker, and > >> 2> 2>&1 redirections.
func parseScript(src string, env map[string]string) ([]stmt, error) {
	return parseScriptEnv(src, func(k string) string { return env[k] })
}

// parseScriptEnv is parseScript with the variables' values from getenv.
func parseScriptEnv(src string, getenv func(string) string) ([]stmt, error) {
	var (
		list   []stmt
		cur    stmt
		word   strings.Builder
		inWord bool
		quoted bool // the current word had quotes (so "2" is not an fd)
		pendOp = ""
		redir  *redirect
	)
	endWord := func() {
		if !inWord {
			return
		}
		w := word.String()
		word.Reset()
		inWord, quoted = false, false
		if redir != nil {
			redir.target = w
			cur.redirs = append(cur.redirs, *redir)
			redir = nil
			return
		}
		cur.args = append(cur.args, w)
	}
	endStmt := func(op string) error {
		endWord()
		if redir != nil {
			return errors.New("syntax error: redirection without target")
		}
		if len(cur.args) == 0 && len(cur.redirs) == 0 {
			if op == "&&" || op == "||" {
				return fmt.Errorf("syntax error near unexpected token `%s'", op)
			}
			return nil
		}
		cur.op = pendOp
		list = append(list, cur)
		cur = stmt{}
		pendOp = op
		return nil
	}
	expand := func(s string, i int) (string, int) {
		// s[i] == '$'
		if i+1 >= len(s) {
			return "$", i + 1
		}
		switch c := s[i+1]; {
		case c == '?':
			return lastExitMarker, i + 2
		case c == '$':
			return "1", i + 2
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "${", i + 2
			}
			name := s[i+2 : i+end]
			if j := strings.Index(name, ":-"); j >= 0 {
				if v := getenv(name[:j]); v != "" {
					return v, i + end + 1
				}
				return name[j+2:], i + end + 1
			}
			return getenv(name), i + end + 1
		case c >= '0' && c <= '9':
			return "", i + 2
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			return getenv(s[i+1 : j]), j
		}
		return "$", i + 1
	}
	s := src
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			endWord()
			i++
		case c == '#' && !inWord:
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '\n' || c == ';' || c == '&' || c == '|':
			// "&&" and "||" chain on the status; a newline, ";" or a lone
			// "&" or "|" (no jobs, no pipes) just ends the statement.
			op, sep := s[i:i+1], ";"
			if (c == '&' || c == '|') && i+1 < len(s) && s[i+1] == c {
				op = s[i : i+2]
				sep = op
			}
			if err := endStmt(sep); err != nil {
				return nil, err
			}
			i += len(op)
		case c == '>' || c == '<':
			fd := 1
			if inWord && !quoted && (word.String() == "1" || word.String() == "2") {
				fd, _ = strconv.Atoi(word.String())
				word.Reset()
				inWord = false
			} else {
				endWord()
			}
			if c == '<' {
				fd = 0
			}
			rd := &redirect{fd: fd}
			i++
			if c == '>' && i < len(s) && s[i] == '>' {
				rd.append = true
				i++
			}
			if i < len(s) && s[i] == '&' {
				j := i + 1
				for j < len(s) && s[j] >= '0' && s[j] <= '9' {
					j++
				}
				rd.target = "&" + s[i+1:j]
				i = j
				if rd.fd != 0 {
					cur.redirs = append(cur.redirs, *rd)
				}
				continue
			}
			if fd == 0 {
				rd.fd = -1 // input: target is read and dropped
			}
			redir = rd
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("syntax error: unterminated quoted string")
			}
			word.WriteString(s[i+1 : i+1+j])
			inWord, quoted = true, true
			i += j + 2
		case c == '"':
			inWord, quoted = true, true
			i++
			closed := false
			for i < len(s) {
				d := s[i]
				if d == '"' {
					closed = true
					i++
					break
				}
				if d == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					word.WriteByte(s[i+1])
					i += 2
					continue
				}
				if d == '$' {
					v, j := expand(s, i)
					word.WriteString(v)
					i = j
					continue
				}
				word.WriteByte(d)
				i++
			}
			if !closed {
				return nil, errors.New("syntax error: unterminated quoted string")
			}
		case c == '\\':
			if i+1 < len(s) {
				if s[i+1] != '\n' {
					word.WriteByte(s[i+1])
					inWord = true
				}
				i += 2
			} else {
				i++
			}
		case c == '$':
			v, j := expand(s, i)
			word.WriteString(v)
			inWord = inWord || v != "" // an empty unquoted expansion is no word
			i = j
		default:
			word.WriteByte(c)
			inWord = true
			i++
		}
	}
	if err := endStmt(""); err != nil {
		return nil, err
	}
	if pendOp == "&&" || pendOp == "||" {
		return nil, errors.New("syntax error: unexpected end of file")
	}
	// Drop input redirections.
	for i := range list {
		rs := list[i].redirs[:0]
		for _, rd := range list[i].redirs {
			if rd.fd > 0 {
				rs = append(rs, rd)
			}
		}
		list[i].redirs = rs
	}
	return list, nil
}
