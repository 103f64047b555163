package member

import (
	"context"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
)

// reportHistory keeps a member's last reports per group (their digests and which items are
// which pod), so that the federation's answer about a report that is no longer the latest is
// still understood: in a rollout the member reports again before the answer arrives.
type reportHistory struct {
	mu sync.Mutex
	m  map[types.NamespacedName][]reportEntry // newest first
}

// reportHistoryDepth bounds the reports kept per group.
const reportHistoryDepth = 8

type reportEntry struct {
	digest string
	pods   map[string][]int // pod name + "/" + ShortUID -> item positions
}

// Add records a report of group key (no-op when it is the latest already).
func (h *reportHistory) Add(key types.NamespacedName, items []string) {
	digest := lbcfv1beta1.ReportDigest(items)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[types.NamespacedName][]reportEntry{}
	}
	old := h.m[key]
	if len(old) > 0 && old[0].digest == digest {
		return
	}
	e := reportEntry{digest: digest, pods: map[string][]int{}}
	for i, it := range items {
		if name := lbcfv1beta1.ItemPodName(it); name != "" {
			k := name + "/" + itemUID(it)
			e.pods[k] = append(e.pods[k], i)
		}
	}
	h.m[key] = append([]reportEntry{e}, old[:min(len(old), reportHistoryDepth-1)]...)
}

// Forget drops a deleted group.
func (h *reportHistory) Forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, key)
}

func (h *reportHistory) find(key types.NamespacedName, digest string) (reportEntry, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.m[key] {
		if e.digest == digest {
			return e, true
		}
	}
	return reportEntry{}, false
}

// itemUID is the <uid8> field of a pod item.
func itemUID(item string) string {
	f := strings.SplitN(item, "|", 4)
	if len(f) < 3 {
		return ""
	}
	return f[2]
}

// registrations is the member's controller.RegistrationView: the federation's
// lbfed.io/registered annotation on the group (propagated by Karmada), read against the member's
// own recent reports.
type registrations struct {
	History *reportHistory

	mu    sync.Mutex
	cache map[types.NamespacedName]decodedRegistration
}

type decodedRegistration struct {
	raw  string
	bits map[string][]bool // report digest -> bits
	err  error
}

func (v *registrations) decoded(bg *lbcfv1beta1.BackendGroup) decodedRegistration {
	key := client.ObjectKeyFromObject(bg)
	raw := bg.Annotations[lbcfv1beta1.AnnotationRegistered]
	v.mu.Lock()
	defer v.mu.Unlock()
	if d, ok := v.cache[key]; ok && d.raw == raw {
		return d
	}
	d := decodedRegistration{raw: raw, bits: map[string][]bool{}}
	reg, err := lbcfv1beta1.ParseRegistration(raw)
	if err != nil {
		d.err = err
	}
	for _, m := range reg {
		bits, err := m.Registered()
		if err != nil {
			d.err = err
			continue
		}
		d.bits[m.Report] = bits
	}
	if v.cache == nil {
		v.cache = map[types.NamespacedName]decodedRegistration{}
	}
	v.cache[key] = d
	return d
}

// PodRegistered implements controller.RegistrationView.
func (v *registrations) PodRegistered(ctx context.Context, bg *lbcfv1beta1.BackendGroup, pod *corev1.Pod) (controller.GateState, error) {
	d := v.decoded(bg)
	if d.err != nil {
		ctrl.LoggerFrom(ctx).Error(d.err, "unreadable registration annotation", "backendGroup", client.ObjectKeyFromObject(bg))
	}
	key := client.ObjectKeyFromObject(bg)
	for digest, bits := range d.bits {
		e, ok := v.History.find(key, digest)
		if !ok {
			continue // another member's report, or one of ours we no longer remember
		}
		idx := e.pods[pod.Name+"/"+lbcfv1beta1.ShortUID(pod.UID)]
		if len(idx) == 0 {
			return controller.GateState{Known: true, Message: "not in this member's report the federation answered yet"}, nil
		}
		for _, i := range idx {
			if i >= len(bits) || !bits[i] {
				return controller.GateState{Known: true, Message: "waiting for the federation to register it"}, nil
			}
		}
		return controller.GateState{Known: true, Registered: true}, nil
	}
	return controller.GateState{}, nil
}
