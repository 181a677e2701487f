package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// kubeadmTimeout bounds deploy/local/kubeadm.sh init-artifacts once the
// control plane is up: the first run builds kubeadm (about 100 s on 2
// cores with an empty build cache).
const kubeadmTimeout = 15 * time.Minute

// KubeadmEnv is what deploy/local/kubeadm.sh init-artifacts prints: what
// `kubeadm join` needs to join the local control plane.
type KubeadmEnv struct {
	Kubeadm     string // KUBEADM: the kubeadm binary (the control plane's version)
	APIEndpoint string // KUBEADM_API_ENDPOINT: 127.0.0.1:<port>, kubeadm join's argument
	Token       string // KUBEADM_TOKEN: <id>.<secret>, --token
	CACertHash  string // KUBEADM_CA_CERT_HASH: sha256:<hex>, --discovery-token-ca-cert-hash
	ClusterDNS  string // KUBEADM_CLUSTER_DNS: the clusterDNS of the kubelet-config ConfigMap
}

// TokenID is the bootstrap token's id (the part before the dot): the
// token authenticates as system:bootstrap:<id>.
func (e KubeadmEnv) TokenID() string {
	id, _, _ := strings.Cut(e.Token, ".")
	return id
}

var kubeadmPart part[KubeadmEnv]

// Kubeadm brings up the local control plane (as ControlPlane) and what
// `kubeadm init` would have set up there for joins (cluster-info signed for
// a bootstrap token, kubeadm-config, kubelet-config, kubeadm's bootstrap
// RBAC) through deploy/local/kubeadm.sh init-artifacts, once per test
// process, and returns what the script printed. The first call builds
// kubeadm. When the machine cannot run it (exit 3) the test is skipped with
// the reason, or fails when CI=true; a control plane without bootstrap
// token support fails the test with the script's explanation.
func Kubeadm(t testing.TB) KubeadmEnv {
	t.Helper()
	ControlPlane(t)
	root := RepoRoot(t)
	kubeadmPart.once.Do(func() {
		timeout := scriptBudget(t, kubeadmTimeout)
		msg := fmt.Sprintf("no answer within %v (the first run builds kubeadm, ~100 s: "+
			"run deploy/local/kubeadm.sh build first)", timeout)
		kubeadmPart.run(root, "kubeadm.sh", "init-artifacts", timeout, msg, func(vals map[string]string) (KubeadmEnv, bool) {
			e := KubeadmEnv{
				Kubeadm:     vals["KUBEADM"],
				APIEndpoint: vals["KUBEADM_API_ENDPOINT"],
				Token:       vals["KUBEADM_TOKEN"],
				CACertHash:  vals["KUBEADM_CA_CERT_HASH"],
				ClusterDNS:  vals["KUBEADM_CLUSTER_DNS"],
			}
			return e, e.Kubeadm != "" && e.APIEndpoint != "" && e.Token != "" && e.CACertHash != ""
		})
	})
	return kubeadmPart.get(t, "kubeadm join artifacts", "deploy/local/kubeadm.sh init-artifacts")
}

var systemctl struct {
	once sync.Once
	dir  string
	err  error
}

// SystemctlStandIn builds the stand-in for systemctl (internal/testenv/systemctl,
// see SystemctlMain) once per test process and returns the directory that
// holds it as "systemctl": put it first on a command's PATH.
func SystemctlStandIn(t testing.TB) string {
	t.Helper()
	root := RepoRoot(t)
	systemctl.once.Do(func() {
		dir, err := os.MkdirTemp("", "actorlet-systemctl")
		if err != nil {
			systemctl.err = err
			return
		}
		systemctl.dir = dir
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "systemctl"), "./internal/testenv/systemctl")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			systemctl.err = fmt.Errorf("go build ./internal/testenv/systemctl: %v\n%s", err, out)
		}
	})
	if systemctl.err != nil {
		t.Fatal(systemctl.err)
	}
	return systemctl.dir
}

// The stand-in's environment: where it reads units and keeps its state.
const (
	EnvSystemctlUnitDir  = "ACTORLET_SYSTEMCTL_UNIT_DIR"
	EnvSystemctlStateDir = "ACTORLET_SYSTEMCTL_STATE_DIR"
)

