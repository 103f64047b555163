package soak

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Kind is a kind of fault the soak injects.
type Kind string

// The faults of issue 46. Kills are SIGKILL followed by a restart as a Deployment (lbfed's
// processes: testinfra/deploy restarts them after 1 s) or a supervisor (Karmada's: the soak restarts
// them after the drawn downtime) would.
const (
	KillLbfedLeader      Kind = "kill-lbfed-leader"
	KillLbfedStandby     Kind = "kill-lbfed-standby"
	KillLbcfController   Kind = "kill-lbcf-controller"
	KillElbDriver        Kind = "kill-elb-driver"
	KillKarmadaCM        Kind = "kill-karmada-controller-manager"
	KillKarmadaAPIServer Kind = "kill-karmada-apiserver"
	KillKarmadaEtcd      Kind = "kill-karmada-etcd"
	PauseMemberAPIServer Kind = "pause-member-apiserver"
	CutMemberLink        Kind = "cut-member-link"
	AlteonFailover       Kind = "alteon-failover"
	AlteonSaveFails      Kind = "alteon-save-fails"
	AlteonSlow           Kind = "alteon-slow"
	DriverFail           Kind = "driver-fail"
	DriverTimeout        Kind = "driver-timeout"
	// PodKill: a serving pod's process dies without warning (the pod stays Ready until the
	// device's health check and then its deletion take it out). Not a control-plane fault.
	PodKill Kind = "pod-kill"
)

// Kinds lists every fault kind, in a fixed order (the PRNG draws from it).
var Kinds = []Kind{KillLbfedLeader, KillLbfedStandby, KillLbcfController, KillElbDriver, KillKarmadaCM,
	KillKarmadaAPIServer, KillKarmadaEtcd, PauseMemberAPIServer, CutMemberLink, AlteonFailover, AlteonSaveFails,
	AlteonSlow, DriverFail, DriverTimeout, PodKill}

// ControlPlane tells whether a fault is of the control plane alone: invariant 1 holds it to zero
// failed requests. The device's faults and a pod's death are the data plane's.
func (k Kind) ControlPlane() bool {
	switch k {
	case AlteonFailover, AlteonSaveFails, AlteonSlow, PodKill:
		return false
	}
	return true
}

// Fault is one drawn fault: its kind, target and how long it lasts (for a kill: the downtime
// before the restart; deploy's workloads come back after its own 1 s whatever Down says).
type Fault struct {
	Kind Kind
	// Target is the member (pause, cut, lbcf-controller kill) or "" when the kind has one target.
	Target string
	// Delay after the episode's start; Duration of a fault with an extent; Param a kind's knob
	// (the slow device's latency).
	Delay    time.Duration
	Duration time.Duration
	Param    time.Duration
}

func (f Fault) String() string {
	s := string(f.Kind)
	if f.Target != "" {
		s += "(" + f.Target + ")"
	}
	if f.Duration > 0 {
		s += " for " + f.Duration.String()
	}
	if f.Param > 0 {
		s += " latency " + f.Param.String()
	}
	return s
}

// Episode is a set of faults injected together after a quiet gap.
type Episode struct {
	Gap    time.Duration
	Faults []Fault
}

// Topology names what faults can target.
type Topology struct {
	// PushMembers can be cut off (network namespaces); every member's API server can be paused.
	PushMembers, Members []string
	// NoLinks: the members share the host network namespace (not root): no cut is drawn.
	NoLinks bool
}

