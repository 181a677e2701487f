package dra

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/actorlet/actorlet/messages"
)

// RegistryDir is the registration directory's name under the root dir
// (upstream: /var/lib/kubelet/plugins_registry).
const RegistryDir = "plugins_registry"

// PluginsDir is where drivers keep their own sockets under the root dir
// (upstream: /var/lib/kubelet/plugins; made at start for them).
const PluginsDir = "plugins"

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// Watcher watches the plugin registration directory as upstream's plugin
// manager: every socket that appears there (names starting with "." are
// ignored) is dialled, asked GetInfo, and, for a DRA driver ("DRAPlugin")
// whose services the kubelet speaks, handed on as a
// messages.DRADriverRegistered before NotifyRegistrationStatus tells the
// driver it is registered; any other plugin type or version is told why it
// is refused. A socket that goes away is a messages.DRADriverDeregistered;
// a socket made again (a restarted driver) registers again. A registration
// that fails is retried at the next rescan.
type Watcher struct {
	dir        string
	register   func(*messages.DRADriverRegistered)
	deregister func(*messages.DRADriverDeregistered)
	log        *slog.Logger
	// Rescan is how often the directory is read again whatever inotify
	// said (missed events, registrations to retry): default 5s.
	Rescan time.Duration

	mu   sync.Mutex
	regs map[string]registered // by socket path
	fail map[string]string     // socket path -> the identity that failed
}

type registered struct {
	ident            string // inode and modification time: a new socket registers again
	driver, endpoint string
}

// NewWatcher returns a watcher of dir (<root-dir>/plugins_registry). The
// callbacks are called from the watcher's goroutine and must be quick (an
// actor's Send). log may be nil.
func NewWatcher(dir string, register func(*messages.DRADriverRegistered), deregister func(*messages.DRADriverDeregistered), log *slog.Logger) *Watcher {
	if log == nil {
		log = slog.Default()
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return &Watcher{dir: dir, register: register, deregister: deregister, log: log.With("component", "dra-registration"),
		Rescan: 5 * time.Second, regs: map[string]registered{}, fail: map[string]string{}}
}

// Dir is the watched directory.
func (w *Watcher) Dir() string { return w.dir }

// Run makes the directory (0750) when missing and watches it until ctx
// ends. It fails only when the directory cannot be made or watched.
func (w *Watcher) Run(ctx context.Context) error {
	if err := os.MkdirAll(w.dir, 0o750); err != nil {
		return fmt.Errorf("plugin registration dir: %w", err)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("watch %s: inotify: %w", w.dir, err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	if _, err := unix.InotifyAddWatch(fd, w.dir, unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_TO|unix.IN_MOVED_FROM|unix.IN_DELETE_SELF); err != nil {
		_ = f.Close()
		return fmt.Errorf("watch %s: %w", w.dir, err)
	}
	changed := make(chan struct{}, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := f.Read(buf); err != nil {
				return
			}
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}()
	defer func() { _ = f.Close() }()
	w.log.Info("watching the plugin registration dir", "dir", w.dir)
	tick := time.NewTicker(w.Rescan)
	defer tick.Stop()
	for {
		w.scan(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
	}
}

// scan registers new sockets and deregisters gone ones.
func (w *Watcher) scan(ctx context.Context) {
	found := map[string]string{}
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		w.log.Warn("reading the plugin registration dir", "err", err)
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.Type()&fs.ModeSocket == 0 {
			continue
		}
		p := filepath.Join(w.dir, e.Name())
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			continue
		}
		found[p] = fmt.Sprintf("%d/%d.%d", st.Ino, st.Mtim.Sec, st.Mtim.Nsec)
	}
	w.mu.Lock()
	var gone []string
	for p, r := range w.regs {
		if found[p] != r.ident {
			gone = append(gone, p)
		}
	}
	sort.Strings(gone)
	for _, p := range gone {
		r := w.regs[p]
		delete(w.regs, p)
		w.log.Info("DRA driver deregistered: its registration socket is gone", "driver", r.driver, "endpoint", r.endpoint, "socket", p)
		w.deregister(&messages.DRADriverDeregistered{Driver: r.driver, Endpoint: r.endpoint})
	}
	for p := range w.fail {
		if _, ok := found[p]; !ok {
			delete(w.fail, p)
		}
	}
	var todo []string
	for p, ident := range found {
		if _, ok := w.regs[p]; !ok && w.fail[p] != ident+"!" {
			todo = append(todo, p)
		}
	}
	w.mu.Unlock()
	sort.Strings(todo)
	for _, p := range todo {
		r, final, err := w.registerSocket(ctx, p)
		w.mu.Lock()
		if err != nil {
			if w.fail[p] != found[p] {
				w.log.Warn("plugin registration failed", "socket", p, "err", err)
			}
			w.fail[p] = found[p]
			if final {
				w.fail[p] += "!" // told the plugin why: not retried until it makes a new socket
			}
			w.mu.Unlock()
			continue
		}
		delete(w.fail, p)
		r.ident = found[p]
		w.regs[p] = r
		w.mu.Unlock()
	}
}

// registerSocket registers the plugin on socket p. final: the plugin was
// refused (and told so), retrying is useless.
func (w *Watcher) registerSocket(ctx context.Context, p string) (registered, bool, error) {
	conn, err := grpc.NewClient("unix:"+p, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return registered{}, false, fmt.Errorf("RegisterPlugin error -- dial failed at socket %s, err: %v", p, err)
	}
	defer func() { _ = conn.Close() }()
	client := registerapi.NewRegistrationClient(conn)
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := client.GetInfo(ictx, &registerapi.InfoRequest{})
	if err != nil {
		return registered{}, false, fmt.Errorf("RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket %s, err: %v", p, err)
	}
	notify := func(ok bool, why string) error {
		nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := client.NotifyRegistrationStatus(nctx, &registerapi.RegistrationStatus{PluginRegistered: ok, Error: why})
		return err
	}
	refuse := func(why string) (registered, bool, error) {
		if err := notify(false, why); err != nil {
			return registered{}, false, fmt.Errorf("RegisterPlugin error -- failed to send error at socket %s, err: %v", p, err)
		}
		return registered{}, true, errors.New(why)
	}
	if info.GetType() != registerapi.DRAPlugin {
		return refuse(fmt.Sprintf("RegisterPlugin error -- no handler registered for plugin type: %s at socket %s", info.GetType(), p))
	}
	endpoint := info.GetEndpoint()
	if endpoint == "" {
		endpoint = p
	}
	if info.GetName() == "" {
		return refuse("RegisterPlugin error -- plugin validation failed with err: DRA driver name is empty")
	}
	if _, _, err := ChooseServices(info.GetSupportedVersions()); err != nil {
		return refuse(fmt.Sprintf("RegisterPlugin error -- plugin validation failed with err: invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %v", info.GetName(), endpoint, err))
	}
	w.register(&messages.DRADriverRegistered{Driver: info.GetName(), Endpoint: endpoint, Services: append([]string(nil), info.GetSupportedVersions()...)})
	if err := notify(true, ""); err != nil {
		w.deregister(&messages.DRADriverDeregistered{Driver: info.GetName(), Endpoint: endpoint})
		return registered{}, false, fmt.Errorf("RegisterPlugin error -- failed to send registration status at socket %s, err: %v", p, err)
	}
	w.log.Info("DRA driver registered", "driver", info.GetName(), "endpoint", endpoint, "services", info.GetSupportedVersions())
	return registered{driver: info.GetName(), endpoint: endpoint}, false, nil
}
