// Command dradriver is actorlet's small DRA test driver: a kubelet plugin
// built on k8s.io/dynamic-resource-allocation's kubeletplugin helper that
// publishes N fake devices of one node in a ResourceSlice, prepares a claim
// by writing a CDI spec whose container edits set an environment variable
// naming the claim, and records every prepare and unprepare in a JSON-lines
// log the end-to-end tests read. It exists for tests only: the agent never
// links it (hack/check-imports.sh). See README.md beside it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// config is the driver's command line.
type config struct {
	driverName   string
	nodeName     string
	kubeconfig   string
	registrarDir string
	pluginDir    string
	cdiDir       string
	stateFile    string
	devices      int
	model        string

	failPrepareFor string
	prepareDelay   time.Duration
	unhealthy      []string
}

// parseFlags reads the command line into a config and checks it: every
// setting the driver cannot honour is an error naming the flag.
func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := pflag.NewFlagSet("dradriver", pflag.ContinueOnError)
	fs.StringVar(&c.driverName, "driver-name", "dra.actorlet.dev", "the DRA driver name (a DNS subdomain); also the CDI vendor of its devices")
	fs.StringVar(&c.nodeName, "node-name", "", "the Node whose devices this driver publishes (required)")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the node (system:node:<node-name>) or of an admin (required)")
	fs.StringVar(&c.registrarDir, "registrar-dir", "", "the agent's plugin registration directory, <root-dir>/plugins_registry (required)")
	fs.StringVar(&c.pluginDir, "plugin-dir", "", "directory of the driver's DRA socket, <root-dir>/plugins/<driver-name> (required)")
	fs.StringVar(&c.cdiDir, "cdi-dir", "/var/run/cdi", "directory the container runtime reads CDI specs from")
	fs.StringVar(&c.stateFile, "state-file", "", "JSON-lines log of prepare/unprepare calls (default <plugin-dir>/calls.jsonl)")
	fs.IntVar(&c.devices, "devices", 2, "how many devices the node's ResourceSlice lists (1-128)")
	fs.StringVar(&c.model, "model", "actorlet-test", "the model attribute of every device")
	fs.StringVar(&c.failPrepareFor, "fail-prepare-for", "", "answer an error when preparing the claim of this name, or a claim reserved for the pod of this name")
	fs.DurationVar(&c.prepareDelay, "prepare-delay", 0, "wait this long in every prepare call before answering (a slow driver)")
	fs.StringSliceVar(&c.unhealthy, "unhealthy", nil, "devices to report Unhealthy through the health service (the others are Healthy)")
	logFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(logFlags) // -v and friends
	fs.AddGoFlagSet(logFlags)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(c.driverName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--driver-name %q: %s", c.driverName, strings.Join(msgs, "; ")))
	}
	for _, f := range []struct{ flag, v string }{{"--node-name", c.nodeName}, {"--kubeconfig", c.kubeconfig}, {"--registrar-dir", c.registrarDir}, {"--plugin-dir", c.pluginDir}, {"--cdi-dir", c.cdiDir}} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("%s is required", f.flag))
		}
	}
	if c.devices < 1 || c.devices > 128 {
		errs = append(errs, fmt.Errorf("--devices %d: want 1 to 128 (one ResourceSlice holds at most 128 devices)", c.devices))
	}
	if c.prepareDelay < 0 {
		errs = append(errs, fmt.Errorf("--prepare-delay %v: must not be negative", c.prepareDelay))
	}
	for _, d := range c.unhealthy {
		if !knownDevice(d, c.devices) {
			errs = append(errs, fmt.Errorf("--unhealthy %q: not one of dev-0..dev-%d", d, c.devices-1))
		}
	}
	if c.stateFile == "" && c.pluginDir != "" {
		c.stateFile = filepath.Join(c.pluginDir, "calls.jsonl")
	}
	return c, errors.Join(errs...)
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if errors.Is(err, pflag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dradriver:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "dradriver:", err)
		os.Exit(1)
	}
}

// run starts the driver with a client from --kubeconfig and serves until
// ctx ends or the helper reports a fatal error.
func run(ctx context.Context, c *config) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", c.kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", c.kubeconfig, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	d, err := start(ctx, c, cs, cancel)
	if err != nil {
		return err
	}
	klog.InfoS("dradriver serving", "driver", c.driverName, "node", c.nodeName, "devices", c.devices,
		"registrar", filepath.Join(c.registrarDir, c.driverName+"-reg.sock"), "socket", filepath.Join(c.pluginDir, "dra.sock"), "cdiDir", c.cdiDir)
	<-ctx.Done()
	d.helper.Stop()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}
