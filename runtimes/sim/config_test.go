package sim

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestAddFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Config
		wantErr bool
	}{
		{"defaults", nil, Config{IPBase: DefaultIPBase}, false},
		{"all flags", []string{"--start-latency=150ms", "--stop-latency=2s", "--fault-rate=0.25",
			"--fault-methods=CreateContainer,StartContainer", "--fault-seed=7", "--ip-base=127.9.0.1"},
			Config{StartLatency: 150 * time.Millisecond, StopLatency: 2 * time.Second, FaultRate: 0.25,
				FaultMethods: []string{"CreateContainer", "StartContainer"}, Seed: 7, IPBase: "127.9.0.1"}, false},
		{"rate above 1", []string{"--fault-rate=1.5"}, Config{}, true},
		{"ip outside loopback", []string{"--ip-base=10.0.0.1"}, Config{}, true},
		{"not an ip", []string{"--ip-base=nope"}, Config{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg Config
			fs := pflag.NewFlagSet("sim", pflag.ContinueOnError)
			cfg.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := cfg.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate = %v, wantErr %t", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if cfg.StartLatency != tt.want.StartLatency || cfg.StopLatency != tt.want.StopLatency ||
				cfg.FaultRate != tt.want.FaultRate || cfg.Seed != tt.want.Seed || cfg.IPBase != tt.want.IPBase ||
				len(cfg.FaultMethods) != len(tt.want.FaultMethods) {
				t.Fatalf("cfg = %+v, want %+v", cfg, tt.want)
			}
			for i := range cfg.FaultMethods {
				if cfg.FaultMethods[i] != tt.want.FaultMethods[i] {
					t.Fatalf("fault methods %v", cfg.FaultMethods)
				}
			}
		})
	}
}
