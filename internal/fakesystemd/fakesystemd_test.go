package fakesystemd

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// The fake as go-systemd's client (what the driver uses) sees it, on the
// real dbus-daemon.
func TestFakeSystemd(t *testing.T) {
	addr := StartBus(t)
	root := t.TempDir()
	if err := MakeTree(root, 2); err != nil {
		t.Fatal(err)
	}
	fake, err := Start(Config{Address: addr, Root: root, CgroupVersion: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	// a second systemd on the same bus cannot own the name
	if other, err := Start(Config{Address: addr, Root: root, CgroupVersion: 2}); err == nil {
		other.Close()
		t.Error("a second fake owned org.freedesktop.systemd1")
	}
	c, err := sddbus.NewConnection(func() (*dbus.Conn, error) { return dbus.Connect(addr) })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	if v, err := c.GetManagerProperty("Version"); err != nil || v != `"252"` {
		t.Errorf("Version = %s, %v", v, err)
	}
	// a slice and, implicitly, its parent; the job's result comes as
	// JobRemoved
	ch := make(chan string, 1)
	props := []sddbus.Property{sddbus.PropWants("a.slice"), {Name: "MemoryAccounting", Value: dbus.MakeVariant(true)},
		{Name: "MemoryMax", Value: dbus.MakeVariant(uint64(1 << 20))}}
	if _, err := c.StartTransientUnitContext(ctx, "a-b.slice", "replace", props, ch); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r != "done" {
		t.Errorf("start job: %s", r)
	}
	if got := fake.Units(); len(got) != 2 || got[0] != "a-b.slice" || got[1] != "a.slice" {
		t.Errorf("units %v", got)
	}
	u, _ := fake.Unit("a.slice")
	if !u.Implicit {
		t.Error("the parent slice was not started implicitly")
	}
	if ctrs, err := os.ReadFile(filepath.Join(root, "a.slice", "a-b.slice", "cgroup.controllers")); err != nil || string(ctrs) != "memory" {
		t.Errorf("a-b.slice cgroup.controllers %q, %v; want memory (MemoryAccounting)", ctrs, err)
	}
	// systemd's refusals
	for _, tc := range []struct {
		unit  string
		props []sddbus.Property
		err   string
	}{
		{"a-b.slice", nil, ErrUnitExists},
		{"a.slice", nil, ErrUnitExists}, // loaded as a parent
		{"x.scope", nil, ErrNotSupported},
		{"x.slice", []sddbus.Property{{Name: "Delegate", Value: dbus.MakeVariant(true)}}, ErrInvalidArgs},
		{"x.slice", []sddbus.Property{{Name: "Bogus", Value: dbus.MakeVariant(true)}}, ErrPropertyReadOnly},
		{"x.slice", []sddbus.Property{{Name: "MemoryMax", Value: dbus.MakeVariant(int32(1))}}, ErrInvalidArgs},
	} {
		_, err := c.StartTransientUnitContext(ctx, tc.unit, "replace", tc.props, nil)
		if dbusErrName(err) != tc.err {
			t.Errorf("start %s %v: %v, want %s", tc.unit, tc.props, err, tc.err)
		}
	}
	if err := c.SetUnitPropertiesContext(ctx, "a-b.slice", true, sddbus.Property{Name: "TasksMax", Value: dbus.MakeVariant(uint64(5))}); err != nil {
		t.Fatal(err)
	}
	if u, _ := fake.Unit("a-b.slice"); u.Properties["TasksMax"].Value() != uint64(5) || u.Properties["MemoryMax"].Value() != uint64(1<<20) {
		t.Errorf("a-b.slice properties %v", u.Properties)
	}
	var path dbus.ObjectPath
	obj := dbusObject(t, addr)
	if err := obj.Call(ManagerIf+".GetUnit", 0, "a-b.slice").Store(&path); err != nil || path != "/org/freedesktop/systemd1/unit/a_2db_2eslice" {
		t.Errorf("GetUnit = %s, %v", path, err)
	}
	// a stop with a process in a cgroup below fails its job and keeps it
	procs := filepath.Join(root, "a.slice", "a-b.slice", "cgroup.procs")
	if err := os.WriteFile(procs, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StopUnitContext(ctx, "a.slice", "replace", ch); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r != "failed" {
		t.Errorf("stop with a process: job %s, want failed", r)
	}
	if _, err := os.Stat(procs); err != nil {
		t.Errorf("the cgroup with a process was removed: %v", err)
	}
	if err := os.WriteFile(procs, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StopUnitContext(ctx, "a.slice", "replace", ch); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r != "done" {
		t.Errorf("stop: job %s", r)
	}
	if _, err := os.Stat(filepath.Join(root, "a.slice")); !os.IsNotExist(err) {
		t.Errorf("a.slice is still there: %v", err)
	}
	if units := fake.Units(); len(units) != 0 {
		t.Errorf("units left %v", units)
	}
	if err := c.ResetFailedUnitContext(ctx, "a.slice"); dbusErrName(err) != ErrNoSuchUnit {
		t.Errorf("ResetFailedUnit of a unit that is gone: %v", err)
	}
}

func dbusErrName(err error) string {
	if e, ok := err.(dbus.Error); ok {
		return e.Name
	}
	if e, ok := err.(*dbus.Error); ok {
		return e.Name
	}
	return ""
}

func dbusObject(t *testing.T, addr string) dbus.BusObject {
	c, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.Object(BusName, ManagerPath)
}
