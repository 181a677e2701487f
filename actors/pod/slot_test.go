package pod

import "testing"

func TestStartSlot(t *testing.T) {
	tests := []struct {
		name      string
		from      startSlot
		call      string // needed, grant or release
		wantWait  bool   // needed
		wantAsk   bool   // needed
		wantOK    bool   // grant, release
		wantState startSlot
	}{
		{name: "needed first time: wait and ask", from: slotNone, call: "needed", wantWait: true, wantAsk: true, wantState: slotAsked},
		{name: "needed again while asked: wait, ask no more", from: slotAsked, call: "needed", wantWait: true, wantState: slotAsked},
		{name: "needed while held: go", from: slotHeld, call: "needed", wantState: slotHeld},
		{name: "needed after release: go, never ask again", from: slotDone, call: "needed", wantState: slotDone},

		{name: "grant of the slot asked", from: slotAsked, call: "grant", wantOK: true, wantState: slotHeld},
		{name: "grant never asked for", from: slotNone, call: "grant", wantState: slotNone},
		{name: "grant again while held", from: slotHeld, call: "grant", wantState: slotHeld},
		{name: "grant after release", from: slotDone, call: "grant", wantState: slotDone},

		{name: "release of a held slot tells the parent", from: slotHeld, call: "release", wantOK: true, wantState: slotDone},
		{name: "release while asked tells the parent", from: slotAsked, call: "release", wantOK: true, wantState: slotDone},
		{name: "release never asked: nothing to tell", from: slotNone, call: "release", wantState: slotNone},
		{name: "release twice tells the parent once", from: slotDone, call: "release", wantState: slotDone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.from
			switch tt.call {
			case "needed":
				wait, ask := s.needed()
				if wait != tt.wantWait || ask != tt.wantAsk {
					t.Errorf("needed() = wait %v ask %v, want %v %v", wait, ask, tt.wantWait, tt.wantAsk)
				}
			case "grant":
				if got := s.grant(); got != tt.wantOK {
					t.Errorf("grant() = %v, want %v", got, tt.wantOK)
				}
			case "release":
				if got := s.release(); got != tt.wantOK {
					t.Errorf("release() = %v, want %v", got, tt.wantOK)
				}
			default:
				t.Fatalf("unknown call %q", tt.call)
			}
			if s != tt.wantState {
				t.Errorf("state %d, want %d", s, tt.wantState)
			}
			if s.held() != (tt.wantState == slotHeld) {
				t.Errorf("held() = %v in state %d", s.held(), s)
			}
		})
	}
}

// A pod's whole start: one StartSlot asked, one StartDone told.
func TestStartSlotOneStart(t *testing.T) {
	var s startSlot
	asks, tells := 0, 0
	for range 3 { // the plan asks for the sandbox again while waiting
		if wait, ask := s.needed(); !wait {
			t.Fatal("started before the slot was granted")
		} else if ask {
			asks++
		}
	}
	if !s.grant() || s.grant() {
		t.Fatal("grant: want true once")
	}
	if wait, _ := s.needed(); wait {
		t.Fatal("waits with the slot held")
	}
	for range 2 {
		if s.release() {
			tells++
		}
	}
	if asks != 1 || tells != 1 {
		t.Fatalf("StartSlot sent %d times, StartDone %d times: want 1 and 1", asks, tells)
	}
}