// ---------------------------------------------------------------------------
// systemd units: the subset of systemd.service(5) and systemd.exec(5) that
// kubeadm's kubelet unit uses, read as systemd reads it.

// Unit is a service unit with its drop-ins applied.
type Unit struct {
	// Environment holds the Environment= assignments (KEY=VALUE), in order.
	Environment []string
	// EnvironmentFiles are the EnvironmentFile= paths, in order.
	EnvironmentFiles []EnvironmentFile
	// ExecStart is the command line of the last ExecStart= (an empty
	// ExecStart= resets the list, as in a drop-in), not yet expanded.
	ExecStart string
	// Files are the files read: the unit, then its drop-ins.
	Files []string
}

// EnvironmentFile is one EnvironmentFile= setting.
type EnvironmentFile struct {
	Path     string
	Optional bool // "-" prefix: a missing file is not an error
}

// LoadUnit reads unitDir/name and its drop-ins unitDir/name.d/*.conf in
// lexical order, as systemd does for one unit directory.
func LoadUnit(unitDir, name string) (*Unit, error) {
	if !strings.Contains(name, ".") {
		name += ".service"
	}
	files := []string{filepath.Join(unitDir, name)}
	dropins, err := filepath.Glob(filepath.Join(unitDir, name+".d", "*.conf"))
	if err != nil {
		return nil, err
	}
	sort.Strings(dropins)
	files = append(files, dropins...)
	u := &Unit{}
	var execStarts []string
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			if i == 0 && errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("unit %s: %w", name, ErrUnitNotFound)
			}
			return nil, fmt.Errorf("unit %s: %w", name, err)
		}
		u.Files = append(u.Files, f)
		if err := u.parse(f, string(b), &execStarts); err != nil {
			return nil, err
		}
	}
	switch len(execStarts) {
	case 0:
		return nil, fmt.Errorf("unit %s: no ExecStart= (in %s)", name, strings.Join(u.Files, ", "))
	case 1:
		u.ExecStart = execStarts[0]
	default:
		return nil, fmt.Errorf("unit %s: %d ExecStart= lines for a simple service (reset with an empty ExecStart= first)", name, len(execStarts))
	}
	return u, nil
}

// ErrUnitNotFound is LoadUnit's error for a unit file that does not exist.
var ErrUnitNotFound = errors.New("not found")

