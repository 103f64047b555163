package soak

import (
	"reflect"
	"testing"
	"time"
)

func TestPlanIsRepeatableAndDrawsEveryKind(t *testing.T) {
	topo := Topology{PushMembers: []string{"m1", "m2"}, Members: []string{"m1", "m2", "m3"}}
	a, b := Plan(7, 200, topo), Plan(7, 200, topo)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two plans")
	}
	if reflect.DeepEqual(a, Plan(8, 200, topo)) {
		t.Fatal("two seeds gave the same plan")
	}
	seen := map[Kind]int{}
	for _, e := range a {
		if len(e.Faults) < 1 || len(e.Faults) > 3 {
			t.Fatalf("%d faults in an episode", len(e.Faults))
		}
		for _, f := range e.Faults {
			seen[f.Kind]++
			if f.Kind == CutMemberLink && f.Target == "m3" {
				t.Fatal("a cut drawn for the Pull member, which has no link")
			}
		}
	}
	for _, k := range Kinds {
		if seen[k] == 0 {
			t.Errorf("%s never drawn in 200 episodes", k)
		}
	}
	for _, e := range Plan(7, 200, Topology{Members: []string{"m1"}, NoLinks: true}) {
		for _, f := range e.Faults {
			if f.Kind == CutMemberLink {
				t.Fatal("a cut drawn without links")
			}
		}
	}
}

func TestCause(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	cut := Window{Kind: CutMemberLink, Start: at(0), End: at(30)}
	slow := Window{Kind: AlteonSlow, Start: at(0), End: at(30)}
	for _, tc := range []struct {
		name   string
		at     int
		stops  []PodStop
		faults []Window
		want   string
	}{
		{"nothing in force", 100, nil, nil, "no-fault"},
		{"a control-plane fault in force", 10, nil, []Window{cut}, "control-plane:cut-member-link"},
		{"in its aftermath", 30 + 59, nil, []Window{cut}, "control-plane:cut-member-link"},
		{"past its aftermath", 30 + 61, nil, []Window{cut}, "no-fault"},
		{"a device fault wins", 10, nil, []Window{cut, slow}, "data-plane:alteon-slow"},
		{"a killed pod within the health check bound", 108, []PodStop{{At: at(100), Killed: true}}, nil, "pod-killed"},
		{"a killed pod past it", 113, []PodStop{{At: at(100), Killed: true}}, nil, "no-fault"},
		{"a deleted pod stopped in rotation during a fault", 20, []PodStop{{At: at(15)}}, []Window{cut}, "pod-stopped:cut-member-link"},
		{"a deleted pod stopped in rotation with no fault", 105, []PodStop{{At: at(100)}}, nil, "no-fault"},
		{"the latest stop counts", 108, []PodStop{{At: at(100)}, {At: at(104), Killed: true}}, nil, "pod-killed"},
		{"a fault still in force", 10, nil, []Window{{Kind: DriverFail, Start: at(0)}}, "control-plane:driver-fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Cause(FailedRequest{At: at(tc.at)}, tc.stops, tc.faults)
			if got != tc.want {
				t.Errorf("Cause = %q, want %q", got, tc.want)
			}
			if Violation(got) != (got == "no-fault" || got[:8] == "control-") {
				t.Errorf("Violation(%q) = %v", got, Violation(got))
			}
		})
	}
}

func TestDiff(t *testing.T) {
	m := func(ip string, w int) Member { return Member{IP: ip, Port: 8080, Weight: w, Enabled: true} }
	want := Want{"127.7.0.1:80": {m("127.1.0.2", 1), m("127.2.0.2", 3)}, "127.7.0.2:80": nil}
	for _, tc := range []struct {
		name string
		unit Unit
		want int // problems
	}{
		{"exact", Unit{Services: map[string]int{"127.7.0.1:80": 1, "127.7.0.2:80": 1},
			Members: map[string][]Member{"127.7.0.1:80": {m("127.2.0.2", 3), m("127.1.0.2", 1)}}}, 0},
		{"missing and orphan", Unit{Services: map[string]int{"127.7.0.1:80": 1, "127.7.0.2:80": 1},
			Members: map[string][]Member{"127.7.0.1:80": {m("127.1.0.2", 1), m("127.3.0.2", 1)}}}, 2},
		{"a weight that differs", Unit{Services: map[string]int{"127.7.0.1:80": 1, "127.7.0.2:80": 1},
			Members: map[string][]Member{"127.7.0.1:80": {m("127.1.0.2", 1), m("127.2.0.2", 1)}}}, 2},
		{"a member draining", Unit{Services: map[string]int{"127.7.0.1:80": 1, "127.7.0.2:80": 1},
			Members: map[string][]Member{"127.7.0.1:80": {m("127.1.0.2", 1), {IP: "127.2.0.2", Port: 8080, Weight: 3}}}}, 2},
		{"two virtual services, one of no LoadBalancer", Unit{Services: map[string]int{"127.7.0.1:80": 2, "127.7.0.2:80": 1, "127.7.0.9:80": 1},
			Members: map[string][]Member{"127.7.0.1:80": {m("127.1.0.2", 1), m("127.2.0.2", 3)}}}, 2},
		{"an orphan real server", Unit{Services: map[string]int{"127.7.0.1:80": 1, "127.7.0.2:80": 1}, Orphans: []string{"real server 9"},
			Members: map[string][]Member{"127.7.0.1:80": {m("127.1.0.2", 1), m("127.2.0.2", 3)}}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Diff(tc.unit, want); len(got) != tc.want {
				t.Errorf("Diff = %q, want %d problems", got, tc.want)
			}
		})
	}
}

func TestUnbacked(t *testing.T) {
	u := Unit{Name: "a", Members: map[string][]Member{"127.7.0.1:80": {{IP: "127.1.0.2", Port: 8080, Weight: 1, Enabled: true}}}}
	recs := []Record{
		{Name: "held", Service: "127.7.0.1:80", Addr: "127.1.0.2:8080", Registered: true},
		{Name: "missing", Service: "127.7.0.1:80", Addr: "127.1.0.3:8080", Registered: true, Version: "5"},
		{Name: "not yet", Service: "127.7.0.1:80", Addr: "127.1.0.4:8080"},
		{Name: "deleting", Service: "127.7.0.1:80", Addr: "127.1.0.5:8080", Registered: true, Deleting: true},
	}
	got := Unbacked(recs, u)
	if len(got) != 1 || got["missing@5"] == "" {
		t.Errorf("Unbacked = %v, want only missing@5", got)
	}
}