// Plan draws n episodes from seed: the same seed and topology always give the same plan, so
// a run can be repeated.
func Plan(seed uint64, n int, topo Topology) []Episode {
	r := rand.New(rand.NewPCG(seed, 0x50a4))
	kinds := slices.Clone(Kinds)
	if topo.NoLinks {
		kinds = slices.DeleteFunc(kinds, func(k Kind) bool { return k == CutMemberLink })
	}
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(r.Int64N(int64(hi-lo)+1)).Round(time.Second)
	}
	out := make([]Episode, 0, n)
	for range n {
		e := Episode{Gap: between(10*time.Second, 40*time.Second)}
		// One fault in two episodes, two in three of the rest, else three.
		count := 1
		if x := r.IntN(6); x >= 3 {
			count = 2 + x/5
		}
		picked := map[Kind]bool{}
		for len(e.Faults) < count {
			k := kinds[r.IntN(len(kinds))]
			if picked[k] {
				continue
			}
			picked[k] = true
			f := Fault{Kind: k, Delay: between(0, 10*time.Second)}
			switch k {
			case KillLbcfController, PauseMemberAPIServer:
				f.Target = topo.Members[r.IntN(len(topo.Members))]
			case CutMemberLink:
				f.Target = topo.PushMembers[r.IntN(len(topo.PushMembers))]
			}
			switch k {
			case KillKarmadaCM, KillKarmadaAPIServer, KillKarmadaEtcd:
				f.Duration = between(0, 15*time.Second) // down before the supervisor restarts it
			case PauseMemberAPIServer:
				f.Duration = between(20*time.Second, 90*time.Second)
			case CutMemberLink:
				f.Duration = between(20*time.Second, 120*time.Second)
			case AlteonSaveFails, DriverFail, DriverTimeout:
				f.Duration = between(20*time.Second, 60*time.Second)
			case AlteonSlow:
				f.Duration = between(20*time.Second, 60*time.Second)
				f.Param = between(time.Second, 4*time.Second)
			case PodKill:
				f.Duration = between(5*time.Second, 20*time.Second) // dead, then deleted
			}
			e.Faults = append(e.Faults, f)
		}
		out = append(out, e)
	}
	return out
}

// Action is a change of the workload.
type Action string

// The workload's changes (issue 46): scale-ups and -downs, gated rollouts, pods deleted, a group
// given and taken a second LoadBalancer, OverridePolicy weights changed, a front door (MCS)
// created and deleted.
const (
	Scale      Action = "scale"
	Rollout    Action = "rollout"
	DeletePod  Action = "delete-pod"
	ToggleLB   Action = "toggle-lb"
	SetWeights Action = "set-weights"
	ToggleMCS  Action = "toggle-mcs"
)

// Actions lists the workload's changes in a fixed order.
var Actions = []Action{Scale, Rollout, DeletePod, ToggleLB, SetWeights, ToggleMCS}

// Change is one drawn workload change: on app App, after Wait; N is the replica count (Scale),
// Weights the per-member weights (SetWeights; nil: back to the group's own), Pick a number the
// change uses to choose (the pod to delete).
type Change struct {
	Wait    time.Duration
	Action  Action
	App     int
	N       int
	Weights map[string]int
	Pick    int
}

func (c Change) String() string {
	s := fmt.Sprintf("%s app %d", c.Action, c.App)
	switch c.Action {
	case Scale:
		s += fmt.Sprintf(" to %d", c.N)
	case SetWeights:
		s += fmt.Sprintf(" %v", c.Weights)
	}
	return s
}

// Changes returns the stream of workload changes drawn from seed: next() gives the next one.
func Changes(seed uint64, apps int, members []string) (next func() Change) {
	r := rand.New(rand.NewPCG(seed, 0xc4a6))
	return func() Change {
		c := Change{Wait: time.Duration(3+r.IntN(8)) * time.Second, Action: Actions[r.IntN(len(Actions))], App: r.IntN(apps), Pick: r.IntN(1 << 16)}
		switch c.Action {
		case Scale:
			c.N = 2 + r.IntN(6)
		case SetWeights:
			if r.IntN(4) > 0 {
				c.Weights = map[string]int{}
				for _, m := range members {
					c.Weights[m] = 1 + r.IntN(10)
				}
			}
		}
		return c
	}
}