func (u *Unit) parse(file, text string, execStarts *[]string) error {
	section := ""
	lines := strings.Split(text, "\n")
	for n := 0; n < len(lines); n++ {
		line := strings.TrimSpace(lines[n])
		lineNo := n + 1
		for strings.HasSuffix(line, `\`) && n+1 < len(lines) { // continuation
			n++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(lines[n])
		}
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			if !strings.HasSuffix(line, "]") {
				return fmt.Errorf("%s:%d: bad section header %q", file, lineNo, line)
			}
			section = line[1 : len(line)-1]
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("%s:%d: not KEY=VALUE: %q", file, lineNo, line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if section != "Service" {
			continue
		}
		switch key {
		case "Environment":
			words, err := splitWords(value, nil)
			if err != nil {
				return fmt.Errorf("%s:%d: Environment=: %w", file, lineNo, err)
			}
			for _, w := range words {
				if k, _, ok := strings.Cut(w, "="); !ok || !validEnvName(k) {
					return fmt.Errorf("%s:%d: Environment=: %q is not KEY=VALUE", file, lineNo, w)
				}
				u.Environment = append(u.Environment, w)
			}
		case "EnvironmentFile":
			if value == "" {
				u.EnvironmentFiles = nil
				continue
			}
			ef := EnvironmentFile{Path: value}
			if strings.HasPrefix(value, "-") {
				ef = EnvironmentFile{Path: value[1:], Optional: true}
			}
			if !filepath.IsAbs(ef.Path) {
				return fmt.Errorf("%s:%d: EnvironmentFile=%s: not an absolute path", file, lineNo, value)
			}
			u.EnvironmentFiles = append(u.EnvironmentFiles, ef)
		case "ExecStart":
			if value == "" {
				*execStarts = nil
				continue
			}
			*execStarts = append(*execStarts, value)
		}
	}
	return nil
}

// Command is what systemd would run for the unit: the environment
// (Environment=, then the EnvironmentFile= files, which override it) and
// ExecStart= split into words with "$VAR" (a word of its own: the value split
// at whitespace, zero or more words) and "${VAR}" (the value as is, inside
// one word) expanded. readFile reads an environment file (os.ReadFile).
func (u *Unit) Command(readFile func(string) ([]byte, error)) (argv, env []string, err error) {
	vars := map[string]string{}
	var order []string
	set := func(kv string) {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, kv := range u.Environment {
		set(kv)
	}
	for _, ef := range u.EnvironmentFiles {
		b, err := readFile(ef.Path)
		if err != nil {
			if ef.Optional && errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, nil, fmt.Errorf("EnvironmentFile=%s: %w", ef.Path, err)
		}
		kvs, err := ParseEnvironmentFile(b)
		if err != nil {
			return nil, nil, fmt.Errorf("EnvironmentFile=%s: %w", ef.Path, err)
		}
		for _, kv := range kvs {
			set(kv)
		}
	}
	line := u.ExecStart
	expand := true
	for len(line) > 0 && strings.ContainsRune("-@+!:", rune(line[0])) {
		switch line[0] {
		case '-': // a failing exit is not a failure: no difference here
		case ':':
			expand = false
		default:
			return nil, nil, fmt.Errorf("ExecStart=%s: prefix %q is not supported by the stand-in", u.ExecStart, line[0])
		}
		line = line[1:]
	}
	var lookup map[string]string
	if expand {
		lookup = vars
	}
	argv, err = splitWords(line, lookup)
	if err != nil {
		return nil, nil, fmt.Errorf("ExecStart=%s: %w", u.ExecStart, err)
	}
	if len(argv) == 0 || !filepath.IsAbs(argv[0]) {
		return nil, nil, fmt.Errorf("ExecStart=%s: the command must be an absolute path", u.ExecStart)
	}
	for _, k := range order {
		env = append(env, k+"="+vars[k])
	}
	return argv, env, nil
}

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// splitWords splits a systemd command line (or Environment= value) into
// words: whitespace separates, "..." and '...' quote, backslash escapes. With
// vars non-nil, a word that is exactly an unquoted $NAME becomes the value
// of NAME split at whitespace (no word if unset or empty), ${NAME} anywhere
// becomes the value as is, and $$ a literal $.
func splitWords(s string, vars map[string]string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	start := 0 // where the current word began in s
	flush := func(end int) {
		if !inWord {
			return
		}
		raw := s[start:end]
		if vars != nil && !quoted && strings.HasPrefix(raw, "$") && validEnvName(raw[1:]) {
			words = append(words, strings.Fields(vars[raw[1:]])...)
		} else {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord, quoted = false, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			flush(i)
		case c == '"' || c == '\'':
			if !inWord {
				inWord, start = true, i
			}
			quoted = true
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && c == '"' && j+1 < len(s) {
					j++
					cur.WriteByte(unescape(s[j]))
					continue
				}
				if vars != nil && s[j] == '$' {
					n, err := expandVar(s[j:], vars, &cur)
					if err != nil {
						return nil, err
					}
					j += n - 1
					continue
				}
				cur.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated %c quote", c)
			}
			i = j
		case c == '\\':
			if !inWord {
				inWord, start = true, i
			}
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			cur.WriteByte(unescape(s[i]))
		case c == '$' && vars != nil:
			if !inWord {
				inWord, start = true, i
			}
			n, err := expandVar(s[i:], vars, &cur)
			if err != nil {
				return nil, err
			}
			i += n - 1
		default:
			if !inWord {
				inWord, start = true, i
			}
			cur.WriteByte(c)
		}
	}
	flush(len(s))
	return words, nil
}

// expandVar expands the variable reference at the start of s ($$, ${NAME}
// or $NAME) into cur and returns how many bytes of s it used.
func expandVar(s string, vars map[string]string, cur *strings.Builder) (int, error) {
	switch {
	case strings.HasPrefix(s, "$$"):
		cur.WriteByte('$')
		return 2, nil
	case strings.HasPrefix(s, "${"):
		end := strings.IndexByte(s, '}')
		if end < 0 || !validEnvName(s[2:end]) {
			return 0, fmt.Errorf("bad variable reference %q", s)
		}
		cur.WriteString(vars[s[2:end]])
		return end + 1, nil
	}
	n := 1
	for n < len(s) && validEnvName(s[1:n+1]) {
		n++
	}
	if n == 1 {
		cur.WriteByte('$')
		return 1, nil
	}
	cur.WriteString(vars[s[1:n]]) // $NAME inside a word: systemd treats it as ${NAME}
	return n, nil
}

func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 't':
		return '\t'
	}
	return c
}

// ParseEnvironmentFile reads an EnvironmentFile= file as systemd does:
// KEY=VALUE lines, # and ; comments, blank lines; a value may be quoted
// ("..." with backslash escapes, or '...'), an unquoted one is trimmed; a
// trailing backslash continues a line. It returns KEY=VALUE strings in order.
func ParseEnvironmentFile(b []byte) ([]string, error) {
	var out []string
	lines := strings.Split(string(b), "\n")
	for n := 0; n < len(lines); n++ {
		line := strings.TrimSpace(lines[n])
		lineNo := n + 1
		for strings.HasSuffix(line, `\`) && n+1 < len(lines) {
			n++
			line = strings.TrimSuffix(line, `\`) + strings.TrimSpace(lines[n])
		}
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || !validEnvName(k) {
			return nil, fmt.Errorf("line %d: not KEY=VALUE: %q", lineNo, line)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 1 && (v[0] == '"' || v[0] == '\'') {
			q := v[0]
			var val strings.Builder
			j := 1
			for ; j < len(v) && v[j] != q; j++ {
				if q == '"' && v[j] == '\\' && j+1 < len(v) {
					j++
				}
				val.WriteByte(v[j])
			}
			if j >= len(v) {
				return nil, fmt.Errorf("line %d: unterminated %c quote in %s", lineNo, q, k)
			}
			if rest := strings.TrimSpace(v[j+1:]); rest != "" {
				return nil, fmt.Errorf("line %d: %q after the quoted value of %s", lineNo, rest, k)
			}
			v = val.String()
		}
		out = append(out, k+"="+v)
	}
	return out, nil
}

// ---------------------------------------------------------------------------
// the stand-in for systemctl

// servicePath is the PATH a service gets (systemd's default for services).
const servicePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// stopTimeout is how long stop waits after SIGTERM before SIGKILL
// (systemd's default TimeoutStopSec is 90 s; actorlet stops in seconds).
const stopTimeout = 30 * time.Second

// SystemctlMain is the stand-in for systemctl that `kubeadm join` calls on
// machines without systemd (PID 1 is not systemd here), run by
// internal/testenv/systemctl. It reads service units from
// $ACTORLET_SYSTEMCTL_UNIT_DIR (the directory deploy/install.sh installed
// them into) and keeps pid files and logs in $ACTORLET_SYSTEMCTL_STATE_DIR.
//
//	daemon-reload, enable, disable   nothing to do: exit 0
//	start UNIT, restart UNIT         (re)start the service: the unit's
//	                                 ExecStart= run exactly as systemd would
//	                                 (see Unit.Command), in its own session,
//	                                 output appended to STATE/UNIT.log
//	stop UNIT                        SIGTERM, SIGKILL after 30 s
//	is-active, is-enabled, status    as systemctl prints them (exit 0 when
//	                                 active/enabled, 3 when inactive, 4 for an
//	                                 unknown unit)
//
// What it does not do: Restart=always (a service that exits stays down;
// the test sees it), dependencies, cgroups.
func SystemctlMain(args []string, stdout, stderr io.Writer) int {
	s := standIn{
		unitDir:  os.Getenv(EnvSystemctlUnitDir),
		stateDir: os.Getenv(EnvSystemctlStateDir),
		stdout:   stdout,
		stderr:   stderr,
	}
	if s.unitDir == "" || s.stateDir == "" {
		fmt.Fprintf(stderr, "systemctl (actorlet test stand-in): %s and %s must be set\n", EnvSystemctlUnitDir, EnvSystemctlStateDir)
		return 1
	}
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") { // --no-pager, -q, --system, ...
			continue
		}
		words = append(words, a)
	}
	if len(words) == 0 {
		fmt.Fprintln(stderr, "systemctl (actorlet test stand-in): no command")
		return 1
	}
	s.logCall(args)
	cmd, units := words[0], words[1:]
	switch cmd {
	case "daemon-reload", "enable", "disable", "reset-failed":
		return 0
	case "start", "restart", "stop", "is-active", "is-enabled", "status":
	default:
		fmt.Fprintf(stderr, "systemctl (actorlet test stand-in): command %q is not supported\n", cmd)
		return 1
	}
	if len(units) != 1 {
		fmt.Fprintf(stderr, "systemctl (actorlet test stand-in): %s needs exactly one unit, got %q\n", cmd, units)
		return 1
	}
	return s.run(cmd, unitName(units[0]))
}

type standIn struct {
	unitDir, stateDir string
	stdout, stderr    io.Writer
}

func unitName(u string) string {
	if !strings.Contains(u, ".") {
		return u + ".service"
	}
	return u
}

func (s standIn) logCall(args []string) {
	f, err := os.OpenFile(filepath.Join(s.stateDir, "systemctl.calls"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	fmt.Fprintln(f, strings.Join(args, " "))
}

func (s standIn) run(cmd, unit string) int {
	u, err := LoadUnit(s.unitDir, unit)
	known := err == nil
	if err != nil && !errors.Is(err, ErrUnitNotFound) {
		fmt.Fprintf(s.stderr, "Failed to load %s: %v\n", unit, err)
		return 1
	}
	pid, active := s.pid(unit)
	switch cmd {
	case "is-active":
		if active {
			fmt.Fprintln(s.stdout, "active")
			return 0
		}
		fmt.Fprintln(s.stdout, "inactive")
		return 3
	case "is-enabled":
		if known {
			fmt.Fprintln(s.stdout, "enabled")
			return 0
		}
		fmt.Fprintf(s.stderr, "Failed to get unit file state for %s: No such file or directory\n", unit)
		return 4
	case "status":
		if !known {
			fmt.Fprintf(s.stderr, "Unit %s could not be found.\n", unit)
			return 4
		}
		fmt.Fprintf(s.stdout, "● %s\n     Loaded: loaded (%s; enabled)\n", unit, strings.Join(u.Files, ", "))
		if active {
			fmt.Fprintf(s.stdout, "     Active: active (running)\n   Main PID: %d\n", pid)
			return 0
		}
		fmt.Fprintln(s.stdout, "     Active: inactive (dead)")
		return 3
	}
	if !known {
		fmt.Fprintf(s.stderr, "Failed to %s %s: Unit %s not found.\n", cmd, unit, unit)
		return 5
	}
	if cmd == "stop" || cmd == "restart" {
		if err := s.stop(unit); err != nil {
			fmt.Fprintf(s.stderr, "Failed to stop %s: %v\n", unit, err)
			return 1
		}
		if cmd == "stop" {
			return 0
		}
	} else if active { // start of a running service: nothing to do
		return 0
	}
	if err := s.start(unit, u); err != nil {
		fmt.Fprintf(s.stderr, "Failed to start %s: %v\n", unit, err)
		return 1
	}
	return 0
}

func (s standIn) pidFile(unit string) string { return filepath.Join(s.stateDir, unit+".pid") }

// pid is the service's main pid, if it runs (alive, not a zombie).
func (s standIn) pid(unit string) (int, bool) {
	b, err := os.ReadFile(s.pidFile(unit))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, processAlive(pid)
}

func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}

func (s standIn) start(unit string, u *Unit) error {
	argv, env, err := u.Command(os.ReadFile)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(s.stateDir, unit+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	fmt.Fprintf(logf, "---- systemctl (stand-in): starting %s: %q\n", unit, argv)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{servicePath}, env...)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return os.WriteFile(s.pidFile(unit), []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

func (s standIn) stop(unit string) error {
	pid, active := s.pid(unit)
	if !active {
		_ = os.Remove(s.pidFile(unit))
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(stopTimeout)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(stopTimeout)
		}
		time.Sleep(50 * time.Millisecond) // polling another process's exit: no channel to wait on
	}
	return os.Remove(s.pidFile(unit))
}

// StopService stops a service the stand-in started (for test cleanup), as
// `systemctl stop UNIT` with the stand-in's state in stateDir.
func StopService(stateDir, unit string) error {
	return standIn{stateDir: stateDir}.stop(unitName(unit))
}

// ServicePID is the main pid of a service the stand-in started, if it runs.
func ServicePID(stateDir, unit string) (int, bool) {
	return standIn{stateDir: stateDir}.pid(unitName(unit))
}
